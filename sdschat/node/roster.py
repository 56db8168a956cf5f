"""A node's side of membership: announcing itself, applying membership messages, changing keys.

The rules live in :mod:`.membership` (no I/O); this collaborator of :class:`~sdschat.node.node.Node` runs them:
it loads and keeps the state (one ``kv`` row, written in the same transaction as the message that changed it),
says hello and joins once another member is here, hands its join to a newcomer and the later epoch messages to
a member still on an older key, grants the current key to a late joiner (admins), starts epochs for
``/kick`` and ``/rekey``, deletes superseded keys after the retention window and rotates on the profile's
schedule. As the member count changes it sets the engine's SDS-R timers to the channel's size
(:func:`~sdschat.node.config.repair_for_members`).

The SDS frames of the epoch messages whose keys are kept here, and of the admin messages, are kept in the database
too (``kv`` rows, written with the message that brought them): a member still on an older key gets them from any
member that has them, whatever restarted, with or without a store node. An epoch message's frame holds its key
boxes, so it is deleted with its key (and the file scrubbed) at the end of the retention window.
"""

from __future__ import annotations

import base64
import json
import logging

from ..crypto import Identity
from ..crypto.epochs import exchange_public
from ..store import Store, StoreError
from . import events as ev
from .book import MessageBook
from .config import repair_for_members
from .errors import MemberNotFound, NotAllowed
from .membership import ControlError, EpochApplied, Membership, parse_control
from .outbox import Outbound
from .payload import AppPayload
from .ports import RosterHost

__all__ = [
    "Roster",
    "MEMBERSHIP_KEY",
    "JOIN_FRAME_KEY",
    "ADMIN_FRAMES_KEY",
    "EPOCH_FRAME_PREFIX",
    "STRAGGLER_EVERY_MS",
    "OUTSIDER_MAX_EVERY_MS",
]

log = logging.getLogger("sdschat.node")

#: kv key: the channel's members, admins and kept epoch keys (sdschat.node.membership), as JSON
MEMBERSHIP_KEY = "membership"
#: kv key: our join's SDS frame (to hand to a member who arrives after it was published)
JOIN_FRAME_KEY = "join_frame"
#: kv key: the admin messages applied here, ``{message id: [epoch current then, base64 SDS frame]}`` (JSON)
ADMIN_FRAMES_KEY = "admin_frames"
#: kv key prefix (+ message id): the base64 SDS frame of a kept epoch's epoch message
EPOCH_FRAME_PREFIX = "epoch_frame:"
#: a member seen still on an older key gets the later epoch messages again at most this often (a newcomer our
#: join at most five times as often)
STRAGGLER_EVERY_MS = 5_000
#: an outsider (removed, or holding only a key from before a removal) is told after its first frame, then at
#: doubling intervals up to this (a locked-out member resends forever: telling it each time would never end)
OUTSIDER_MAX_EVERY_MS = 600_000
#: an admin grants keys only once its own key is known to be current: it heard an admitted member under it, or has
#: been up this long (one that was away through another admin's kick must learn of it first: until then it would
#: admit a newcomer holding a key from before the kick)
GRANT_AFTER_UP_MS = 10_000


