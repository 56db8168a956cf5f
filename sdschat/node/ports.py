"""The doors between :class:`~sdschat.node.node.Node` and its collaborators.

The roster (:mod:`.roster`), the receive pipeline (:mod:`.receive`), the store-node client
(:mod:`.storeclient`) and the presence keeper (:mod:`.presence`) each see the node through one of these
protocols: what they read of it and what they ask it to do, and nothing else. Each piece of state has one owner:
the node owns the engine, the writer and the connection; the message book owns the messages shown and the
participants seen; the roster owns the membership and its own tables; the receiver its own; the presence keeper
who is online. A collaborator changes another's state only through a method of its owner, which is what lets each
be built and tested alone, with a small fake of its door.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol

from ..crypto import ChannelKey
from ..sds import Event, MessageChannel
from ..store import EventRow, MessageRow, MessageUpdate, ParticipantRow
from ..transport import ImpairedTransport
from .config import NodeConfig
from .events import NodeEvent, RejectReason
from .outbox import Outbound
from .wirelog import WireLog

__all__ = ["Core", "RosterHost", "ReceiverHost", "StoreClientHost", "PresenceHost", "Signer"]

#: the ``sign`` hook of the engine's sends (:func:`~sdschat.node.authored.signer`)
Signer = Callable[..., bytes]


class Core(Protocol):
    """What every collaborator reads of the node and asks of it: the clock, the listeners, the database writer
    (one batch per turn), the publisher's queue and the engine."""

    @property
    def channel(self) -> MessageChannel | None:
        """The engine (None until its state is restored)."""

    @property
    def stopping(self) -> bool:
        """Whether the node is shutting down: start nothing new."""

    def now(self) -> int:
        """The node's clock, in wall-clock ms."""

    def emit(self, event: NodeEvent) -> None:
        """Tell the node's listeners."""

    def persist(
        self,
        now: int,
        *,
        messages: Sequence[MessageRow] = (),
        updates: Sequence[MessageUpdate] = (),
        events: Sequence[EventRow] = (),
        participants: Sequence[ParticipantRow] = (),
        kv: Mapping[str, str | None] | None = None,
    ) -> None:
        """Hand this turn's rows to the writer, with what the engine changed."""

    def enqueue(self, item: Outbound) -> None:
        """Queue a frame for the publisher."""

    def wake(self) -> None:
        """The engine has new deadlines: look at them now."""


class RosterHost(Core, Protocol):
    """What the roster needs of the node: the configuration and our channel key and nick, the node's tasks,
    sending a membership message, the connection's subscriptions, and the receive pipeline's way in for the
    engine events a change of peers causes and for refusals."""

    @property
    def config(self) -> NodeConfig: ...

    @property
    def key(self) -> ChannelKey: ...

    @property
    def nick(self) -> str: ...

    @property
    def sign(self) -> Signer: ...

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> object:
        """Run ``coro`` as one of the node's tasks (cancelled at stop; a failure is told)."""

    def has_task(self, name: str) -> bool: ...

    async def send_control(self, kind: str, data: dict, text: str = "") -> str:
        """Write a membership message to the log; its id once durable."""

    async def wait_ready(self) -> None: ...

    def names(self) -> dict[str, str | None]:
        """Participant id -> the name shown for it."""

    def subscribe(self, topic: str) -> None:
        """Listen on a new key's topic too (nothing before the node is connected)."""

    def unsubscribe(self, topic: str) -> None: ...

    def catch_up(self) -> None:
        """Ask the store nodes for what was sent while we could not read it (a new key's topic)."""

    def take_events(self, events: list[Event], now: int) -> None:
        """Engine events caused outside a received frame, through the receive pipeline."""

    def reject(self, reason: RejectReason, detail: str, now: int) -> None:
        """A message refused: counted, told and recorded as the receive pipeline does."""

    async def scrub(self) -> None:
        """Write what is pending, then empty the database's log of older copies of deleted rows."""


class ReceiverHost(Core, Protocol):
    """What the receive pipeline needs of the node beyond the core: our id and channel key, its counters, the
    wire view's log, and where it notes that a peer is still at work; it counts in the node's counters."""

    @property
    def key(self) -> ChannelKey: ...

    @property
    def participant_id(self) -> str: ...

    def count(self, name: str) -> None:
        """One more of the node's counter ``name`` (``received_frames``, ``rejected``, ...)."""

    @property
    def wire(self) -> WireLog:
        """The wire view's log."""

    def peer_worked(self, now: int) -> None:
        """A frame showed a peer still at work (a resend, a repair answer or request)."""


class StoreClientHost(Core, Protocol):
    """What the store-node client needs of the node: its configuration, the keys' topics, publishing a request,
    its connection, and the receive pipeline's way in for the envelopes a store returns."""

    @property
    def config(self) -> NodeConfig: ...

    def topics(self) -> list[str]:
        """The topics of the keys we keep, the current one (what we send on) first."""

    @property
    def transport(self) -> ImpairedTransport | None:
        """The node's connection (None until it connects): store requests go out on it, raw."""

    def take_frame(self, payload: bytes, source: str) -> None:
        """An envelope from elsewhere than the broker's live traffic, through the receive pipeline."""


class PresenceHost(Core, Protocol):
    """What the presence keeper needs of the node: our id and nick, the ``sign`` hook of an ephemeral send, and
    the key epoch we send under."""

    @property
    def participant_id(self) -> str: ...

    @property
    def nick(self) -> str: ...

    @property
    def sign(self) -> Signer: ...

    def current_epoch(self) -> int:
        """The number of the key epoch we send under."""

    def member_count(self) -> int:
        """The channel's members as this node knows them, itself included."""
