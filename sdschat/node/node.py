"""One participant: SDS engine + SQLite store + encryption + MQTT, run by asyncio.

The node is the only place where the pieces meet. It turns engine events into
persisted rows and published frames, and into UI-level events
(:mod:`sdschat.node.events`) for its listeners. :class:`Node` is the facade
and owns the engine, the database writer, the connection and the publisher's
queue (:class:`~.outbox.Outbound` items). Its collaborators, each the one
owner of its own state:

- the message book (:mod:`.book`): the messages held in memory and the
  participants seen;
- the roster (:mod:`.roster`): members, admins and key epochs, and what is
  handed to newcomers and stragglers;
- the receive pipeline (:mod:`.receive`): a frame through open, verify and the
  engine, and the engine's events into rows, frames and UI events;
- the store-node client (:mod:`.storeclient`): requests by retrieval hint and
  catch-up after being away;
- the wire log (:mod:`.wirelog`): the last frames in and out;
- the presence keeper (:mod:`.presence`): online, away and offline, ours and
  the others', from ephemeral beats (memory only);
- the action book (:mod:`.actionbook`): edits, deletions and reactions, what
  they make of their messages, and the ones waiting for their message.

The roster, the receiver, the store client and the presence keeper see the
node only through the small protocols of :mod:`.ports` (the clock, the
listeners, the writer, the engine, the publisher's queue, and the few calls
each needs more); the node satisfies all four. Failures a person can act on are
:class:`~.errors.UserError`; the node's own trouble is told as
:class:`~.events.NodeProblem`.

Durability: a message the user sends is committed to the database before it
is published (``send_text`` awaits the writer's flush), and every other
engine mutation is persisted in the same batch as the rows it explains, one
transaction per event-loop turn. On restart the node reloads the engine state
and carries on resending and repairing.

Receive path: envelope open (AES-GCM; failures counted as *undecryptable*) →
node frame (publisher, reason) → SDS frame → the Ed25519 signature inside the
content must verify and name the frame's ``sender_id`` (else *rejected*:
impersonation) → application payload → engine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from typing import Any

from ..crypto import CryptoError, Identity, envelope_hash
from ..sds import ChannelConfig, ChannelState, Event, MessageChannel, wire
from ..store import (
    ActionRow,
    CorruptRowError,
    EventRow,
    MessageRow,
    MessageUpdate,
    ParticipantRow,
    Store,
    StoreError,
    StoreWriter,
    query_terms,
)
from ..transport import (
    ConnectionState,
    EmbeddedBroker,
    ImpairedTransport,
    Impairment,
    MqttTransport,
    StateChange,
    resolve_broker,
)
from . import events as ev
from .actionbook import ActionBook
from .actions import TARGET_KINDS, fallback_text
from .authored import signer
from .book import FINAL_STATES, TOPIC_KEY, MessageBook, clean_topic
from .config import NodeConfig, node_channel_config
from .errors import MessageNotFound, NotAllowed, UserError
from .frame import pack
from .inspect import GapReport, Inspection, Member, gap_reports, inspect_message, member_reports
from .membership import Membership, redacted_body
from .outbox import Outbound
from .payload import QUIET_PREFIXES, AppPayload, PayloadError, emoji_problem, plain_emoji
from .ports import Signer
from .presence import MemberPresence, Presence, PresenceKeeper
from .receive import Receiver, Turn
from .roster import MEMBERSHIP_KEY, Roster
from .search import SearchHit, match_spans, search_store
from .storeclient import StoreClient
from .wirelog import WireLog, frame_of

__all__ = ["Node", "NodeConfig", "NodeFailed", "node_channel_config", "MEMBERSHIP_KEY"]

log = logging.getLogger("sdschat.node")
#: the node compares its counters (``health()``) for a CountersChanged at most this often
COUNTERS_EVERY_MS = 250

Listener = Callable[[ev.NodeEvent], None]


class NodeFailed(Exception):
    """The node can take nothing more in: its database can no longer be written (``Node.failure`` says why)."""


def _write_failure(exc: BaseException) -> str:
    """One line for a failed database write (the store's own message, without wrapper class names)."""
    while isinstance(exc, StoreError):
        original = getattr(exc, "original", None)  # (a write failure wraps what the database raised)
        if not isinstance(original, BaseException):
            break
        exc = original
    return f"database write failed: {exc if isinstance(exc, StoreError) else f'{type(exc).__name__}: {exc}'}"


def _restored(state: ChannelState, config: ChannelConfig) -> tuple[MessageChannel, list[str]]:
    channel = MessageChannel.restore(state, config, journal=True)
    return channel, channel.check_invariants()


def _no_identity(*args: object, **kwargs: object) -> bytes:
    """The ``sign`` hook before the node's identity is loaded: nothing is sent before that."""
    raise RuntimeError("the node's identity is not loaded")


class Node:
    """A running participant. ``await Node.start(config)``; ``await node.stop()``."""

    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.key = config.key
        self.nick = config.nick
        self.store: Store | None = None
        self.writer: StoreWriter | None = None
        self.identity: Identity | None = None
        self.channel: MessageChannel | None = None
        self.transport: ImpairedTransport | None = None
        self.broker_url: str | None = None
        self._embedded: EmbeddedBroker | None = None  # the embedded broker we started, if any (closed at stop)
        self._listeners: list[Listener] = []
        #: the engine's ``sign`` hook, once the identity is known
        self.sign: Signer = _no_identity
        self.book = MessageBook(
            lambda: self._me.participant_id,
            self.emit,
            config.memory_messages,
            lambda: self.nick,
            self._may_set_topic,
        )
        self.store_client = StoreClient(self)
        #: members, admins and key epochs (:mod:`.roster`; its state once the identity is known)
        self.roster = Roster(self, self.book)
        #: presence, ours and the others' (:mod:`.presence`; never stored), tuned by the configuration's
        #: ``presence_every_ms`` and ``away_after_ms``
        self.presences = PresenceKeeper(
            self,
            beat_every_ms=config.presence_every_ms,
            away_after_ms=config.away_after_ms,
            seed=config.seed,
        )
        #: edits, deletions and reactions (:mod:`.actionbook`)
        self.actions = ActionBook(self, self.book)
        self.receiver = Receiver(self, self.book, self.roster, self.store_client, self.presences, self.actions)
        #: frames to publish, in order
        self.outbox: asyncio.Queue[Outbound] = asyncio.Queue()
        self._tasks: list[asyncio.Task] = []
        self._wake = asyncio.Event()
        #: (node ms) when the sleeping ticker looks next; 0 while it runs (it reads the deadlines once done)
        self._tick_at = 0
        #: how many times the ticker has looked at the deadlines (a frame wakes it only for a sooner one)
        self.ticker_turns = 0
        self.stopping = False
        self._last_counters: dict[str, Any] = {}
        self._counters_due = 0  # (node ms) when the counters are compared again
        self._was_connected = False
        #: set (one line) when persistence failed; the node keeps no further promises of durability
        self.failure: str | None = None
        #: wall-clock ms of the last frame showing a peer still at work (a resend, a repair answer or request)
        self.last_peer_work_ms = 0
        #: wall-clock ms of the last (re)connection (0: never connected): what others wrote before it and arrives
        #: after it is catch-up, not a gap of live traffic (the views show it as history that loads)
        self.online_since_ms = 0
        #: ``frames_on_content_signature``: messages taken on their author's content signature, their frame
        #: signature not checked (sdschat.node.receive, ``Receiver._by_its_author``); ``resends_held``: resends
        #: not published while no other member was here (``Receiver._anyone_here``)
        self.counters: dict[str, int] = dict.fromkeys(
            (
                "undecryptable",
                "rejected",
                "impersonation",
                "published",
                "publish_failed",
                "received_frames",
                "frames_on_content_signature",
                "resends_held",
            ),
            0,
        )
        #: the store-node client's counters (requests, answers, timeouts, envelopes, delivered, ...)
        self.store_counters = self.store_client.counters
        #: event rows persisted since the last compaction, the compaction running (if any), rows it removed
        self._events_since_compact = 0
        self._compacting: asyncio.Task | None = None
        self.events_compacted = 0
        #: the last frames in and out (the wire view reads it)
        self.wire = WireLog()
        #: set once the engine is restored and the node connected (see ``start(restore_in_background=...)``)
        self._ready = asyncio.Event()
        self._restoring: asyncio.Task | None = None

    # -------------------------------------------------------------- lifecycle

    @classmethod
    async def start(cls, config: NodeConfig, *, restore_in_background: bool = False) -> Node:
        """Open the database and start the node. With ``restore_in_background`` it returns once what a view
        needs is read (history, participants: a few indexed reads, however long the channel) and restores
        the engine's state, then connects, in a task (:meth:`wait_ready`): a window shows a channel of a
        million messages at once, and sends wait for the engine. A failure there is reported like a failed
        write (``NodeProblem("storage", ...)``, :attr:`failure`)."""
        node = cls(config)
        try:
            await node._open()
            if restore_in_background:
                node._restoring = asyncio.get_running_loop().create_task(node._restore(), name="sdschat-node-restore")
            else:
                await node._run()
        except BaseException:
            await node.stop()
            raise
        return node

    def now(self) -> int:
        return int(self.config.clock() * 1000)

    async def _open(self) -> None:
        """What a view needs: the database, the identity, the messages held in memory, the participants."""
        cfg = self.config
        store = self.store = await Store.open(cfg.db_path)
        self.writer = StoreWriter(store, on_error=self._writer_failed, coalesce_ms=cfg.commit_within_ms)
        identity = self.identity = await self._load_identity(store)
        self.sign = signer(identity, self.key.channel_binding)
        await self.roster.load(identity, store)
        await store.kv_set("nick", self.nick)
        await store.kv_set("channel_name", self.key.channel_name)
        self.book.load_topic(await store.kv_get(TOPIC_KEY))  # (the topic message latest in log order: book.py)
        # (before the messages: a membership line names members)
        self.book.load_participants(await store.participants())
        await self._load_messages(store)

    async def _run(self, *, own_reader: bool = False) -> None:
        """The engine's state, then the connection and the node's tasks."""
        channel = await self._load_channel(self._db, own_reader=own_reader)
        self.roster.channel_ready()
        await self._connect()
        await self.store_client.start(self._db)
        self._tasks.append(asyncio.create_task(self._ticker(), name="sdschat-node-tick"))
        self._tasks.append(asyncio.create_task(self._publisher(), name="sdschat-node-publish"))
        self.store_client.want([row.entry for row in channel.snapshot().missing])
        self._compact_events()  # a database from before compaction, or one closed mid-window
        self._ready.set()
        self.roster.started()
        self.presences.start(self.now())

    async def _restore(self) -> None:
        """:meth:`_run` in the background; then the open gaps, for a view that loaded before the engine was up."""
        try:
            await self._run(own_reader=True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # StoreError (a damaged state), TransportError, ...: one line, the view says it
            self.failure = self.failure or f"could not start #{self.key.channel_name}: {exc}"
            log.debug("%s", self.failure)
            self._ready.set()
            self._problem("storage", self.failure)
            return
        state = self.transport.state if self.transport is not None else "stopped"
        self.emit(ev.ConnectionChanged(str(state), ""))  # a view showed "restoring" until now
        for gap in self.open_gaps():
            self.emit(gap)

    @property
    def ready(self) -> bool:
        """The engine is restored and the node connected (always, unless started ``restore_in_background``)."""
        return self.channel is not None and self._ready.is_set()

    async def wait_ready(self) -> None:
        """Return once the engine is up; :class:`NodeFailed` if it could not be restored."""
        await self._ready.wait()
        if self.failure is not None and self.transport is None:
            raise NodeFailed(self.failure)

    async def _load_messages(self, store: Store) -> None:
        """Into memory: the newest ``memory_messages`` and every one whose state can still change (two indexed
        reads, however long the history)."""
        cid = self.key.channel_id
        rows = await store.page_messages(cid, None, self.config.memory_messages)
        rows += await store.messages_not_in(cid, sorted(FINAL_STATES))
        rows.sort(key=lambda r: r.log_key)
        ids = [row.message_id for row in rows]
        self.actions.load(await store.pending_actions(cid))
        self.actions.load(await store.actions_on(cid, ids), ids)
        try:
            for row in rows:
                self.book.show(self.actions.decorate(self.book.chat_of_row(row)))
        except CorruptRowError as exc:
            raise CorruptRowError(f"database {self.config.db_path}: {exc}") from None

    async def _load_identity(self, store: Store) -> Identity:
        """The database's identity; a new database takes the configured one (or a fresh one)."""
        raw = await store.get_identity()
        if raw is None:
            identity = self.config.identity or Identity.generate()
            if self.config.store_identity or self.config.identity is None:
                await store.set_identity(identity.private_bytes())
            return identity
        try:
            return Identity.from_private_bytes(raw)
        except (CryptoError, ValueError, TypeError) as exc:
            raise StoreError(f"database {self.config.db_path}: the stored identity is damaged ({exc})") from None

    async def _load_channel(self, store: Store, *, own_reader: bool = False) -> MessageChannel:
        """The engine, restored from the database's state (a new channel's: created, and its state saved)."""
        cfg = self.config
        pid, cid = self._me.participant_id, self.key.channel_id
        if own_reader:  # a connection (and thread) of its own: a view's reads do not queue behind a long log
            async with await Store.open(cfg.db_path, create=False) as reader:
                state = await reader.load_state(cid, log_window=cfg.channel_config.log_window)
        else:
            state = await store.load_state(cid, log_window=cfg.channel_config.log_window)
        if state is None:
            channel = self.channel = MessageChannel(cid, pid, cfg.channel_config, self.now(), journal=True)
            config_json = json.dumps(dataclasses.asdict(cfg.channel_config), sort_keys=True)
            await store.save_state(channel.snapshot(), config_json)
            return channel
        if state.participant_id != pid:
            raise StoreError(f"database {cfg.db_path}: the channel state belongs to another identity (damaged)")
        try:  # a worker thread: a long log takes seconds to rebuild, and the loop keeps serving a view meanwhile
            channel, problems = await asyncio.to_thread(_restored, state, cfg.channel_config)
        except (ValueError, TypeError, KeyError) as exc:
            problems = [str(exc)]
        if problems:  # never run on a state the engine's own rules say cannot be
            raise StoreError(f"database {cfg.db_path}: the channel state is damaged ({problems[0]})")
        self.channel = channel
        return channel

    async def _connect(self) -> None:
        cfg = self.config
        if cfg.transport is not None:  # a shared connection, started by its owner
            inner, self.broker_url = cfg.transport, cfg.broker_url
        else:
            self.broker_url, self._embedded = await resolve_broker(cfg.broker_url, probe_port=cfg.probe_port)
            # a random client id: the broker learns nothing of who connects
            inner = MqttTransport(self.broker_url, qos=cfg.qos, client_id=f"sdschat-{os.urandom(8).hex()}")
        transport = self.transport = ImpairedTransport(inner, seed=cfg.seed, **cfg.impairment)
        transport.set_message_handler(self._on_frame)
        transport.add_state_listener(self._on_connection)
        await transport.start()
        for topic in self.roster.membership.topics():
            await transport.subscribe(topic)
        if cfg.use_store:
            await transport.subscribe(self.store_client.reply_topic)

    async def stop(self) -> None:
        """Shut down in order: tasks, transport, final flush, store. Each step is bounded, so a
        stuck component cannot hang the exit; what it cost is logged."""
        if self.stopping:
            return
        if self.ready and self.transport is not None and self.failure is None:
            self.presences.leaving(self.now())  # an offline beat, out before the publisher stops
            await self._bounded("offline beat", self.drain_outbox(), 1.0)
        self.stopping = True
        self.store_client.stop()
        tasks = [*self._tasks, *(t for t in (self._compacting, self._restoring) if t is not None)]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)
        if self.transport is not None:
            await self._bounded("transport stop", self.transport.stop(), 5.0)
        if self.writer is not None:
            if self.failure is None and self.channel is not None:
                self.receiver.flush_unopened()
                self.persist(self.now())
            if not await self._bounded("final database flush", self.writer.close(), 10.0):
                self.failure = self.failure or "database write failed: final flush did not complete"
        if self.store is not None:
            await self._bounded("database close", self.store.close(), 5.0)
        if self._embedded is not None:
            await self._bounded("embedded broker close", self._embedded.close(), 5.0)

    async def _bounded(self, what: str, coro, timeout: float) -> bool:
        try:
            await asyncio.wait_for(coro, timeout)
            return True
        except TimeoutError:
            log.warning("%s did not finish in %.0f s", what, timeout)
        except Exception as exc:
            if self.failure is None:  # after a failure, what follows from it is no news
                log.warning("%s failed: %s", what, exc)
            if what == "final database flush":
                self.failure = self.failure or _write_failure(exc)
        return False

    # ----------------------------------------------------------------- views

    @property
    def participant_id(self) -> str:
        return self._me.participant_id

    # The parts the node has once open (its database, writer and identity) and once running (the engine): each
    # accessor raises if called before, which the node's order of start rules out (a bug otherwise).

    @property
    def _db(self) -> Store:
        if self.store is None:
            raise RuntimeError("the node's database is not open")
        return self.store

    @property
    def _db_writer(self) -> StoreWriter:
        if self.writer is None:
            raise RuntimeError("the node's database is not open")
        return self.writer

    @property
    def _me(self) -> Identity:
        if self.identity is None:
            raise RuntimeError("the node's identity is not loaded")
        return self.identity

    @property
    def _engine(self) -> MessageChannel:
        if self.channel is None:
            raise RuntimeError("the node's engine is not restored")
        return self.channel

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def messages(self) -> list[ev.ChatMessage]:
        """The messages held in memory, in local-log order (waiting ones by their Lamport place): the newest
        ``memory_messages`` and every one whose state can still change. :meth:`history` has them all."""
        return sorted(self.book.messages.values(), key=lambda m: m.log_key)

    def open_gaps(self) -> list[ev.GapOpened]:
        """The gaps still open, as the :class:`~sdschat.node.events.GapOpened` events that reported them.

        For a view opened later (after a restart, say): the engine's waiting
        messages with what each waits for, then the missing ids only a sync
        named (``message_id`` ""). Messages this node does not show (not
        decodable) are left out, as they were live.
        """
        if self.channel is None:
            return []
        shown = self.book.messages
        return [
            ev.GapOpened(mid, ids, senders) for mid, ids, senders in self.channel.open_gaps() if not mid or mid in shown
        ]

    async def _commit_pending(self) -> None:
        """Write what the writer holds before it is relied on (a message durable before it is published, what a
        frame acknowledges before anyone reads it); a failed write fails the node (``node.failure``)."""
        try:
            await self._db_writer.flush()
        except StoreError as exc:
            self._writer_failed(exc)

    async def _flush_for_reading(self) -> None:
        """Write what the writer holds, so a read of the database sees it; a failed write is ``node.failure``'s
        news, and the database still holds everything flushed before."""
        try:
            await self._db_writer.flush()
        except StoreError:
            pass

    async def unread_since(self, since_ms: int, but: Collection[str] = ()) -> int:
        """How many messages of others arrived after ``since_ms`` (wall-clock ms), counted in the database
        (membership changes, edits, deletions and reactions are not news: not counted). Everything that arrived
        before the call is counted (the writer is flushed first); the ids in ``but`` as the count is read (a set
        the caller fills as messages arrive meanwhile) are not."""
        await self._flush_for_reading()
        return await self._db.unread_count(
            self.key.channel_id, since_ms, self.participant_id, QUIET_PREFIXES, tuple(but)
        )

    async def history(
        self, *, limit: int | None = None, before: tuple[int, str] | None = None, after: tuple[int, str] | None = None
    ) -> list[ev.ChatMessage]:
        """The channel's messages in local-log order: all of them, or one page: the newest ``limit`` before the
        ``(lamport_timestamp, message_id)`` key ``before`` (exclusive; ``None``: up to the newest), or with
        ``after`` the oldest ``limit`` after that key -- what a view loads first, then as the person scrolls
        back (or, below a search result, forward). The database's rows, with what is in memory (newer: the
        writer batches) taking precedence."""
        known = dict(self.book.messages)
        out: list[ev.ChatMessage] = []
        await self._flush_for_reading()
        cid = self.key.channel_id

        def take(row) -> None:
            chat = known.pop(row.message_id, None) or self.book.chat_of_row(row)
            if chat is not None:
                out.append(chat)

        if limit is None:
            async for row in self._db.iter_messages(cid):
                take(row)
            out.extend(known.values())
        else:
            rows = await self._db.page_messages(cid, before, limit, after=after)
            for row in rows:
                take(row)
            # shown but not (yet) in the database: within the page's range
            full = len(rows) >= limit
            if after is not None:
                high = rows[-1].log_key if full else None
                out.extend(m for m in known.values() if m.log_key > after and (high is None or m.log_key < high))
            else:
                low = rows[0].log_key if full else None
                out.extend(
                    m
                    for m in known.values()
                    if (before is None or m.log_key < before) and (low is None or m.log_key > low)
                )
        out.sort(key=lambda m: m.log_key)
        return await self._with_actions(out)

    async def _with_actions(self, chats: list[ev.ChatMessage]) -> list[ev.ChatMessage]:
        """``chats`` as their edits, deletions and reactions make them (those read from the database: fetched)."""
        held, complete = self.book.messages, self.actions.complete
        stored = [m.message_id for m in chats if m.message_id not in held]
        if not stored:
            return chats
        unknown = [mid for mid in stored if mid not in complete]
        if unknown:
            self.actions.load(await self._db.actions_on(self.key.channel_id, unknown), unknown)
        return [m if m.message_id in held else self.actions.decorate(m) for m in chats]

    async def message(self, message_id: str) -> ev.ChatMessage | None:
        """One message of the channel, from memory or the database (None: not here, e.g. still missing)."""
        known = self.book.messages.get(message_id)
        if known is not None:
            return known
        await self._flush_for_reading()
        row = await self._db.get_message(self.key.channel_id, message_id)
        return (await self._with_actions([self.book.chat_of_row(row)]))[0] if row is not None else None

    async def around(self, key: tuple[int, str], *, limit: int) -> tuple[list[ev.ChatMessage], bool, bool]:
        """The message at ``key`` with up to ``limit`` messages on each side, in log order, and whether older
        and newer ones are left out: what a view loads to show a search result among its neighbours."""
        older = await self.history(limit=limit + 1, before=(key[0], key[1] + "\x00"))
        newer = await self.history(limit=limit, after=key)
        return older + newer, len(older) > limit, len(newer) >= limit

    async def search(self, query: str, *, limit: int = 50, before: int | None = None) -> list[SearchHit]:
        """This channel's messages matching ``query`` (words, ``word*``, ``"a phrase"``, OR, NOT), newest
        stored first; :class:`~sdschat.store.SearchQueryError` for one that cannot be run."""
        await self._flush_for_reading()
        hits = await search_store(
            self._db,
            self.key.channel_id,
            self.key.channel_name or "",
            query,
            me=self.participant_id,
            limit=limit,
            before=before,
        )
        return await self._hits_as_shown(hits, query_terms(query))

    async def _hits_as_shown(self, hits: list[SearchHit], terms: list[tuple[str, bool]]) -> list[SearchHit]:
        """Search finds what was stored; a hit shows what the channel shows. An edit's hit is its message as
        edited (the words are in its text now); a message whose words an edit took away, a deleted one, and a
        deletion's or reaction's own line are no hit. Each message once (a page keeps the rowid that found it)."""
        out: list[SearchHit] = []
        seen: set[str] = set()
        for hit in hits:
            m: ev.ChatMessage | None = hit.message
            assert m is not None
            if m.kind in ev.MESSAGE_ACTION_KINDS:
                row = self.actions.rows.get(m.message_id)
                if m.kind != "edit" or row is None:
                    continue
                m = await self.message(row.target_id)
            else:
                m = await self.message(m.message_id) or m
            if m is None or m.deleted or m.message_id in seen:
                continue
            spans = tuple(match_spans(m.text, terms))
            if m.edited and not spans:
                continue  # found by words of a version no longer shown
            seen.add(m.message_id)
            out.append(dataclasses.replace(hit, message=m, spans=spans))
        return out

    async def inspect(self, message_id: str) -> Inspection | None:
        """The life of one message as the database tells it (:mod:`.inspect`): the inspector panel's reading."""
        await self._flush_for_reading()
        return await inspect_message(
            self._db, self.key.channel_id, message_id, me=self.participant_id, names=self.names()
        )

    async def gaps(self, ids: Collection[str] | None = None) -> list[GapReport]:
        """Every gap noticed in the channel (or only those of ``ids``) and how it closed
        (:func:`.inspect.gap_reports`)."""
        await self._flush_for_reading()
        return await gap_reports(self._db, self.key.channel_id, me=self.participant_id, names=self.names(), ids=ids)

    async def members(self) -> list[Member]:
        """Everyone seen in the channel, with what the database tells of each (:func:`.inspect.member_reports`)."""
        await self._flush_for_reading()
        others = [p for p in self.book.participants.values() if p.participant_id != self.participant_id]
        return await member_reports(self._db, self.key.channel_id, others)

    def names(self) -> dict[str, str | None]:
        """Participant id -> name of everyone seen in the channel: its nick, with a fingerprint suffix while
        another member goes by the same one (``bob#3f2a``); None for one never named."""
        book = self.book
        return {
            p.participant_id: book.display_name(p.participant_id, p.nick) if p.nick else None
            for p in book.participants.values()
        }

    def whois(self, name: str) -> dict:
        """What is known of the member called ``name`` (a name as shown, a nick, or the start of an id): its
        participant id, fingerprint, nick, first and last heard, whether an admin, removed or gone, the key epoch
        its join was written under. :class:`~.errors.MemberNotFound` (one line) if none or several."""
        pid = self.roster.member_of(name, include_gone=True)
        row, m = self.book.participants.get(pid), self.roster.membership
        here = self.presence(pid)
        heard = max(row.last_seen_ms if row else 0, here.last_heard_ms)
        joined = m.joined_under.get(pid)
        return {
            "participant_id": pid,
            "fingerprint": pid[:8],
            "name": self.names().get(pid) or pid[:8],
            "nick": row.nick if row else None,
            "first_seen_ms": row.first_seen_ms if row else None,
            "last_heard_ms": heard or None,
            "admin": pid in m.admins,
            "removed": pid in m.removed,
            "left": pid in m.left,
            "member": pid in m.members,
            "joined_epoch": joined,
            "presence": here.state,
            "away_message": here.message,
            # the key epoch of its last frame heard here; else the one its join was written under; else unknown
            "key_epoch": here.epoch if here.epoch is not None else joined,
            "key_epoch_from": "heard" if here.epoch is not None else "join" if joined is not None else None,
        }

    # ----------------------------------------------------------------- presence (sdschat.node.presence)

    def member_count(self) -> int:
        """The channel's members as this node knows them, itself included (removed members and those who left
        are not counted)."""
        return self.roster.member_count

    def presence(self, pid: str) -> Presence:
        """``pid``'s presence as heard here (ours: our own), from memory: online, away (with its message) or
        offline, when last heard and under which key epoch."""
        return self.presences.of(pid, self.now())

    def set_away(self, message: str | None) -> None:
        """``/away message``: away, with ``message`` ("" for none), told to the others at once; ``None``: back."""
        self.presences.set_away(message, self.now())

    def active(self) -> None:
        """A key was pressed in this channel's view: back from an idle away (not from ``/away``)."""
        self.presences.active(self.now())

    def current_epoch(self) -> int:
        """The number of the key epoch we send under."""
        return self.roster.membership.current.number

    def presence_list(self) -> list[MemberPresence]:
        """``/names``: us, then every member and everyone seen here who is not gone (removed, left), by name, each
        with its presence and whether an admin."""
        m, book, me = self.membership, self.book, self.participant_id
        gone = m.gone if m is not None else set()
        admins = m.admins if m is not None else set()
        heard = self.presences.heard_nicks()  # (a member heard only by its beats is in no table yet)
        pids = set(book.participants) | set(m.members if m is not None else ()) | set(heard)
        names = self.names()
        out = [
            MemberPresence(
                pid, names.get(pid) or book.display_name(pid, heard.get(pid)), pid in admins, False, self.presence(pid)
            )
            for pid in pids - gone - {me}
        ]
        out.sort(key=lambda p: p.name.casefold())
        return [MemberPresence(me, self.nick, me in admins, True, self.presence(me)), *out]

    def participants(self) -> list[ParticipantRow]:
        """Everyone seen in the channel who is still a member (not removed, not left), the most recently heard
        first; each row's nick as shown (``bob#3f2a`` while two members share it). A member heard so far only by its
        presence beats is listed too (its row is not stored)."""
        m, book = self.membership, self.book
        gone = m.gone if m is not None else set()
        rows = [
            p
            if not book.clashes(p.participant_id, p.nick)
            else dataclasses.replace(p, nick=book.display_name(p.participant_id, p.nick))
            for p in book.participants.values()
            if p.participant_id not in gone
        ]
        now, me = self.now(), self.participant_id
        for pid, nick in self.presences.heard_nicks().items():  # heard only by its beats so far: memory only
            if pid not in book.participants and pid not in gone and pid != me:
                heard = self.presences.of(pid, now).last_heard_ms
                rows.append(ParticipantRow(pid, book.display_name(pid, nick) if nick else None, heard, heard))
        return sorted(rows, key=lambda p: -p.last_seen_ms)

    def health(self) -> dict:
        """Channel health for the side panel: clock, buffer sizes, counters, connection."""
        if self.channel is None:  # the engine is being restored
            return {**self.counters, "connection": "restoring" if self.failure is None else "stopped"}
        out: dict[str, Any] = dict(self.channel.summary())
        out.update({k: v for k, v in self.channel.stats.items()})
        out.update(self.counters)
        # (the engine counts each resend its timers made; those held while nobody was here never went out)
        out["resends"] = max(0, out.get("resends", 0) - self.counters["resends_held"])
        out["connection"] = str(self.transport.state) if self.transport else "stopped"
        out["locked_out"] = self.locked_out
        return out

    def pending(self) -> bool:
        """Whether anything is still in flight (unacked own messages, gaps, repairs)."""
        ch = self.channel
        if ch is None:
            return self.failure is None
        return bool(
            ch.outgoing_ids
            or ch.incoming_ids
            or ch.missing_ids
            or ch.repair_request_ids
            or ch.repair_response_ids
            or self.outbox.qsize()
        )

    def settled(self, quiet_ms: int) -> bool:
        """Nothing pending here, and no peer resent, repaired or asked for a repair in ``quiet_ms``."""
        return not self.pending() and self.now() - self.last_peer_work_ms >= quiet_ms

    def set_impairment(self, **settings) -> None:
        """Change the link impairment now (loss_in, loss_out, delay_ms, jitter_ms, duplicate, offline); before
        the node is connected, from when it connects."""
        if self.transport is None:
            Impairment(**{**self.config.impairment, **settings})  # refuse a bad setting now, as set() would
            self.config.impairment = {**self.config.impairment, **settings}
            return
        self.transport.set(**settings)

    @property
    def impairment(self) -> Impairment:
        if self.transport is None:
            return Impairment(**self.config.impairment)
        return self.transport.settings

    # ------------------------------------------------------------------ send

    async def send_text(self, text: str, kind: str = "msg", *, reply_to: str | None = None) -> str:
        """Send a chat line (``reply_to``: the message id it answers); returns its message id once it is durable
        (publishing follows).

        Raises :class:`NodeFailed` once the database can no longer be written, :class:`~.errors.NotAllowed` once we
        were removed, :class:`~.payload.PayloadError` for an empty or too long text.
        """
        if not text.strip():
            raise PayloadError("empty message")
        self.presences.active(self.now(), typed=True)
        return await self._send(kind, text, reply_to or "", None)

    async def send_control(self, kind: str, data: dict, text: str = "") -> str:
        """Write a membership message (``join``, ``admin``, ``epoch``: sdschat.node.membership) to the log and
        apply it here; returns its message id once durable."""
        return await self._send(kind, text, "", data)

    async def _send(self, kind: str, text: str, reply_to: str, data: dict | None) -> str:
        await self._may_send(kind)  # (first: a join it waits for may move the current key epoch)
        epoch = self.roster.membership.current.number
        return await self._write_own(AppPayload.new(kind, self.nick, text, self.now(), reply_to, data, epoch=epoch))

    async def _may_send(self, kind: str) -> None:
        """Wait until the node can send ``kind`` (ready, and joined unless it is the join itself); raises as
        :meth:`send_text` does."""
        if self.channel is None:
            await self.wait_ready()
        if self.failure is not None:
            raise NodeFailed(self.failure)
        if self.removed_me:
            raise NotAllowed(f"you were removed from #{self.key.channel_name}: nothing more can be sent there")
        members = self.roster.membership
        if kind != "join" and self.config.membership and not members.joined:
            await self.roster.join()

    async def send_payload(self, app: AppPayload) -> str:
        """Write a built application payload to the log as our message, once the node can send it; returns its
        message id once durable, publishing follows. Its ``epoch`` should be the current key epoch's number."""
        await self._may_send(app.kind)
        return await self._write_own(app)

    async def _write_own(self, app: AppPayload) -> str:
        """The one path every message we send takes (:meth:`send_text`, :meth:`send_control`,
        :meth:`send_payload`, after :meth:`_may_send`): into the engine and the book, durable, then queued."""
        kind = app.kind
        now = self.now()
        body = app.encode()
        out = self._engine.send(body, now, sign=self.sign)
        mid = out.message_id
        lamport = out.lamport_timestamp or 0  # (a message always has one)
        self.book.remember_app(mid, app, body)
        chat = self.book.chat(mid, self.participant_id, app, lamport, ev.SENDING, now)
        stored = body
        if kind in ev.MESSAGE_ACTION_KINDS:
            chat, stored = self.actions.took(chat, app, body)
        self.book.show(chat)
        self.emit(ev.MessageShown(chat))
        history = [h.message_id for h in wire.parse_pb(out.data).causal_history]  # for the inspector
        kv = self.roster.sent(kind, mid, app, now, out.data) if kind in ev.MEMBERSHIP_KINDS else None
        if kind == "topic":
            kv = {**(kv or {}), **self.book.topic_seen(mid, self.participant_id, app, lamport)}
        self.persist(
            now,
            messages=[
                MessageRow(
                    mid,
                    self.participant_id,
                    lamport,
                    redacted_body(body) if kind in ev.MEMBERSHIP_KINDS else stored,
                    ev.SENDING,
                    received_at_ms=now,
                )
            ],
            events=[
                EventRow("sent", now, mid, self.participant_id, lamport_timestamp=lamport, detail={"history": history})
            ],
            kv=kv,
        )
        await self._commit_pending()  # durable before published
        if self.failure is not None:
            raise NodeFailed(self.failure)
        self.enqueue(Outbound(out.data, "message", mid))
        self.book.set_state(mid, ev.UNACKNOWLEDGED, now)
        return mid

    # ------------------------------------------------------------ edits, deletions, reactions (sdschat.node.actions)

    async def edit(self, message_id: str, text: str) -> str:
        """Replace the text of our chat line ``message_id`` (an ``edit`` message in the log; every member shows
        the latest edit in log order); the edit's message id once durable. :class:`~.errors.MessageNotFound`,
        :class:`~.errors.NotAllowed` (someone else's message, or a deleted one), :class:`~.payload.PayloadError`
        (an empty or too long text)."""
        target = await self._action_target(message_id, "edit")
        if target.sender_id != self.participant_id:
            raise NotAllowed("only its author can edit a message")
        if not text.strip():
            raise PayloadError("empty message")
        return await self._send("edit", fallback_text("edit", text), "", {"t": message_id, "text": text})

    async def delete(self, message_id: str) -> str:
        """Delete chat line ``message_id``: ours, or any member's if we are an admin of the channel (shown as deleted
        by us). Its text leaves every member's database as the deletion arrives (sdschat.node.actionbook). The
        deletion's message id once durable; :class:`~.errors.MessageNotFound` or :class:`~.errors.NotAllowed`."""
        target = await self._action_target(message_id, "delete")
        if target.sender_id != self.participant_id and not self.is_admin(self.participant_id):
            raise NotAllowed("only its author or an admin of the channel can delete a message")
        return await self._send("delete", fallback_text("delete"), "", {"t": message_id})

    async def react(self, message_id: str, emoji: str) -> str:
        """React to chat line ``message_id`` with ``emoji``; a second reaction with the same emoji takes it back.
        The reaction's message id once durable; :class:`~.errors.MessageNotFound`, :class:`~.errors.NotAllowed`
        (a deleted message), :class:`~.payload.PayloadError` (not a short emoji: :func:`~.payload.emoji_problem`)."""
        emoji = plain_emoji(emoji)
        problem = emoji_problem(emoji)
        if problem is not None:
            raise PayloadError(problem)
        await self._action_target(message_id, "react")
        return await self._send("react", fallback_text("react", emoji), "", {"t": message_id, "e": emoji})

    async def _action_target(self, message_id: str, what: str) -> ev.ChatMessage:
        """The chat line an edit, deletion or reaction of ours names; one line of refusal if there is none here,
        it is no chat line, or it is deleted."""
        target = self.actions.held(message_id) or (await self.message(message_id) if len(message_id) == 64 else None)
        if target is None:
            raise MessageNotFound(f"no message {message_id[:16]} here to {what}")
        if target.kind not in TARGET_KINDS or target.target is not None:
            raise NotAllowed(f"only a chat line can be {'edited' if what == 'edit' else what + 'd'}")
        if target.deleted:
            raise NotAllowed("the message was deleted")
        self.actions.remember(target)  # (judged against it at once, even if it left memory)
        return target

    async def edit_history(self, message_id: str) -> list[tuple[int, str]]:
        """The versions of message ``message_id``, oldest first: ``(written at ms, text)``, the original then each
        admitted edit in log order (none once deleted: the text is gone)."""
        chat = await self.message(message_id)
        if chat is None or chat.deleted:
            return []
        known = self.book.apps.get(message_id)
        if known is not None:
            original = known[0].text
        else:
            row = await self._db.get_message(self.key.channel_id, message_id)
            app = AppPayload.decode(row.content) if row is not None else None
            original = app.text if app is not None else chat.text
        return [(chat.sent_at_ms, original), *((r.at_ms, r.value or "") for r in self.actions.history(message_id))]

    def is_admin(self, pid: str) -> bool:
        """Whether ``pid`` is an admin of the channel (and not removed)."""
        return self._may_set_topic(pid)

    async def stored_message(self, message_id: str) -> MessageRow | None:
        """Message ``message_id`` as the database holds it (what the writer holds written first)."""
        await self._flush_for_reading()
        return await self._db.get_message(self.key.channel_id, message_id)

    async def stored_actions(self, target_ids: list[str]) -> list[ActionRow]:
        """The edits, deletions and reactions the database holds for ``target_ids``."""
        return await self._db.actions_on(self.key.channel_id, target_ids)

    # ------------------------------------------------------------ membership (sdschat.node.roster)

    @property
    def membership(self) -> Membership | None:
        """The channel's members, admins and key epochs as this node knows them (None before the node opened)."""
        return self.roster.state

    def has_task(self, name: str) -> bool:
        return any(t.get_name() == name for t in self._tasks)

    @property
    def removed_me(self) -> bool:
        """Whether an admin removed us from the channel."""
        return self.roster.removed_me

    @property
    def locked_out(self) -> int:
        """A key epoch that began without a key for us (and did not remove us): what we send and hear is on an
        older key the others have left. 0 while we hold the newest key we know of."""
        return self.roster.state.locked_out if self.roster.state is not None else 0

    def member_of(self, name: str) -> str:
        """The participant id of the member called ``name``; :class:`~.errors.MemberNotFound` (one line) if none or
        several."""
        return self.roster.member_of(name)

    def _may_set_topic(self, pid: str) -> bool:
        """Who may set the channel's topic: its admins (not removed)."""
        m = self.roster.state
        return m is not None and pid in m.admins and pid not in m.removed

    @property
    def topic(self) -> ev.Topic | None:
        """The channel's topic: the admitted ``topic`` message latest in log order (None: never set; its text ""
        once cleared). Kept in the database's kv table, so it survives a restart."""
        return self.book.topic

    async def set_topic(self, text: str) -> str:
        """Set the channel's topic (``""``: clear it) with a ``topic`` message in the log; its message id.
        :class:`~.errors.NotAllowed` unless we are an admin of the channel."""
        self.check_admin()
        return await self._send("topic", clean_topic(text), "", None)

    def check_admin(self) -> None:
        """NotAllowed (one line) unless we are an admin of the channel (and still a member)."""
        self.roster.check_admin()

    async def kick(self, name: str) -> tuple[str, int, int]:
        """Remove the member called ``name``: a new key epoch sealed to everyone else. Returns (participant id,
        epoch, members who get the key); a :class:`~.errors.UserError` (one line) if we are not an admin or there is
        no such member."""
        return await self.roster.kick(name)

    async def rekey(self, remove=()) -> tuple[int, int]:
        """Start a new key epoch (without ``remove``); returns (epoch, members who get the key)."""
        return await self.roster.rekey(remove)

    async def name_admin(self, name: str) -> str:
        """Make the member called ``name`` an admin too; returns its participant id."""
        return await self.roster.name_admin(name)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task:
        """Run ``coro`` as one of the node's tasks (cancelled at stop); a failure is logged and told."""
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.append(task)

        def done(t: asyncio.Task) -> None:
            if t in self._tasks:
                self._tasks.remove(t)
            if not t.cancelled() and t.exception() is not None:
                log.warning("%s failed: %s", name, t.exception())
                self._problem("internal", f"{name}: {t.exception()}")

        task.add_done_callback(done)
        return task

    async def send_typing(self) -> None:
        now = self.now()
        self.presences.active(now, typed=True)
        if not self.ready:  # a typing notice is not worth waiting for
            return
        app = AppPayload.new("typing", self.nick, "", now, epoch=self.roster.membership.current.number)
        out = self._engine.send_ephemeral(app.encode(), now, sign=self.sign)
        self.enqueue(Outbound(out.data, "ephemeral"))

    def set_nick(self, nick: str) -> None:
        """Take a new nick; a member of the channel tells the others (a ``nick`` line: ``* bob is now alicia``)."""
        old, self.nick = self.nick, nick.strip()[:64] or self.nick
        if (
            self.nick != old
            and self.ready
            and self.config.membership
            and self.roster.membership.joined
            and not self.removed_me
            and not self.stopping
        ):
            self.spawn(self.send_control("nick", {"from": old}), "sdschat-nick")

    async def leave(self, timeout: float = 5.0) -> bool:
        """Tell the others we leave (``/part``: a ``leave`` line, ``* bob left``) and wait up to ``timeout``
        seconds for a member to acknowledge it (it is resent meanwhile); whether one did. Nothing to tell if we
        never joined or were removed."""
        if (
            not self.config.membership
            or self.membership is None
            or not self.membership.joined
            or self.removed_me
            or self.failure
        ):
            return False
        try:
            await asyncio.wait_for(self._leave(), timeout)
        except (TimeoutError, NodeFailed, UserError):
            return False
        return True

    async def _leave(self) -> None:
        mid = await self.send_control("leave", {})
        while mid in self._engine.outgoing_ids:
            await asyncio.sleep(0.05)
        await self.drain_outbox()

    async def drain_outbox(self) -> None:
        """Wait until every frame queued so far has been handed to the transport."""
        await self.outbox.join()

    async def _publisher(self) -> None:
        while True:
            item = await self.outbox.get()
            data, reason, mid = item.data, item.reason, item.message_id
            try:
                if self.writer is not None:
                    # what a frame acknowledges (its filter, its history) is durable before anyone reads it: the
                    # writer may be holding received messages back for a commit with others (commit_within_ms)
                    await self._commit_pending()
                # an epoch message goes out under the key before it (for the members who have not switched) and
                # under the current one (for those who joined with it); everything else under the current key,
                # unless the item names its keys (an admin message handed to a member on an older key)
                keys = item.keys if item.keys is not None else self.roster.membership.seal_keys_for(mid)
                frame = pack(self._me, self.key.channel_binding, data, reason)
                for i, key in enumerate(keys):
                    envelope = key.seal(frame)
                    if reason == "message" and mid and i == 0:
                        self._engine.set_retrieval_hint(mid, envelope_hash(envelope))
                        self.persist(self.now())
                    try:
                        ok = self.transport is not None and await self.transport.publish(key.topic, envelope)
                    except Exception as exc:  # never let one publish kill the node
                        log.warning("publish failed: %s", exc)
                        ok = False
                    self.counters["published" if ok else "publish_failed"] += 1
                    self._record_out(data, reason, len(envelope), ok)
            finally:
                self.outbox.task_done()

    def _record_out(self, data: bytes, reason: str, size: int, ok: bool) -> None:
        msg = wire.decode(data)  # our own frame: it decodes
        if ok:
            self.presences.published(self.now())  # every frame tells the others we are here
        self.wire.add(
            frame_of(
                self.now(), "out", reason, None, msg, self.participant_id, size, "published" if ok else "publish failed"
            )
        )

    # ------------------------------------------------------------ the collaborators' doors (sdschat.node.ports)

    def enqueue(self, item: Outbound) -> None:
        """Queue a frame for the publisher."""
        self.outbox.put_nowait(item)

    def subscribe(self, topic: str) -> None:
        """Listen on ``topic`` too (a new key's), in a task; nothing before the node is connected."""
        if self.transport is not None:
            self.spawn(self._subscribe(self.transport, topic), "sdschat-subscribe")

    @staticmethod
    async def _subscribe(transport: ImpairedTransport, topic: str) -> None:
        await transport.subscribe(topic)

    def unsubscribe(self, topic: str) -> None:
        if self.transport is not None:
            self.transport.unsubscribe(topic)

    def topics(self) -> list[str]:
        """The topics of the keys we keep, the current one first."""
        return self.roster.membership.topics()

    def catch_up(self) -> None:
        if self.transport is not None:  # (before the node connects, its start catches up)
            self.store_client.start_catch_up()

    def take_events(self, events: list[Event], now: int) -> None:
        self.receiver.handle(events, Turn(now))

    def take_frame(self, payload: bytes, source: str) -> None:
        self.receiver.on_frame(payload, source=source)

    def reject(self, reason: ev.RejectReason, detail: str, now: int) -> None:
        self.receiver.reject(reason, detail, now)

    def count(self, name: str) -> None:
        self.counters[name] += 1

    def peer_worked(self, now: int) -> None:
        self.last_peer_work_ms = now

    async def scrub(self) -> None:
        await self._db_writer.flush()
        await self._db.scrub()

    async def erase_traces(self) -> None:
        """After a deletion: the erased words leave the search index's older segments, then the log file
        (:meth:`~sdschat.store.Store.purge_search`, :meth:`~sdschat.store.Store.scrub`)."""
        await self._db_writer.flush()
        await self._db.purge_search()
        await self._db.scrub()

    # ------------------------------------------------------------ internals

    def _problem(self, what: ev.ProblemKind, detail: str) -> None:
        """Tell that the node itself is in trouble (:class:`~.events.NodeProblem`): not a frame's refusal."""
        self.emit(ev.NodeProblem(what, detail))

    def emit(self, event: ev.NodeEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a listener must not break the node
                log.exception("node listener failed")

    def wake(self) -> None:
        """The engine has new deadlines: the ticker looks again now if one is due before its next look (most
        frames only add later ones: an owed acknowledgement, a sync put off; waking for each would cost a
        tick a frame)."""
        channel = self.channel
        if self._tick_at and channel is not None and channel.next_deadline() < self._tick_at:
            self._wake.set()

    def _writer_failed(self, exc: BaseException) -> None:
        # the store is no longer being written: the node stops taking anything in (nothing it accepts could be
        # made durable) and says so once; the owner decides (the CLI exits with one line, the UI shows it)
        if self.failure is not None:
            return
        self.failure = _write_failure(exc)
        log.debug("%s", self.failure)
        self._problem("storage", self.failure)

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
        """Hand this turn's changes to the writer (``kv``: key-value rows written in the same transaction). After
        a write failure nothing more is persisted."""
        if self.channel is None:  # stopped while the engine was being restored: nothing of it changed
            return
        ops = self.channel.drain_journal()
        if kv:
            ops = [*ops, *(("kv", k, v) for k, v in kv.items())]
        acted, rewrites = self.actions.drain()
        if acted or rewrites:
            ops, updates = [*ops, *acted], [*updates, *rewrites]
        if not (ops or messages or updates or events or participants) or self.failure is not None:
            return
        try:
            self._db_writer.submit(
                self.channel.channel_id,
                ops,
                messages=messages,
                message_updates=updates,
                events=events,
                participants=participants,
            )
        except StoreError as exc:
            self._writer_failed(exc)
            return
        if events:
            self._events_since_compact += len(events)
            if self._events_since_compact >= max(10, self.config.events_keep // 10):
                self._compact_events()

    def _compact_events(self) -> None:
        """Fold the events beyond the window (``events_keep``) in the background, one compaction at a time."""
        if self.config.events_keep <= 0 or self._compacting is not None or self.stopping:
            return
        self._events_since_compact = 0
        self._compacting = asyncio.get_running_loop().create_task(self._compact(), name="sdschat-node-compact")

    async def _compact(self) -> None:
        try:
            self.events_compacted += await self._db.compact_events(self.config.events_keep)
        except StoreError as exc:  # the writer's own failure is what stops the node; this only costs space
            log.warning("events compaction failed: %s", exc)
        finally:
            self._compacting = None

    def _on_connection(self, change: StateChange) -> None:
        if change.state == ConnectionState.CONNECTED:
            self.online_since_ms = self.now()
        self.emit(ev.ConnectionChanged(str(change.state), change.detail))
        if change.state == ConnectionState.CONNECTED:
            if self._was_connected and self.channel is not None:
                # back online: what queued in the outgoing buffer goes out now
                now = self.now()
                self.receiver.handle(self.channel.resend_now(now), Turn(now))
                self.store_client.start_catch_up()  # and what we missed meanwhile comes from the store, if any
            self._was_connected = True

    def _on_frame(self, topic: str, payload: bytes, source: str | None = None) -> None:
        if self.stopping or self.channel is None or self.failure is not None:
            return
        if topic == self.store_client.reply_topic and source is None:
            self.store_client.on_reply(payload)
            return
        self.receiver.on_frame(payload, source, topic)

    async def _ticker(self) -> None:
        channel = self._engine  # (started once the engine is restored)
        while True:
            self.ticker_turns += 1
            now = self.now()
            try:
                events = channel.tick(now)
                if events:
                    self.receiver.handle(events, Turn(now))
                self._maybe_counters()
                self.roster.tick(now)
                self.presences.tick(now)
                await self.store_client.maybe_mark_synced(now)
            except Exception as exc:  # a bug must not silently stop resends and repairs
                log.exception("node tick failed")
                self._problem("internal", f"{exc.__class__.__name__}: {exc}")
            now = self.now()
            delay_ms = min(500, max(5, channel.next_deadline() - now))
            self._tick_at = now + delay_ms
            try:
                await asyncio.wait_for(self._wake.wait(), delay_ms / 1000)
            except TimeoutError:
                pass
            self._tick_at = 0
            self._wake.clear()

    def _maybe_counters(self) -> None:
        """CountersChanged, at most every COUNTERS_EVERY_MS (the ticker wakes with every frame; the views show
        counters once a second, and a snapshot is ~40 values)."""
        now = self.now()
        if now < self._counters_due:
            return
        self._counters_due = now + COUNTERS_EVERY_MS
        snapshot = self.health()
        if snapshot != self._last_counters:
            self._last_counters = snapshot
            self.emit(ev.CountersChanged(snapshot))
