"""The state of one shard, declared once for the four parts that share it.

A :class:`~sdschat.sim.shard.Shard` is one object made of four parts, one
module each: :class:`~sdschat.sim.network.Network` (publishing),
:class:`~sdschat.sim.delivery.Delivery` (receiving),
:class:`~sdschat.sim.rows.EventRows` (engine events -> rows) and
:class:`~sdschat.sim.stores.StoreClients` (store nodes). They read and write
the same attributes on the event loop's hot path, as plain attributes rather
than through collaborator objects, so the attributes are declared here, with
their types and meaning, and every part inherits the declarations;
:class:`~sdschat.sim.shard.Shard` sets them up. The few methods one part
calls on another are declared here too, for the type checker only: each is
defined by the part named beside it, which comes before this class in the
shard's method order.

Declarations without values create no class attributes, so an instance reads
its attributes exactly as before. The module also names the shapes of what a
shard holds (heap entries, frames in flight, store requests), which
:mod:`sdschat.sim.schedule` describes.
"""

from __future__ import annotations

from array import array
from collections import Counter, deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

import numpy as np
import numpy.typing as npt

from sdschat.sds import BloomFilter, ChannelConfig, Event, HistoryEntry, MessageChannel, Outgoing, sds_pb2
from sdschat.sds.channel import Frame

from . import output
from .params import SimParams
from .plan import ChurnTimeline, Plan, StoreOutages

__all__ = [
    "ANSWER",
    "ASK",
    "LATE",
    "TIMEOUT",
    "Cursor",
    "FrameCtx",
    "FrameKey",
    "FrameMsg",
    "FramePublished",
    "HeapEntry",
    "IdsQuery",
    "Indices",
    "Parsed",
    "Positions",
    "ShardState",
    "SinceQuery",
    "StoreEntry",
    "StoreItem",
    "StoreKey",
    "StoreOp",
    "StoreQuery",
]

#: ``(byte_index, mask)`` pairs of a message id in a bloom filter (:meth:`~sdschat.sds.BloomFilter.positions`)
Positions = tuple[tuple[int, int], ...]
#: a received frame as every receiver gets it: the engine's :class:`~sdschat.sds.channel.Frame` (read once), or
#: the protobuf message itself when the shard runs without ``frame_view``
Parsed = Frame | sds_pb2.Message
#: members, or their latencies or arrival times, as numpy arrays (one entry per copy of a frame)
Indices = npt.NDArray[np.int64]
#: a frame by publisher and the publisher's frame counter
FrameKey = tuple[int, int]
#: what rows need to know about the frame that caused an engine's events: (node-level reason, publisher, frame
#: sender, creation time, message id); the reason is ``"store"`` for a frame fed from a store's answer
FrameCtx = tuple[str, str, str, int, str]
#: a frame as it travels between workers: (publisher, counter, t, data, reason, message_id, loss, duplicate)
FrameMsg = tuple[int, int, int, bytes, str, str, float, float]
#: a frame as the results list it: (publisher, counter, t, reason, message_id, size)
FramePublished = tuple[int, int, int, str, str, int]

#: a frame as a store keeps it: (creation time, frame, its id's bloom positions or None for a sync, reason,
#: message id, size)
StoreEntry = tuple[int, Parsed, Positions | None, str, str, int]
#: a kept frame's place in a store: arrival time, publisher, publisher's frame counter
StoreKey = tuple[int, int, int]
#: a kept frame: (arrival time, publisher, counter, entry)
StoreItem = tuple[int, int, int, StoreEntry]
#: what a store request asks for: ``("ids", message ids)``, or ``("since", since_ms, the key of the last page's
#: last frame, None for the first page)``
IdsQuery = tuple[Literal["ids"], tuple[str, ...]]
SinceQuery = tuple[Literal["since"], int, StoreKey | None]
StoreQuery = IdsQuery | SinceQuery