class Roster:
    """The membership as this node runs it. It owns the :class:`~.membership.Membership` state and its own tables
    (frames kept for stragglers, deferred messages, rate limits); it sees the node through :class:`RosterHost`
    and reads the names of participants from the message book."""

    def __init__(self, host: RosterHost, book: MessageBook) -> None:
        self.host = host
        self.book = book
        #: the channel's members, admins and key epochs (None until :meth:`load`)
        self.state: Membership | None = None
        self._identity: Identity | None = None
        #: SDS frames of epoch messages seen, by message id (kept with their epoch, to hand to stragglers)
        self.epoch_frames: dict[str, bytes] = {}
        #: membership messages refused while they waited for their causal dependencies: tried again when the
        #: engine delivers them (the admin message that makes their author an admin may be one of those)
        self.deferred: set[str] = set()
        #: admin messages applied here: (the epoch current then, SDS frame), to hand a member still on that key
        #: (an epoch message of a new admin is refused by whoever lacks the message that named it)
        self.admin_frames: dict[str, tuple[int, bytes]] = {}
        #: (straggler, its key epoch) -> when it was last handed the later epoch messages
        self._straggler_sent: dict[tuple[str, int], int] = {}
        #: outsider participant id -> (when it may be told again, the interval after that)
        self._outsider_next: dict[str, tuple[int, int]] = {}
        #: straggler participant id -> (when an admin may grant it the current key again, the interval after that)
        self._regrant_next: dict[str, tuple[int, int]] = {}
        #: straggler participant id -> (the older key epoch it was heard on, since when)
        self._straggling: dict[str, tuple[int, int]] = {}
        #: grants put off until our key is known to be current (participant id -> the key epoch it holds)
        self._pending_grants: dict[str, int] = {}
        self._up_ms: int | None = None
        self._current_heard_ms: int | None = None
        #: our join (message id, SDS frame), once sent; when we last handed it to a newcomer
        self._join_frame: tuple[str, bytes] | None = None
        self._greeted_ms = -STRAGGLER_EVERY_MS
        #: we left the channel (``/part``) in this run: announce nothing more until the next start
        self.left = False
        self._last_tick_ms = 0

    @property
    def membership(self) -> Membership:
        """The state (once loaded: the node loads it before anything can reach the roster)."""
        if self.state is None:
            raise RuntimeError("the roster is used before its state was loaded")
        return self.state

    @property
    def identity(self) -> Identity:
        if self._identity is None:
            raise RuntimeError("the roster is used before its state was loaded")
        return self._identity

    async def load(self, identity: Identity, store: Store) -> Membership:
        """The state from the database (a new one: the configured admins, the invite's epoch and removed)."""
        host, cfg = self.host, self.host.config
        self._identity = identity
        state = self.state = Membership(identity.participant_id, host.key, cfg.admins)
        raw = await store.kv_get(MEMBERSHIP_KEY)
        if raw is not None:
            try:
                state.load_json(raw)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise StoreError(f"database {cfg.db_path}: the membership state is damaged ({exc})") from None
        else:
            state.current.started_ms = host.now()  # the first key's age counts from here (rekey_days)
        for pid in cfg.removed:
            state.removed.setdefault(pid, 0)
        adopted = cfg.epoch is not None and state.adopt(cfg.epoch[0], cfg.epoch[1], host.now())
        if raw is None or adopted:
            await store.kv_set(MEMBERSHIP_KEY, state.to_json())
        join = await store.kv_get(JOIN_FRAME_KEY)
        try:
            if join is not None and ":" in join:
                mid, _, frame = join.partition(":")
                self._join_frame = (mid, base64.b64decode(frame, validate=True))
            for e in state.epochs:
                raw_frame = await store.kv_get(EPOCH_FRAME_PREFIX + e.message_id) if e.message_id else None
                if raw_frame is not None:
                    e.frame = base64.b64decode(raw_frame, validate=True)
            admins = json.loads(await store.kv_get(ADMIN_FRAMES_KEY) or "{}")
            self.admin_frames = {mid: (int(n), base64.b64decode(f, validate=True)) for mid, (n, f) in admins.items()}
        except (ValueError, TypeError, AttributeError) as exc:
            raise StoreError(
                f"database {cfg.db_path}: the membership messages kept for stragglers are damaged "
                f"({exc.__class__.__name__})"
            ) from None
        return state

    def _admin_frames_json(self) -> str:
        return json.dumps(
            {mid: [n, base64.b64encode(f).decode("ascii")] for mid, (n, f) in self.admin_frames.items()}, sort_keys=True
        )

    @property
    def removed_me(self) -> bool:
        """Whether an admin removed us from the channel."""
        return self.state is not None and self.state.me in self.state.removed

    def channel_ready(self) -> None:
        """The engine is up: the removed members no longer count as its peers, and its SDS-R timers follow the
        channel's size (it is told both again each start)."""
        self._drop_peers(self.membership.removed, self.host.now())
        self.follow_size()

    @property
    def member_count(self) -> int:
        """The channel's members as this node knows them, itself included; removed members and those who left
        are not counted."""
        return len(self.membership.others()) + 1

    def follow_size(self) -> None:
        """The member count may have changed: set the engine's SDS-R timers and response groups to those of the
        channel's size (:func:`~sdschat.node.config.repair_for_members`), unless the node's configuration keeps
        its own (:attr:`~sdschat.node.config.NodeConfig.follows_size`). Requests and answers already scheduled
        keep their time; those scheduled from now on use the new timers."""
        channel = self.host.channel
        if channel is None or self.state is None or not self.host.config.follows_size:
            return
        count = self.member_count
        want = repair_for_members(count)
        if channel.config.repair != want:
            log.debug(
                "%d members: SDS-R T_min %d ms, T_max %d ms, %d response groups",
                count,
                want.t_min_ms,
                want.t_max_ms,
                want.response_groups,
            )
            channel.set_repair_config(want)

    def _drop_peers(self, pids, now: int) -> None:
        """``pids`` no longer count as the engine's peers (removed, or left): their acknowledgements no longer
        come, and what the others' already hold is acknowledged now (:meth:`MessageChannel.drop_peer`)."""
        channel = self.host.channel
        if channel is None:
            return
        events = [e for pid in pids for e in channel.drop_peer(pid)]
        if events:
            self.host.take_events(events, now)

    # ------------------------------------------------------------ joining

    def started(self) -> None:
        """The node is up: a member not yet announced says hello (an ephemeral frame, acknowledged by nobody):
        whoever is here answers with its join, and ours follows once we see another member."""
        host, m = self.host, self.membership
        self._up_ms = now = host.now()
        if host.config.membership and not m.joined and not self.removed_me and host.channel is not None:
            app = AppPayload.new("hello", host.nick, "", now, epoch=m.current.number)
            out = host.channel.send_ephemeral(app.encode(), now, sign=host.sign)
            host.enqueue(Outbound(out.data, "ephemeral"))

    def want_join(self) -> None:
        """Another member is here: announce ourselves (once per channel) if we have not yet. A member alone in a
        channel announces nothing (nobody could acknowledge it); its first message or the first frame of another
        member brings the join."""
        host = self.host
        if (
            host.config.membership
            and not self.membership.joined
            and not self.removed_me
            and not host.stopping
            and not self.left
            and not host.has_task("sdschat-join")
        ):
            host.spawn(self.join(), "sdschat-join")

    async def join(self) -> None:
        if not self.membership.joined:
            self.membership.joined = True  # (set again when our join is applied: one join, even if two ask)
            await self.host.send_control("join", {"x": exchange_public(self.identity).hex()})

    def greet(self, pid: str, now: int) -> None:
        """A member we have no join of said hello: hand it ours now (it may have been published before that
        member listened), rather than leave it to a repair seconds later. Rate-limited."""
        m = self.membership
        if (
            self._join_frame is None
            or pid in m.members
            or pid == m.me
            or now - self._greeted_ms < STRAGGLER_EVERY_MS // 5
        ):
            return
        self._greeted_ms = now
        mid, frame = self._join_frame
        self.host.enqueue(Outbound(frame, "repair", mid))

    # ------------------------------------------------------------ applying

    def sent(self, kind: str, mid: str, app: AppPayload, now: int, frame: bytes) -> dict | None:
        """Our own membership message, just written to the log: applied here; the kv rows to persist with it."""
        kv = self.apply(mid, self.membership.me, app, now, frame)
        if kind == "join":
            self._join_frame = (mid, frame)
            kv = {**(kv or {}), JOIN_FRAME_KEY: f"{mid}:{base64.b64encode(frame).decode('ascii')}"}
        return kv

    def apply(
        self,
        mid: str,
        sender: str,
        app: AppPayload,
        now: int,
        frame: bytes | None = None,
        via_epoch: int | None = None,
        waiting: bool = False,
    ) -> dict | None:
        """Apply a membership message (ours or delivered; ``via_epoch``: the key epoch of the envelope it came
        in) here; returns the kv row to persist with it (None if it changed nothing). A message that breaks the
        rules (not an admin, damaged data) is refused and counted; one that still ``waiting`` for its causal
        dependencies is only put off (:attr:`deferred`), to be applied again when it is delivered."""
        host, m = self.host, self.membership
        frame = frame if frame is not None else self.epoch_frames.get(mid, b"")
        kv: dict[str, str | None] = {}
        try:
            data = parse_control(app.kind, app.data)
            if app.kind == "join":
                if not m.apply_join(sender, data["x"], app.epoch):
                    why: ev.RejectReason = "removed" if sender in m.removed else "stale_key"
                    host.reject(why, f"join of {sender[:8]} under key epoch {app.epoch} ignored", now)
                    return None
                if host.channel is not None:
                    host.channel.readmit_peer(sender)  # (it may have left, or been dropped, before)
                host.emit(ev.MembershipChanged("join", sender, ()))
                held = app.epoch if via_epoch is None else min(via_epoch, app.epoch)
                if m.needs_grant(sender) and held < m.current.number:
                    # (a join written and sealed under the current key shows its author has it: nothing to give)
                    self.grant_when_current(sender, held, now)
            elif app.kind == "leave":
                if not m.apply_leave(sender):
                    return None
                self.left = self.left or sender == m.me
                if sender != m.me:
                    self._drop_peers((sender,), now)
                host.emit(ev.MembershipChanged("leave", sender, ()))
            elif app.kind == "nick":
                return None  # shown as a line; the new nick is the author's from its next message on
            elif app.kind == "admin":
                added = m.apply_admin(sender, data["add"])
                frame = self.epoch_frames.pop(mid, None) or frame
                if frame:
                    self.admin_frames[mid] = (m.current.number, frame)
                    kv[ADMIN_FRAMES_KEY] = self._admin_frames_json()
                host.emit(ev.MembershipChanged("admin", sender, tuple(added)))
            else:
                self._epoch_applied(m.apply_epoch(sender, mid, data, self.identity, now, frame), mid)
                kept = next((e for e in m.epochs if e.message_id == mid and e.frame), None)
                if kept is not None:
                    kv[EPOCH_FRAME_PREFIX + mid] = base64.b64encode(kept.frame).decode("ascii")
        except ControlError as exc:
            if waiting:
                self.deferred.add(mid)
                return None
            host.reject("bad_control", f"{app.kind} from {sender[:8]}: {exc}", now)
            return None
        self.follow_size()  # (a join, a leave, a removal)
        kv[MEMBERSHIP_KEY] = m.to_json()
        return kv

    def keep_frame(self, mid: str, frame: bytes) -> None:
        """The SDS frame of an epoch or admin message that arrived (checked): kept to hand on to members still on an
        older key once it is applied."""
        self.epoch_frames[mid] = frame

    def take_deferred(self, mid: str) -> bool:
        """Whether ``mid`` is a membership message put off while it waited (it is to be applied again now that it
        is delivered); it is no longer put off after this."""
        if mid in self.deferred:
            self.deferred.discard(mid)
            return True
        return False

    def _epoch_applied(self, out: EpochApplied, mid: str) -> None:
        host = self.host
        self.epoch_frames.pop(mid, None)
        if out.switched:
            host.subscribe(self.membership.send_key.topic)
            host.catch_up()  # what was sent under the new key before we had it
        self._drop_peers(out.removed, host.now())
        if out.removed_me:
            host.emit(ev.MembershipChanged("removed", out.author, out.removed, out.number))
        elif not out.grant:
            host.emit(ev.MembershipChanged("epoch", out.author, out.removed, out.number, out.mine))
        if out.redo and self.membership.is_admin:
            host.spawn(self.rekey(remove=out.redo), "sdschat-rekey")

    def heard_current(self, pid: str, now: int) -> None:
        """An admitted member's frame came under our current key: it is current (pending grants may go)."""
        m = self.membership
        if pid != m.me and pid in m.members and pid not in self._pending_grants:
            self._current_heard_ms = now

    def _current(self, now: int) -> bool:
        heard, up = self._current_heard_ms, self._up_ms
        return (heard is not None and now - heard < 60_000) or (up is not None and now - up >= GRANT_AFTER_UP_MS)

    def grant_when_current(self, pid: str, held: int, now: int) -> None:
        """Grant ``pid`` (holding key epoch ``held``) the current key now if ours is known to be current, else as
        soon as it is (:meth:`tick`)."""
        if self._current(now):
            self.host.spawn(self._grant([pid], held), "sdschat-grant")
        else:
            self._pending_grants[pid] = min(held, self._pending_grants.get(pid, held))

    async def _grant(self, pids, held: int) -> None:
        """Seal the current key to ``pids``, whose join came under key epoch ``held``: the grant goes out under that
        key too (it may be several epochs old). Only to those still members when it goes (a kick learned of
        meanwhile may have ended their admission)."""
        m = self.membership
        pids = [p for p in pids if p in m.members and p not in m.removed and p != m.me]
        if self.host.stopping or self.removed_me or not pids or not m.is_admin or m.current.number == 0:
            return
        mid = await self.host.send_control("epoch", m.grant_data(self.identity, pids))
        # (set before the publisher, which runs once we yield, seals it: Membership.seal_keys_for)
        m.also_under.setdefault(mid, set()).add(held)
        if len(m.also_under) > 1_000:
            m.also_under.pop(next(iter(m.also_under)))

    # ------------------------------------------------------------ admins' commands

    def member_of(self, name: str, include_gone: bool = False) -> str:
        """The participant id of the member called ``name`` (a name as shown, ``bob#3f2a``; a nick; or the start of
        an id); :class:`MemberNotFound` (one line) if none or several. ``include_gone``: also those removed or who
        left."""
        want = name.strip().lstrip("@")
        m, book = self.membership, self.book
        names, me = self.host.names(), m.me
        pool = [p for p in (book.participants if include_gone else m.members) if p != me]
        found = [p for p in pool if names.get(p) == want]
        if not found:
            found = [p for p in pool if (book.participants.get(p) and book.participants[p].nick) == want]
        if not found:
            found = [p for p in pool if len(want) >= 4 and p.startswith(want.lower())]
        if not found:
            known = sorted(names.get(p) or p[:8] for p in m.others())
            raise MemberNotFound(f"no member called {want!r} here (members: {', '.join(known) or 'none yet'})")
        if len(found) > 1:
            raise MemberNotFound(
                f"{len(found)} members are called {want!r}: say which "
                f"({', '.join(names.get(p) or p[:8] for p in found)})"
            )
        return found[0]

    def check_admin(self) -> None:
        """NotAllowed (one line) unless we are an admin of the channel (and still a member)."""
        name = self.host.key.channel_name
        if self.removed_me:
            raise NotAllowed(f"you were removed from #{name}")
        if not self.membership.is_admin:
            names = self.host.names()
            admins = sorted(names.get(p) or p[:8] for p in self.membership.admins)
            raise NotAllowed(
                f"only an admin of #{name} can do that "
                f"(admins: {', '.join(admins) or 'none: a channel joined without an invite'})"
            )

    async def kick(self, name: str) -> tuple[str, int, int]:
        await self._ready()
        self.check_admin()
        pid = self.member_of(name)
        if pid in self.membership.removed:
            raise MemberNotFound(f"{name} was already removed")
        n, count = await self.rekey(remove=(pid,))
        return pid, n, count

    async def rekey(self, remove=()) -> tuple[int, int]:
        await self._ready()
        self.check_admin()
        data = self.membership.new_epoch(self.identity, remove)
        await self.host.send_control("epoch", data)
        return data["epoch"], len(data["keys"])

    async def name_admin(self, name: str) -> str:
        await self._ready()
        self.check_admin()
        pid = self.member_of(name)
        await self.host.send_control("admin", {"add": [pid]})
        return pid

    async def _ready(self) -> None:
        if self.host.channel is None:
            await self.host.wait_ready()

    # ------------------------------------------------------------ keys over time

    def help_straggler(self, epoch: int, now: int, pid: str = "") -> None:
        """A member's frame came under an older key: publish the later epoch messages again under the keys they
        were sealed with (rate-limited), so it switches even with no store node; and the admin messages since, under
        its key (it needs them to accept an epoch message of an admin it has not heard named). An admin also grants
        the current key to ``pid`` under its own key when it is still on that older key two rounds of this later
        (it joined after an epoch began and missed its grant, say: no epoch message holds a key for it)."""
        m = self.membership
        since = self._straggling.get(pid)
        if since is None or since[0] != epoch:
            since = self._straggling[pid] = (epoch, now)
            if len(self._straggling) > 1_000:
                self._straggling.pop(next(iter(self._straggling)))
        if pid and m.is_admin and pid in m.members and not self.removed_me and now - since[1] >= 2 * STRAGGLER_EVERY_MS:
            if not self.host.stopping and _due(self._regrant_next, pid, now):
                self.grant_when_current(pid, epoch, now)
        # (per straggler: an epoch message sealed under the older key too, as every one is, would otherwise use up
        # the turn of a member who needs it)
        if now - self._straggler_sent.get((pid, epoch), -STRAGGLER_EVERY_MS) < STRAGGLER_EVERY_MS:
            return
        self._straggler_sent[(pid, epoch)] = now
        if len(self._straggler_sent) > 1_000:
            self._straggler_sent.pop(next(iter(self._straggler_sent)))
        for mid, frame in m.epoch_frames_after(epoch):
            self.host.enqueue(Outbound(frame, "repair", mid))
        key = next((m.key_of(e) for e in m.epochs if e.number == epoch), None)
        if key is None:
            return  # its key is no longer kept here: nothing of ours it could open
        for mid, (number, frame) in self.admin_frames.items():
            if number >= epoch:  # named since: under the straggler's own key, which it opens
                self.host.enqueue(Outbound(frame, "repair", mid, (key,)))

    def tell_outsider(self, pid: str, epoch: int, now: int) -> None:
        """A frame came under key epoch ``epoch`` from ``pid``, who is not entitled to later keys (removed, or a
        newcomer with a key from before a removal): publish the later epoch messages again under the keys they
        were sealed with, so its node learns it is out (its window and bot say so) instead of talking to nobody.
        They hold key boxes for members only, and went out under those keys already. At once, then at doubling
        intervals (5 s, 10 s, ... 10 min) per outsider."""
        if not _due(self._outsider_next, pid, now):
            return
        for mid, frame in self.membership.epoch_frames_after(epoch):
            self.host.enqueue(Outbound(frame, "repair", mid))

    def tick(self, now: int) -> None:
        """Once a second: delete the keys superseded more than the retention window ago; rotate if the profile
        asks."""
        if now - self._last_tick_ms < 1_000:
            return
        self._last_tick_ms = now
        host, m = self.host, self.membership
        if self._pending_grants and self._current(now):
            pending, self._pending_grants = self._pending_grants, {}
            for pid, held in pending.items():
                host.spawn(self._grant([pid], held), "sdschat-grant")
        gone = m.expire(now, host.config.epoch_retention_ms)
        if gone:
            last = max(e.number for e in gone)
            for mid in m.epoch_messages_upto(last):
                if host.channel is not None:  # the repair cache keeps whole frames: their key boxes too
                    host.channel.forget_cached(mid)
                m.sealed_under.pop(mid, None)
            for e in gone:
                topic = m.key_of(e).topic
                if topic not in m.topics():
                    host.unsubscribe(topic)
            frames: dict[str, str | None] = {EPOCH_FRAME_PREFIX + e.message_id: None for e in gone if e.message_id}
            host.persist(now, kv={MEMBERSHIP_KEY: m.to_json(), **frames})
            # once a deleted key's row is written, the database's log, which still held older copies, is emptied
            host.spawn(host.scrub(), "sdschat-scrub")
            host.emit(ev.MembershipChanged("expired", "", (), last))
        every = host.config.rekey_every_ms
        if (
            every > 0
            and host.config.membership
            and m.is_admin
            and not self.removed_me
            and now - m.current.started_ms >= every
            and not host.has_task("sdschat-rekey")
        ):
            host.spawn(self.rekey(), "sdschat-rekey")


def _due(table: dict[str, tuple[int, int]], pid: str, now: int) -> bool:
    """Whether ``pid``'s turn has come in ``table`` (participant -> (when next, the interval after that)): at once
    the first time, then at doubling intervals from :data:`STRAGGLER_EVERY_MS` to :data:`OUTSIDER_MAX_EVERY_MS`; the
    table keeps its newest 1,000 participants."""
    due, every = table.get(pid, (now, STRAGGLER_EVERY_MS))
    if now < due:
        return False
    if len(table) >= 1_000 and pid not in table:
        table.pop(next(iter(table)))
    table[pid] = (now + every, min(2 * every, OUTSIDER_MAX_EVERY_MS))
    return True
