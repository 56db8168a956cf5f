"""The SDS protocol engine (Scalable Data Sync + SDS-R), sans-I/O.

Pure and synchronous: no sockets, no files, no wall clock, no global
randomness; every call that needs time takes ``now_ms``. Wire-compatible with
@waku/sds 0.0.8. See :mod:`sdschat.sds.channel` for the behaviour decisions.

The modules run compiled to C by mypyc when a build matching these sources is
present, else as Python: :mod:`sdschat.sds.native`.
"""

from . import native

native.BUILD = native.select(__path__)

from . import repair, wire  # noqa: E402 - after the build is selected
from .archive import LogArchive
from .bloom import BloomFilter, RollingBloomFilter
from .channel import MessageChannel, message_id
from .config import ChannelConfig, RepairConfig
from .events import (
    Acknowledged,
    Delivered,
    EphemeralReceived,
    Event,
    Evicted,
    GapDetected,
    Lost,
    Missing,
    Outgoing,
    PossiblyAcknowledged,
    Rejected,
    RepairRequested,
    RepairScheduled,
    RepairServed,
    SyncReceived,
)
from .state import CacheRow, ChannelState, InRow, LogRow, MissingRow, OutRow, RequestRow
from .wire import HistoryEntry, Message, WireError

__all__ = [
    "Acknowledged",
    "BloomFilter",
    "CacheRow",
    "ChannelConfig",
    "ChannelState",
    "Delivered",
    "EphemeralReceived",
    "Event",
    "Evicted",
    "GapDetected",
    "HistoryEntry",
    "InRow",
    "LogArchive",
    "LogRow",
    "Lost",
    "Message",
    "MessageChannel",
    "Missing",
    "MissingRow",
    "OutRow",
    "Outgoing",
    "PossiblyAcknowledged",
    "Rejected",
    "RepairConfig",
    "RepairRequested",
    "RepairScheduled",
    "RepairServed",
    "RequestRow",
    "RollingBloomFilter",
    "SyncReceived",
    "WireError",
    "message_id",
    "repair",
    "wire",
]
