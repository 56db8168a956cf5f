"""One participant: SDS engine + SQLite store + encryption + MQTT, run by asyncio.

The node is the only place where the pieces meet. It turns engine events into
persisted rows and published frames, and into UI-level events
(:mod:`sdschat.node.events`) for its listeners.

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
import hashlib
import json
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from ..crypto import ChannelKey, CryptoError, EnvelopeError, Identity, SignatureError, envelope_hash, open_signed_content, signed_content
from ..sds import (
    Acknowledged,
    ChannelConfig,
    Delivered,
    EphemeralReceived,
    Evicted,
    GapDetected,
    Lost,
    MessageChannel,
    Missing,
    Outgoing,
    PossiblyAcknowledged,
    Rejected,
    RepairConfig,
    RepairRequested,
    RepairServed,
    SyncReceived,
    WireError,
    wire,
)
from ..storenode import protocol as store_proto
from ..store import EventRow, MessageRow, MessageUpdate, ParticipantRow, Store, StoreError, StoreWriter
from ..transport import ConnectionState, ImpairedTransport, MqttTransport, StateChange, resolve_broker
from . import events as ev
from .frame import FrameError, pack, unpack
from .payload import AppPayload, PayloadError

__all__ = ["Node", "NodeConfig", "NodeFailed", "node_channel_config"]


#: message states that no later event changes (such messages may leave memory; see ``memory_messages``)
_FINAL_STATES = frozenset({ev.RECEIVED, ev.ACKNOWLEDGED})


class NodeFailed(Exception):
    """The node can take nothing more in: its database can no longer be written (``Node.failure`` says why)."""


def _write_failure(exc: BaseException) -> str:
    """One line for a failed database write (the store's own message, without wrapper class names)."""
    while isinstance(exc, StoreError) and isinstance(getattr(exc, "original", None), BaseException):
        exc = exc.original
    return f"database write failed: {exc if isinstance(exc, StoreError) else f'{type(exc).__name__}: {exc}'}"

log = logging.getLogger("sdschat.node")

#: kv key: wall-clock ms up to which this node is known to have seen its channel (store catch-ups start there)
_SYNCED_KEY = "store_synced_until"


def node_channel_config(**overrides) -> ChannelConfig:
    """The engine settings sdschat nodes use (common to the group, like T_min/T_max).

    Causal history 10 (see DESIGN.md: K=2 leaves gaps nobody learns of under
    loss); resends and SDS-R timings sized for interactive chat in small
    groups rather than the RFC's 30 s+ recommendations for large ones.
    """
    repair_keys = {f.name for f in dataclasses.fields(RepairConfig)}
    repair_over = {k[len("repair_"):]: v for k, v in overrides.items() if k.startswith("repair_") and k[len("repair_"):] in repair_keys}
    chan_over = {k: v for k, v in overrides.items() if not k.startswith("repair_")}
    repair = RepairConfig(**{"t_min_ms": 2_000, "t_max_ms": 10_000, **repair_over})
    base = dict(
        causal_history_size=10,
        resend_unacknowledged_ms=2_000,
        resend_possibly_acknowledged_ms=6_000,
        resend_backoff=1.5,
        resend_max_interval_ms=10_000,
        sync_interval_ms=10_000,
        sync_jitter_ms=3_000,
        possible_acks_group_cap=True,
        ack_delay_ms=300,
        ack_jitter_ms=700,
        lost_after_ms=120_000,
        gap_hints=10,
    )
    base.update(chan_over)
    return ChannelConfig(repair=repair, **base)


@dataclasses.dataclass
class NodeConfig:
    nick: str
    key: ChannelKey
    db_path: Path
    broker_url: str | None = None
    qos: int = 0
    channel_config: ChannelConfig = dataclasses.field(default_factory=node_channel_config)
    impairment: dict = dataclasses.field(default_factory=dict)
    seed: int | None = None
    clock: Callable[[], float] = time.time
    probe_port: int = 1883
    #: ask a store node (if one answers on ``store_request_topic``) for missing messages and to catch up
    use_store: bool = True
    store_request_topic: str = store_proto.REQUEST_TOPIC
    #: ask by retrieval hint this long after a gap shows (well before SDS-R's T_req >= T_min)
    store_hint_delay_ms: int = 200
    #: give up quietly on an unanswered store request after this long
    store_timeout_s: float = 3.0
    #: catch-ups start this much before the last time we were known to be in sync (clock skew, in-flight)
    store_sync_margin_ms: int = 10_000
    #: messages kept in memory (the newest; plus every one whose state can still change); the rest is read
    #: from the database by :meth:`Node.history`
    memory_messages: int = 5_000


Listener = Callable[[ev.NodeEvent], None]


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
        self._embedded = None
        self._listeners: list[Listener] = []
        self._messages: dict[str, ev.ChatMessage] = {}
        #: message id -> (payload, signed body) of content whose signature and id were checked on arrival
        self._apps: OrderedDict[str, tuple[AppPayload, bytes]] = OrderedDict()
        self._participants: dict[str, ParticipantRow] = {}
        self._outbox: asyncio.Queue[tuple[bytes, str, str | None]] = asyncio.Queue()
        self._tasks: list[asyncio.Task] = []
        self._wake = asyncio.Event()
        self._stopping = False
        self._last_counters: dict = {}
        self._was_connected = False
        #: set (one line) when persistence failed; the node keeps no further promises of durability
        self.failure: str | None = None
        #: wall-clock ms of the last frame showing a peer still at work (a resend, a repair answer or request)
        self.last_peer_work_ms = 0
        self.counters: dict[str, int] = dict.fromkeys(
            ("undecryptable", "rejected", "impersonation", "published", "publish_failed", "received_frames"), 0
        )
        # store node client (see _store_* below)
        self._store_reply_topic = store_proto.REPLY_PREFIX + os.urandom(8).hex()
        self._store_waiting: dict[str, asyncio.Future] = {}
        self._store_hints: dict[str, bytes] = {}  # message id -> retrieval hint, to ask for
        self._store_asked: set[str] = set()
        self._store_hint_timer: asyncio.TimerHandle | None = None
        self._store_tasks: set[asyncio.Task] = set()
        self._catch_up_task: asyncio.Task | None = None
        self._store_seq = 0
        self._synced_written_ms = 0
        #: store client counters: requests sent, answers, timeouts, envelopes fed, messages delivered from them
        self.store_counters: dict[str, int] = dict.fromkeys(
            ("requests", "answers", "timeouts", "envelopes", "delivered", "repaired", "catch_ups"), 0)

    # -------------------------------------------------------------- lifecycle

    @classmethod
    async def start(cls, config: NodeConfig) -> Node:
        node = cls(config)
        try:
            await node._start()
        except BaseException:
            await node.stop()
            raise
        return node

    def _now(self) -> int:
        return int(self.config.clock() * 1000)

    async def _start(self) -> None:
        cfg = self.config
        self.store = await Store.open(cfg.db_path)
        self.writer = StoreWriter(self.store, on_error=self._writer_failed)
        raw = await self.store.get_identity()
        if raw is None:
            self.identity = Identity.generate()
            await self.store.set_identity(self.identity.private_bytes())
        else:
            try:
                self.identity = Identity.from_private_bytes(raw)
            except (CryptoError, ValueError, TypeError) as exc:
                raise StoreError(f"database {cfg.db_path}: the stored identity is damaged ({exc})") from None
        pid = self.identity.participant_id
        cid = self.key.channel_id
        state = await self.store.load_state(cid)
        config_json = json.dumps(dataclasses.asdict(cfg.channel_config), sort_keys=True)
        if state is not None:
            if state.participant_id != pid:
                raise StoreError(f"database {cfg.db_path}: the channel state belongs to another identity (damaged)")
            try:
                channel = MessageChannel.restore(state, cfg.channel_config, journal=True)
                problems = channel.check_invariants()
            except (ValueError, TypeError, KeyError) as exc:
                problems = [str(exc)]
            if problems:  # never run on a state the engine's own rules say cannot be
                raise StoreError(f"database {cfg.db_path}: the channel state is damaged ({problems[0]})")
            self.channel = channel
        else:
            self.channel = MessageChannel(cid, pid, cfg.channel_config, self._now(), journal=True)
            await self.store.save_state(self.channel.snapshot(), config_json)
        await self.store.kv_set("nick", self.nick)
        await self.store.kv_set("channel_name", self.key.channel_name)
        async for row in self.store.iter_messages(cid):
            chat = self._chat_of_row(row)
            if chat is not None:
                self._messages[row.message_id] = chat
                self._trim_messages()
        for p in await self.store.participants():
            self._participants[p.participant_id] = p
        self.broker_url, self._embedded = await resolve_broker(cfg.broker_url, probe_port=cfg.probe_port)
        # a random client id: the broker learns nothing of who connects
        inner = MqttTransport(self.broker_url, qos=cfg.qos, client_id=f"sdschat-{os.urandom(8).hex()}")
        self.transport = ImpairedTransport(inner, seed=cfg.seed, **cfg.impairment)
        self.transport.set_message_handler(self._on_frame)
        self.transport.add_state_listener(self._on_connection)
        await self.transport.start()
        await self.transport.subscribe(self.key.topic)
        if cfg.use_store:
            await self.transport.subscribe(self._store_reply_topic)
        if cfg.use_store:
            if await self.store.kv_get(_SYNCED_KEY) is None:
                await self._mark_synced(self._now())  # a new member: nothing of ours to catch up on
            else:
                self._start_catch_up()  # started after a gap (before the ticker can move "synced until")
        self._tasks.append(asyncio.create_task(self._ticker(), name="sdschat-node-tick"))
        self._tasks.append(asyncio.create_task(self._publisher(), name="sdschat-node-publish"))
        if cfg.use_store:
            self._want_from_store([row.entry for row in self.channel.snapshot().missing])

    async def stop(self) -> None:
        """Shut down in order: tasks, transport, final flush, store. Each step is bounded, so a
        stuck component cannot hang the exit; what it cost is logged."""
        if self._stopping:
            return
        self._stopping = True
        if self._store_hint_timer is not None:
            self._store_hint_timer.cancel()
        for t in list(self._store_tasks):
            t.cancel()
        for t in self._tasks:
            t.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=2.0)
        if self.transport is not None:
            await self._bounded("transport stop", self.transport.stop(), 5.0)
        if self.writer is not None:
            if self.failure is None and self.channel is not None:
                self._persist(self._now())
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
        except (asyncio.TimeoutError, TimeoutError):
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
        return self.identity.participant_id

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def messages(self) -> list[ev.ChatMessage]:
        """The messages held in memory, in local-log order (waiting ones by their Lamport place): the newest
        ``memory_messages`` and every one whose state can still change. :meth:`history` has them all."""
        return sorted(self._messages.values(), key=lambda m: (m.lamport_timestamp, m.message_id))

    def open_gaps(self) -> list[ev.GapOpened]:
        """The gaps still open, as the :class:`~sdschat.node.events.GapOpened` events that reported them.

        For a view opened later (after a restart, say): the engine's waiting
        messages with what each waits for, then the missing ids only a sync
        named (``message_id`` ""). Messages this node does not show (not
        decodable) are left out, as they were live.
        """
        if self.channel is None:
            return []
        shown = self._messages
        return [ev.GapOpened(mid, ids, senders) for mid, ids, senders in self.channel.open_gaps()
                if not mid or mid in shown]

    async def history(self) -> list[ev.ChatMessage]:
        """Every message of the channel in local-log order: the database's rows, with what is in memory
        (newer: the writer batches) taking precedence."""
        known = dict(self._messages)
        out: list[ev.ChatMessage] = []
        try:
            await self.writer.flush()
        except StoreError:
            pass  # node.failure says it; the database still holds everything flushed before
        async for row in self.store.iter_messages(self.key.channel_id):
            chat = known.pop(row.message_id, None) or self._chat_of_row(row)
            if chat is not None:
                out.append(chat)
        out.extend(known.values())
        out.sort(key=lambda m: (m.lamport_timestamp, m.message_id))
        return out

    def _chat_of_row(self, row: MessageRow) -> ev.ChatMessage | None:
        app = self._decode_app(row.content)
        if app is None:
            return None
        return self._chat(row.message_id, row.sender_id, app, row.lamport_timestamp, row.state,
                          row.received_at_ms or 0, row.possible_ack_count, row.resends, row.repaired)

    def _trim_messages(self) -> None:
        """Forget the oldest messages whose state is final (they stay in the database) beyond the cap."""
        cap = self.config.memory_messages
        excess = len(self._messages) - cap
        if excess <= max(64, cap // 10):  # trim in batches: one pass per many messages
            return
        drop = []
        for mid, chat in self._messages.items():
            if chat.state in _FINAL_STATES:
                drop.append(mid)
                if len(drop) >= excess:
                    break
        for mid in drop:
            del self._messages[mid]

    def participants(self) -> list[ParticipantRow]:
        return sorted(self._participants.values(), key=lambda p: -p.last_seen_ms)

    def health(self) -> dict:
        """Channel health for the side panel: clock, buffer sizes, counters, connection."""
        out = dict(self.channel.summary())
        out.update({k: v for k, v in self.channel.stats.items()})
        out.update(self.counters)
        out["connection"] = str(self.transport.state) if self.transport else "stopped"
        return out

    def pending(self) -> bool:
        """Whether anything is still in flight (unacked own messages, gaps, repairs)."""
        ch = self.channel
        return bool(ch.outgoing_ids or ch.incoming_ids or ch.missing_ids or ch.repair_request_ids
                    or ch.repair_response_ids or self._outbox.qsize())

    def settled(self, quiet_ms: int) -> bool:
        """Nothing pending here, and no peer resent, repaired or asked for a repair in ``quiet_ms``."""
        return not self.pending() and self._now() - self.last_peer_work_ms >= quiet_ms

    def set_impairment(self, **settings) -> None:
        """Change the link impairment now (loss_in, loss_out, delay_ms, jitter_ms, duplicate, offline)."""
        self.transport.set(**settings)

    @property
    def impairment(self):
        return self.transport.settings

    # ------------------------------------------------------------------ send

    async def send_text(self, text: str, kind: str = "msg") -> str:
        """Send a chat line; returns its message id once it is durable (publishing follows).

        Raises :class:`NodeFailed` once the database can no longer be written.
        """
        if not text.strip():
            raise ValueError("empty message")
        if self.failure is not None:
            raise NodeFailed(self.failure)
        now = self._now()
        app = AppPayload.new(kind, self.nick, text, now)
        body = app.encode()
        content = signed_content(self.identity, self.key.channel_binding, body)
        out = self.channel.send(content, now)
        mid = out.message_id
        self._remember_app(mid, app, body)
        chat = self._chat(mid, self.participant_id, app, out.lamport_timestamp, ev.SENDING, now)
        self._messages[mid] = chat
        self._emit(ev.MessageShown(chat))
        self._persist(now, messages=[MessageRow(mid, self.participant_id, out.lamport_timestamp, body, ev.SENDING,
                                                received_at_ms=now)],
                      events=[EventRow("sent", now, mid, self.participant_id, lamport_timestamp=out.lamport_timestamp)])
        try:
            await self.writer.flush()  # durable before published
        except StoreError as exc:
            self._writer_failed(exc)
        if self.failure is not None:
            raise NodeFailed(self.failure)
        self._outbox.put_nowait((out.data, "message", mid))
        self._set_state(mid, ev.UNACKNOWLEDGED, now)
        return mid

    async def send_typing(self) -> None:
        now = self._now()
        app = AppPayload.new("typing", self.nick, "", now)
        content = signed_content(self.identity, self.key.channel_binding, app.encode())
        out = self.channel.send_ephemeral(content, now)
        self._outbox.put_nowait((out.data, "ephemeral", None))

    def set_nick(self, nick: str) -> None:
        self.nick = nick.strip()[:64] or self.nick

    # ------------------------------------------------------------- internals

    def _emit(self, event: ev.NodeEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a listener must not break the node
                log.exception("node listener failed")

    def _writer_failed(self, exc) -> None:
        # the store is no longer being written: the node stops taking anything in (nothing it accepts could be
        # made durable) and says so once; the owner decides (the CLI exits with one line, the UI shows it)
        if self.failure is not None:
            return
        self.failure = _write_failure(exc)
        log.debug("%s", self.failure)
        self._emit(ev.FrameRejected("storage", self.failure))

    def _persist(self, now: int, *, messages=(), updates=(), events=(), participants=()) -> None:
        """Hand this turn's changes to the writer. After a write failure nothing more is persisted."""
        ops = self.channel.drain_journal()
        if not (ops or messages or updates or events or participants) or self.failure is not None:
            return
        try:
            self.writer.submit(self.channel.channel_id, ops, messages=messages, message_updates=updates,
                               events=events, participants=participants)
        except StoreError as exc:
            self._writer_failed(exc)

    def _chat(self, mid, sender, app: AppPayload, lamport, state, received_at=0, acks=0, resends=0, repaired=False):
        return ev.ChatMessage(mid, sender, app.nick, app.text, app.kind, app.sent_at_ms, lamport,
                              sender == self.participant_id, state, acks, resends, bool(repaired), None, received_at)

    def _decode_app(self, body: bytes) -> AppPayload | None:
        try:
            return AppPayload.decode(body)
        except PayloadError:
            return None

    def _app_of(self, mid: str, content: bytes) -> tuple[AppPayload | None, bytes]:
        """The verified application payload inside signed SDS content and its signed body.

        Checked once: content verified on arrival (its id is its hash) is remembered by id, so delivering it
        later costs no second signature check.
        """
        known = self._apps.get(mid)
        if known is not None:
            return known
        try:
            signed = open_signed_content(content, self.key.channel_binding)
        except SignatureError:
            return None, b""
        app = self._decode_app(signed.message)
        if app is not None and mid:
            self._remember_app(mid, app, signed.message)
        return app, signed.message

    def _remember_app(self, mid: str, app: AppPayload, body: bytes) -> None:
        self._apps[mid] = (app, body)
        if len(self._apps) > 4096:
            self._apps.popitem(last=False)

    def _set_state(self, mid: str, state: str, now: int, acks: int | None = None, resends: int | None = None) -> MessageUpdate | None:
        chat = self._messages.get(mid)
        if chat is None:
            return None
        if chat.state == ev.ACKNOWLEDGED and state != ev.ACKNOWLEDGED:
            return None  # acknowledged is final
        chat = dataclasses.replace(chat, state=state,
                                   possible_acks=chat.possible_acks if acks is None else acks,
                                   resends=chat.resends if resends is None else resends)
        self._messages[mid] = chat
        self._emit(ev.AckStateChanged(mid, state, chat.possible_acks, chat.resends))
        upd = MessageUpdate(mid, state=state, possible_ack_count=acks, resends=resends)
        return upd

    def _seen(self, pid: str, nick: str | None, now: int, rows: list) -> None:
        if pid == self.participant_id:
            return
        old = self._participants.get(pid)
        row = ParticipantRow(pid, nick or (old.nick if old else None), old.first_seen_ms if old else now, now)
        self._participants[pid] = row
        rows.append(row)
        self._emit(ev.ParticipantSeen(pid, row.nick, now))

    def _reject(self, reason: str, detail: str, now: int) -> None:
        self.counters["rejected" if reason != "undecryptable" else "undecryptable"] += 1
        if reason == "impersonation":
            self.counters["impersonation"] += 1
        self._emit(ev.FrameRejected(reason, detail))
        self._persist(now, events=[EventRow("rejected", now, detail={"reason": reason})])

    def _on_connection(self, change: StateChange) -> None:
        self._emit(ev.ConnectionChanged(str(change.state), change.detail))
        if change.state == ConnectionState.CONNECTED:
            if self._was_connected and self.channel is not None:
                # back online: what queued in the outgoing buffer goes out now
                now = self._now()
                self._handle(self.channel.resend_now(now), now)
                self._start_catch_up()  # and what we missed meanwhile comes from the store, if there is one
            self._was_connected = True

    def _on_frame(self, topic: str, payload: bytes, source: str | None = None) -> None:
        if self._stopping or self.channel is None or self.failure is not None:
            return
        if topic == self._store_reply_topic and source is None:
            self._on_store_reply(payload)
            return
        now = self._now()
        self.counters["received_frames"] += 1
        try:
            plain = self.key.open(payload)
        except EnvelopeError as exc:
            self._reject("undecryptable", exc.reason, now)
            return
        try:
            publisher, reason, frame = unpack(plain)
            msg = wire.decode(frame)
        except (FrameError, WireError) as exc:
            self._reject("malformed", str(exc)[:120], now)
            return
        if msg.content:
            if msg.message_id != hashlib.sha256(msg.content).hexdigest():
                # ids are content hashes: another id for the same signed content would be a replay
                self._reject("bad_message_id", "message id is not the hash of its content", now)
                return
            try:
                signed = open_signed_content(msg.content, self.key.channel_binding)
            except SignatureError as exc:
                self._reject("bad_signature", exc.reason, now)
                return
            if signed.participant_id != msg.sender_id:
                self._reject("impersonation", f"content signed by {signed.participant_id[:8]}, sent as {msg.sender_id[:8]}", now)
                return
            app = self._decode_app(signed.message)
            if app is None:
                self._reject("bad_payload", "unreadable application payload", now)
                return
            if msg.message_id:
                self._remember_app(msg.message_id, app, signed.message)
        if (reason in ("resend", "repair") or msg.repair_request) and source is None:
            self.last_peer_work_ms = now
        events = self.channel.receive(frame, now, retrieval_hint=envelope_hash(payload))
        self._handle(events, now, publisher=publisher, reason=reason, source=source)
        self._wake.set()

    def _handle(self, events, now: int, publisher: str | None = None, reason: str | None = None,
                source: str | None = None) -> None:
        messages: list[MessageRow] = []
        updates: list[MessageUpdate] = []
        rows: list[EventRow] = []
        parts: list[ParticipantRow] = []
        pid = self.participant_id

        def upd(u):
            if u is not None:
                updates.append(u)

        for e in events:
            if isinstance(e, Outgoing):
                self._outbox.put_nowait((e.data, e.reason, e.message_id if e.reason in ("message", "resend") else None))
                if e.reason == "resend":
                    chat = self._messages.get(e.message_id)
                    n = (chat.resends + 1) if chat else 1
                    upd(self._set_state(e.message_id, ev.RESENDING, now, resends=n))
                    rows.append(EventRow("resent", now, e.message_id, pid, lamport_timestamp=e.lamport_timestamp,
                                         detail={"resends": n}))
                elif e.reason == "sync":
                    rows.append(EventRow("sync_sent", now, e.message_id, pid, lamport_timestamp=e.lamport_timestamp))
            elif isinstance(e, Delivered):
                app, body = self._app_of(e.message_id, e.content)
                if app is None:
                    continue
                prior = self._messages.get(e.message_id)
                chat = self._chat(e.message_id, e.sender_id, app, e.lamport_timestamp, ev.RECEIVED, now,
                                  repaired=e.repaired)
                if source == "store":
                    self.store_counters["delivered"] += 1
                if e.repaired:
                    if source == "store":
                        via, by = "store", None
                        self.store_counters["repaired"] += 1
                    else:
                        via = {"repair": "sds-r", "resend": "resend"}.get(reason or "", "late")
                        by = publisher if via == "sds-r" else None
                    chat = dataclasses.replace(chat, repaired_by=by)
                if prior is None:
                    self._messages[e.message_id] = chat
                    self._emit(ev.MessageShown(chat))
                    messages.append(MessageRow(e.message_id, e.sender_id, e.lamport_timestamp, body, ev.RECEIVED,
                                               repaired=e.repaired, after_lost=e.after_lost, received_at_ms=now))
                    rows.append(EventRow("received", now, e.message_id, e.sender_id, lamport_timestamp=e.lamport_timestamp))
                else:
                    self._messages[e.message_id] = dataclasses.replace(prior, state=ev.RECEIVED)
                    self._emit(ev.GapClosed(e.message_id, tuple(e.after_lost)))
                    updates.append(MessageUpdate(e.message_id, state=ev.RECEIVED, after_lost=tuple(e.after_lost)))
                if e.repaired:
                    self._emit(ev.MessageRepaired(e.message_id, via, by))
                rows.append(EventRow("delivered", now, e.message_id, e.sender_id, lamport_timestamp=e.lamport_timestamp,
                                     detail={"repaired": e.repaired, "via": source or reason, "publisher": publisher,
                                             "after_lost": list(e.after_lost)} if (e.repaired or e.after_lost) else None))
                self._seen(e.sender_id, app.nick, now, parts)
            elif isinstance(e, Missing):
                app, body = self._app_of(e.message_id, e.content)
                if app is None:
                    continue
                chat = self._chat(e.message_id, e.sender_id, app, e.lamport_timestamp, ev.WAITING, now,
                                  repaired=False)
                self._messages[e.message_id] = chat
                self._emit(ev.MessageShown(chat))
                missing_ids = tuple(h.message_id for h in e.missing)
                senders = tuple(sorted({h.sender_id for h in e.missing if h.sender_id}))
                if missing_ids or e.waiting_on:
                    self._emit(ev.GapOpened(e.message_id, missing_ids + tuple(e.waiting_on), senders))
                messages.append(MessageRow(e.message_id, e.sender_id, e.lamport_timestamp, body, ev.WAITING,
                                           received_at_ms=now))
                rows.append(EventRow("received", now, e.message_id, e.sender_id, lamport_timestamp=e.lamport_timestamp))
                rows.append(EventRow("missing", now, e.message_id, e.sender_id, lamport_timestamp=e.lamport_timestamp,
                                     detail={"missing": list(missing_ids), "waiting_on": list(e.waiting_on)}))
                self._want_from_store(e.missing)
                self._seen(e.sender_id, app.nick, now, parts)
            elif isinstance(e, GapDetected):
                ids = tuple(h.message_id for h in e.missing)
                self._emit(ev.GapOpened("", ids, tuple(sorted({h.sender_id for h in e.missing if h.sender_id}))))
                rows.append(EventRow("missing", now, None, e.sender_id, detail={"missing": list(ids), "source": "sync"}))
                self._want_from_store(e.missing)
            elif isinstance(e, Acknowledged):
                upd(self._set_state(e.message_id, ev.ACKNOWLEDGED, now))
                rows.append(EventRow("acked", now, e.message_id, pid, detail={"by_bloom": e.by_bloom}))
            elif isinstance(e, PossiblyAcknowledged):
                upd(self._set_state(e.message_id, ev.POSSIBLY_ACKNOWLEDGED, now, acks=e.count))
                rows.append(EventRow("possibly_acked", now, e.message_id, pid, detail={"count": e.count}))
            elif isinstance(e, Lost):
                self._emit(ev.MessageLost(e.message_id, e.sender_id, tuple(e.dependants)))
                rows.append(EventRow("lost", now, e.message_id, e.sender_id, detail={"dependants": list(e.dependants)}))
            elif isinstance(e, EphemeralReceived):
                app, _ = self._app_of("", e.content)
                if app is not None and app.kind == "typing":
                    self._emit(ev.TypingSeen(e.sender_id, app.nick))
                    self._seen(e.sender_id, app.nick, now, parts)
            elif isinstance(e, SyncReceived):
                self._seen(e.sender_id, None, now, parts)
                rows.append(EventRow("sync_received", now, e.message_id, e.sender_id, lamport_timestamp=e.lamport_timestamp))
            elif isinstance(e, RepairRequested):
                for mid in e.message_ids:
                    rows.append(EventRow("repair_requested", now, mid, None, detail={"carrier": e.carrier_id}))
            elif isinstance(e, RepairServed):
                rows.append(EventRow("repair_served", now, e.message_id, e.sender_id))
            elif isinstance(e, Rejected):
                self.counters["rejected"] += 1
                self._emit(ev.FrameRejected(e.reason, e.detail))
                rows.append(EventRow("rejected", now, e.message_id, e.sender_id, detail={"reason": e.reason}))
            elif isinstance(e, Evicted):
                log.info("evicted %s from %s", e.message_id, e.buffer)
        self._persist(now, messages=messages, updates=updates, events=rows, participants=parts)
        if messages:
            self._trim_messages()

    async def _publisher(self) -> None:
        while True:
            data, reason, mid = await self._outbox.get()
            envelope = self.key.seal(pack(self.participant_id, data, reason))
            if reason == "message" and mid:
                self.channel.set_retrieval_hint(mid, envelope_hash(envelope))
                self._persist(self._now())
            try:
                ok = await self.transport.publish(self.key.topic, envelope)
            except Exception as exc:  # never let one publish kill the node
                log.warning("publish failed: %s", exc)
                ok = False
            self.counters["published" if ok else "publish_failed"] += 1

    async def _ticker(self) -> None:
        while True:
            now = self._now()
            try:
                events = self.channel.tick(now)
                if events:
                    self._handle(events, now)
                self._maybe_counters()
                await self._maybe_mark_synced(now)
            except Exception as exc:  # a bug must not silently stop resends and repairs
                log.exception("node tick failed")
                self._emit(ev.FrameRejected("internal", f"{exc.__class__.__name__}: {exc}"))
            delay = (self.channel.next_deadline() - self._now()) / 1000
            delay = min(0.5, max(0.005, delay))
            try:
                await asyncio.wait_for(self._wake.wait(), delay)
            except (asyncio.TimeoutError, TimeoutError):
                pass
            self._wake.clear()

    def _maybe_counters(self) -> None:
        snapshot = self.health()
        if snapshot != self._last_counters:
            self._last_counters = snapshot
            self._emit(ev.CountersChanged(snapshot))

    # ------------------------------------------------------- store node client
    #
    # Optional and quiet: with no store node answering, every request times out and nothing else
    # changes (SDS-R repairs as before). Envelopes a store returns go through ``_on_frame`` like any
    # other (decrypt, verify, engine), marked ``source="store"``.

    def _store_request(self, *, feed: bool = True, **fields) -> asyncio.Future | None:
        """Publish one request; the future resolves to the Reply. With ``feed`` its envelopes go through
        the receive path before it resolves; without, the caller feeds them (``_feed_from_store``)."""
        if self._stopping or self.transport is None:
            return None
        self._store_seq += 1
        rid = f"{self._store_seq}" if feed else f"{self._store_seq}p"
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        self._store_waiting[rid] = fut
        body = store_proto.encode_request(store_proto.Request(rid, self._store_reply_topic, self.key.topic, **fields))
        self.store_counters["requests"] += 1

        async def send() -> None:
            try:
                await self.transport.publish(self.config.store_request_topic, body)
            except Exception as exc:
                log.debug("store request not sent: %s", exc)

        self._spawn(send())
        return fut

    async def _store_call(self, **fields) -> store_proto.Reply | None:
        return await self._store_wait(self._store_request(**fields))

    async def _store_wait(self, fut: asyncio.Future | None) -> store_proto.Reply | None:
        if fut is None:
            return None
        rid = next((k for k, v in self._store_waiting.items() if v is fut), None)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), self.config.store_timeout_s)
        except (asyncio.TimeoutError, TimeoutError):
            self.store_counters["timeouts"] += 1
            return None
        finally:
            self._store_waiting.pop(rid, None)

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._store_tasks.add(task)
        task.add_done_callback(self._store_tasks.discard)
        return task

    def _on_store_reply(self, payload: bytes) -> None:
        try:
            reply = store_proto.decode_reply(payload)
        except (ValueError, UnicodeDecodeError, IndexError) as exc:
            log.debug("unreadable store reply: %s", exc)
            return
        fut = self._store_waiting.get(reply.id)
        if fut is None or fut.done():
            return  # late (timed out) or not ours
        self.store_counters["answers"] += 1
        if reply.error:
            log.debug("store refused a request: %s", reply.error)
        if not reply.id.endswith("p"):
            self._feed_from_store(reply.envelopes)
        fut.set_result(reply)

    def _feed_from_store(self, envelopes) -> None:
        topic = self.key.topic
        for env in envelopes:
            self.store_counters["envelopes"] += 1
            self._on_frame(topic, env, source="store")
        self._wake.set()

    def _want_from_store(self, entries) -> None:
        """Queue missing entries that carry a retrieval hint (an envelope hash) for a store request."""
        if not self.config.use_store or self._stopping:
            return
        for h in entries:
            hint = h.retrieval_hint
            if hint and len(hint) == 32 and h.message_id not in self._store_asked:
                self._store_hints[h.message_id] = bytes(hint)
        if self._store_hints and self._store_hint_timer is None:
            loop = asyncio.get_running_loop()
            self._store_hint_timer = loop.call_later(self.config.store_hint_delay_ms / 1000,
                                                     lambda: self._spawn(self._ask_hints()))

    async def _ask_hints(self) -> None:
        self._store_hint_timer = None
        if self._catch_up_task is not None and not self._catch_up_task.done():
            await asyncio.wait({self._catch_up_task})  # it may bring them; ask for what is still missing after
        missing = set(self.channel.missing_ids)
        wanted = [(mid, hint) for mid, hint in self._store_hints.items() if mid in missing]
        self._store_hints.clear()
        if len(self._store_asked) > 50_000:
            self._store_asked.clear()
        calls = []
        for i in range(0, len(wanted), store_proto.MAX_HASHES):
            chunk = wanted[i:i + store_proto.MAX_HASHES]
            self._store_asked.update(mid for mid, _ in chunk)
            calls.append(self._store_call(hashes=[hint for _, hint in chunk]))
        if calls:
            await asyncio.gather(*calls)

    def _start_catch_up(self) -> None:
        if not self.config.use_store or self._stopping:
            return
        if self._catch_up_task is not None and not self._catch_up_task.done():
            return
        self._catch_up_task = self._spawn(self._catch_up())

    async def _catch_up(self) -> None:
        """Fetch everything on our topic since we were last in sync, page by page, through the receive path."""
        raw = await self.store.kv_get(_SYNCED_KEY)
        if raw is None:
            return
        since = max(0, int(raw))
        started = self._now()
        self.store_counters["catch_ups"] += 1
        fut = self._store_request(feed=False, since_ms=since, cursor=0, limit=store_proto.MAX_PAGE)
        while True:
            reply = await self._store_wait(fut)
            if reply is None or reply.error:
                return  # no store (or it refused): SDS and SDS-R carry on as usual
            # ask for the next page now, feed this one meanwhile (in slices, so the loop stays responsive)
            fut = (self._store_request(feed=False, since_ms=since, cursor=reply.next_cursor, limit=store_proto.MAX_PAGE)
                   if reply.next_cursor else None)
            envs = reply.envelopes
            for i in range(0, len(envs), 50):
                if self._stopping:
                    return
                self._feed_from_store(envs[i:i + 50])
                await asyncio.sleep(0)
            if fut is None:
                break
        await self._mark_synced(started)

    async def _mark_synced(self, now: int) -> None:
        value = max(0, now - self.config.store_sync_margin_ms)
        try:
            await self.store.kv_set(_SYNCED_KEY, str(value))
            self._synced_written_ms = now
        except Exception as exc:
            log.debug("could not record the sync time: %s", exc)

    async def _maybe_mark_synced(self, now: int) -> None:
        """While connected and not catching up, advance "synced until" (every few seconds)."""
        if (not self.config.use_store or now - self._synced_written_ms < 5_000
                or self.transport is None or self.transport.state != ConnectionState.CONNECTED
                or (self._catch_up_task is not None and not self._catch_up_task.done())):
            return
        await self._mark_synced(now)