#: what a member's store event is (:mod:`sdschat.sim.stores`): its queued ids are due to be asked for, the first
#: answer to a request arrives, the request timed out, or a later store's answer to a request by id arrives
ASK: Final = 0
ANSWER: Final = 1
TIMEOUT: Final = 2
LATE: Final = 3
#: ``(ASK,)``, ``(ANSWER, query, store, time at the store, time asked)``, ``(TIMEOUT, query)`` or
#: ``(LATE, query by id, store, time at the store)``
StoreOp = (
    tuple[Literal[0]]
    | tuple[Literal[1], StoreQuery, int, int, int]
    | tuple[Literal[2], StoreQuery]
    | tuple[Literal[3], IdsQuery, int, int]
)


class Cursor:
    """One frame's pending arrivals at this shard's members."""

    __slots__ = ("key", "pb", "positions", "times", "receivers", "i", "ctx")

    def __init__(
        self,
        key: FrameKey,
        pb: Parsed,
        positions: Positions | None,
        times: array[int],
        receivers: array[int],
        ctx: FrameCtx,
    ) -> None:
        self.key = key
        self.pb = pb
        self.positions = positions
        #: arrival times, sorted, and the member each copy reaches (C arrays: see Network.ingest_one)
        self.times = times
        self.receivers = receivers
        #: the next copy to deliver
        self.i = 0
        self.ctx = ctx


#: an entry of a shard's heap, ``(t, kind, a, b, obj)`` (:mod:`sdschat.sim.schedule`): ``obj`` is the
#: :class:`Cursor` of an ``ARRIVALS`` entry, the :data:`StoreOp` of a ``STORE`` entry, None otherwise
HeapEntry = tuple[int, int, int, int, Cursor | StoreOp | None]


class ShardState:
    """What every part of a :class:`~sdschat.sim.shard.Shard` reads and writes (set up by the shard)."""

    # ------------------------------------------------------------- the run
    p: SimParams
    plan: Plan
    #: the engine configuration every member runs (:func:`~sdschat.sim.params.channel_config`)
    config: ChannelConfig
    #: this shard's number and the number of shards: it owns the members ``r % workers == wid``
    wid: int
    workers: int
    out_dir: Path | None
    #: hand receivers the engine's :class:`~sdschat.sds.channel.Frame` (read once) instead of the protobuf message
    frame_view: bool
    sink: output.EventSink
    #: the end (exclusive) of the last run()
    until: int
    #: the virtual time of the latest progress report
    last_t: int
    #: wall time spent processing events (the rest, with workers, is waiting for the others)
    busy_s: float
    #: with workers: wall time blocked waiting for another worker's promise or flag
    wait_s: float
    #: called as ``on_progress(t)`` about every 4,096 events (single-worker progress display)
    on_progress: Callable[[int], None] | None

    # ----------------------------------------------------------- members
    #: group size, and every member's id by index (rows carry the index; ids are put in when a shard is written)
    n: int
    pids: list[str]
    #: this shard's members, and the same as a mask over all members
    owned: list[int]
    mine: npt.NDArray[np.bool_]
    #: every member's engine by index; only the owned members have one (the other slots hold None, never read)
    chans: list[MessageChannel]
    online: list[bool]
    #: each owned member's scheduled tick (its engine's next deadline when scheduled; an older tick is stale)
    dl: list[int]
    #: member -> ids it has a ``received`` row for but has not delivered yet (waiting on dependencies)
    waiting: dict[int, set[str]]
    heap: list[HeapEntry]
    #: churn: whether members still go offline and come back, and when they do
    churning: bool
    timeline: ChurnTimeline | None

    # ------------------------------------------------------------ frames
    #: per member: frames published so far (the next frame's counter)
    counter: list[int]
    #: frames in flight here (cursors in the heap), and those of them that are not syncs
    cursors: int
    busy_cursors: int
    #: frames published since the last exchange with the other workers
    outbox: list[FrameMsg]
    frames_published: list[FramePublished]
    #: (publisher, counter) -> [copies, delivered]
    frame_recv: dict[FrameKey, list[int]]
    #: the network's loss and duplication probabilities now (both 0 after a clean settle)
    loss: float
    duplicate: float
    #: every message's send time, learnt from the first frame of it this shard sees (each shard sees all)
    sent_at: dict[str, int]
    #: a bloom filter of the engines' parameters, for the bloom positions of each message id (made once)
    bloom: BloomFilter
    #: delayed acks are configured: every receive may move a member's deadline
    _always: bool
    #: member -> size of the repair answer it just published (reported with the RepairServed that follows)
    _repair_bytes: dict[int, int]
    #: message id -> (this shard's members in its response group, by local index; their ids for the engines)
    #: (see Delivery._response_group)
    _answer_group: dict[str, tuple[Indices, frozenset[str] | None]]

    # ------------------------------------------------- skipping held copies
    #: a copy of a message reaching a member that already holds it, with no repair answer of its own pending,
    #: skips the engine (which would only count a duplicate; see Delivery._arrivals). ``held``: message id ->
    #: one byte per owned member (index ``r // workers``), set with the member's ``received`` row (a message
    #: once received stays logged); ``answering``: message id -> members that scheduled an answer to a repair
    #: request for it (never fewer than the engines' own: an entry is only dropped when the answer went out
    #: or was called off)
    skip_held: bool
    held: dict[str, bytearray]
    answering: dict[str, set[int]]
    #: engine receives skipped: added to the engines' "duplicates" in finish()
    held_skipped: int
    #: copies dropped when their frame was scheduled (Delivery._skip_held_copies): the latest one's time (the
    #: frame is in flight until then, as far as quiescence goes), and (last time, frame key, times) of those
    #: that may still be due at the end of the run
    skipped_until: int
    _skips: deque[tuple[int, FrameKey, Indices]]
    #: where the last quiescence check found a member with work (the next check starts there)
    _busy_hint: int

    # ------------------------------------------------------------ counts
    counts: Counter[str]
    frame_count: Counter[str]
    frame_bytes: Counter[str]
    #: send-to-shown (first copy) and send-to-delivered (causal order) latencies of this shard's rows: ms -> n
    latency: dict[str, Counter[int]]

    # ------------------------------------------------------------ stores (set up by StoreClients._stores_init)
    n_stores: int
    outages: StoreOutages
    #: per store: message id -> its first content frame there
    store_ids: list[dict[str, StoreItem]]
    #: per store: every frame there; sorted when a catch-up reads it
    store_frames: list[list[StoreItem]]
    _store_sorted: list[bool]
    #: member -> ids queued for the next request
    st_want: dict[int, dict[str, None]]
    #: member -> ids asked for already
    st_asked: dict[int, set[str]]
    #: members with a request due
    st_timer: set[int]
    #: members catching up
    st_catching: set[int]
    #: per member: store events scheduled (the heap's tie-break)
    st_seq: list[int]
    #: per member: requests drawn
    st_queries: list[int]
    #: member -> when it went offline
    st_offline_since: dict[int, int]
    #: answers on their way (like frames in flight, they keep the run from stopping; a request nobody answers
    #: does not: it can change nothing)
    st_outstanding: int

    if TYPE_CHECKING:
        # what one part calls on another (each is defined by the part named)

        def _publish(self, r: int, out: Outgoing, t: int) -> int: ...  # Network

        def _tick_at(self, r: int, t: int) -> None: ...  # Delivery

        def _hold(self, mid: str, r: int) -> None: ...  # Delivery

        def _response_group(self, mid: str, sender: str) -> tuple[Indices, frozenset[str] | None]: ...  # Delivery

        def _skip_held_copies(
            self, key: FrameKey, pb: Frame, mid: str, recv: Indices, times: Indices, t: int
        ) -> tuple[Indices, Indices]: ...  # Delivery

        def _called_off(
            self, r: int, t: int, before: tuple[bool, bool], after: tuple[bool, bool], ctx: FrameCtx
        ) -> None: ...  # EventRows

        def _handle(self, r: int, evs: list[Event], t: int, ctx: FrameCtx | None) -> bool: ...  # EventRows

        def _store_ingest(
            self, r: int, c: int, t: int, reason: str, mid: str, pb: Parsed, positions: Positions | None, size: int
        ) -> None: ...  # StoreClients

        def _store_want(self, r: int, entries: Iterable[HistoryEntry], t: int) -> None: ...  # StoreClients
