"""A node's side of membership: announcing itself, applying membership messages, changing keys.

The rules live in :mod:`.membership` (no I/O); this collaborator of :class:`~sdschat.node.node.Node` runs them:
it loads and keeps the state (one ``kv`` row, written in the same transaction as the message that changed it),
says hello and joins once another member is here, hands its join to a newcomer and the later epoch messages to
a member still on an older key, grants the current key to a late joiner (admins), starts epochs for
``/kick`` and ``/rekey``, deletes superseded keys after the retention window and rotates on the profile's
schedule.
"""

from __future__ import annotations

import base64
import logging

from ..crypto.epochs import exchange_public
from ..store import StoreError
from . import events as ev
from .membership import ControlError, EpochApplied, Membership, parse_control
from .payload import AppPayload

__all__ = ["Roster", "MEMBERSHIP_KEY", "JOIN_FRAME_KEY", "STRAGGLER_EVERY_MS"]

log = logging.getLogger("sdschat.node")

#: kv key: the channel's members, admins and kept epoch keys (sdschat.node.membership), as JSON
MEMBERSHIP_KEY = "membership"
#: kv key: our join's SDS frame (to hand to a member who arrives after it was published)
JOIN_FRAME_KEY = "join_frame"
#: a member seen still on an older key gets the later epoch messages again at most this often (a newcomer our
#: join at most five times as often)
STRAGGLER_EVERY_MS = 5_000


class Roster:
    def __init__(self, node) -> None:
        self.node = node
        self.state: Membership | None = None
        #: SDS frames of epoch messages seen, by message id (kept with their epoch, to hand to stragglers)
        self.epoch_frames: dict[str, bytes] = {}
        #: membership messages refused while they waited for their causal dependencies: tried again when the
        #: engine delivers them (the admin message that makes their author an admin may be one of those)
        self.deferred: set[str] = set()
        #: admin messages applied here: (the epoch current then, SDS frame), to hand a member still on that key
        #: (an epoch message of a new admin is refused by whoever lacks the message that named it)
        self.admin_frames: dict[str, tuple[int, bytes]] = {}
        self._straggler_sent: dict[int, int] = {}
        #: our join (message id, SDS frame), once sent; when we last handed it to a newcomer
        self._join_frame: tuple[str, bytes] | None = None
        self._greeted_ms = -STRAGGLER_EVERY_MS
        self._last_tick_ms = 0

    async def load(self) -> Membership:
        """The state from the database (a new one: the configured admins, the invite's epoch and removed)."""
        node, cfg = self.node, self.node.config
        state = self.state = Membership(node.identity.participant_id, node.key, cfg.admins)
        raw = await node.store.kv_get(MEMBERSHIP_KEY)
        if raw is not None:
            try:
                state.load_json(raw)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise StoreError(f"database {cfg.db_path}: the membership state is damaged ({exc})") from None
        else:
            state.current.started_ms = node.now()  # the first key's age counts from here (rekey_days)
        for pid in cfg.removed:
            state.removed.setdefault(pid, 0)
        adopted = cfg.epoch is not None and state.adopt(cfg.epoch[0], cfg.epoch[1], node.now())
        if raw is None or adopted:
            await node.store.kv_set(MEMBERSHIP_KEY, state.to_json())
        join = await node.store.kv_get(JOIN_FRAME_KEY)
        if join is not None and ":" in join:
            mid, _, frame = join.partition(":")
            self._join_frame = (mid, base64.b64decode(frame))
        return state

    @property
    def removed_me(self) -> bool:
        """Whether an admin removed us from the channel."""
        return self.state is not None and self.state.me in self.state.removed

    # ------------------------------------------------------------ joining

    def started(self) -> None:
        """The node is up: a member not yet announced says hello (an ephemeral frame, acknowledged by nobody):
        whoever is here answers with its join, and ours follows once we see another member."""
        node = self.node
        if node.config.membership and not self.state.joined and not self.removed_me:
            app = AppPayload.new("hello", node.nick, "", node.now())
            out = node.channel.send_ephemeral(app.encode(), node.now(), sign=node.sign)
            node.outbox.put_nowait((out.data, "ephemeral", None))

    def want_join(self) -> None:
        """Another member is here: announce ourselves (once per channel) if we have not yet. A member alone in a
        channel announces nothing (nobody could acknowledge it); its first message or the first frame of another
        member brings the join."""
        node = self.node
        if (node.config.membership and not self.state.joined and not self.removed_me and not node.stopping
                and not node.has_task("sdschat-join")):
            node.spawn(self.join(), "sdschat-join")

    async def join(self) -> None:
        if not self.state.joined:
            self.state.joined = True  # (set again when our join is applied: one join, even if two ask)
            await self.node.send_control("join", {"x": exchange_public(self.node.identity).hex()})

    def greet(self, pid: str, now: int) -> None:
        """A member we have no join of said hello: hand it ours now (it may have been published before that
        member listened), rather than leave it to a repair seconds later. Rate-limited."""
        if (self._join_frame is None or pid in self.state.members or pid == self.state.me
                or now - self._greeted_ms < STRAGGLER_EVERY_MS // 5):
            return
        self._greeted_ms = now
        mid, frame = self._join_frame
        self.node.outbox.put_nowait((frame, "repair", mid))

    # ------------------------------------------------------------ applying

    def sent(self, kind: str, mid: str, app: AppPayload, now: int, frame: bytes) -> dict | None:
        """Our own membership message, just written to the log: applied here; the kv rows to persist with it."""
        kv = self.apply(mid, self.state.me, app, now, frame)
        if kind == "join":
            self._join_frame = (mid, frame)
            kv = {**(kv or {}), JOIN_FRAME_KEY: f"{mid}:{base64.b64encode(frame).decode('ascii')}"}
        return kv

    def apply(self, mid: str, sender: str, app: AppPayload, now: int, frame: bytes | None = None,
              via_epoch: int | None = None, waiting: bool = False) -> dict | None:
        """Apply a membership message (ours or delivered; ``via_epoch``: the key epoch of the envelope it came
        in) here; returns the kv row to persist with it (None if it changed nothing). A message that breaks the
        rules (not an admin, damaged data) is refused and counted; one that still ``waiting`` for its causal
        dependencies is only put off (:attr:`deferred`), to be applied again when it is delivered."""
        node, m = self.node, self.state
        frame = frame if frame is not None else self.epoch_frames.get(mid, b"")
        try:
            data = parse_control(app.kind, app.data)
            if app.kind == "join":
                if not m.apply_join(sender, data["x"]):
                    node.receiver.reject("removed", f"join of removed member {sender[:8]} ignored", now)
                    return None
                node.emit(ev.MembershipChanged("join", sender, ()))
                if m.needs_grant(sender) and (via_epoch is None or via_epoch < m.current.number):
                    # (a join sealed under the current key shows its author has that key: nothing to give)
                    node.spawn(self._grant([sender]), "sdschat-grant")
            elif app.kind == "admin":
                added = m.apply_admin(sender, data["add"])
                frame = self.epoch_frames.pop(mid, None) or frame
                if frame:
                    self.admin_frames[mid] = (m.current.number, frame)
                node.emit(ev.MembershipChanged("admin", sender, tuple(added)))
            else:
                self._epoch_applied(m.apply_epoch(sender, mid, data, node.identity, now, frame), mid)
        except ControlError as exc:
            if waiting:
                self.deferred.add(mid)
                return None
            node.receiver.reject("bad_control", f"{app.kind} from {sender[:8]}: {exc}", now)
            return None
        return {MEMBERSHIP_KEY: m.to_json()}

    def _epoch_applied(self, out: EpochApplied, mid: str) -> None:
        node = self.node
        self.epoch_frames.pop(mid, None)
        if out.switched and node.transport is not None:
            node.spawn(self._subscribe(self.state.send_key.topic), "sdschat-subscribe")
            node.store_client.start_catch_up()  # what was sent under the new key before we had it
        if out.removed_me:
            node.emit(ev.MembershipChanged("removed", out.author, out.removed, out.number))
        elif not out.grant:
            node.emit(ev.MembershipChanged("epoch", out.author, out.removed, out.number, out.mine))
        if out.redo and self.state.is_admin:
            node.spawn(self.rekey(remove=out.redo), "sdschat-rekey")

    async def _subscribe(self, topic: str) -> None:
        await self.node.transport.subscribe(topic)

    async def _grant(self, pids) -> None:
        if self.node.stopping or self.removed_me:
            return
        await self.node.send_control("epoch", self.state.grant_data(self.node.identity, pids))

    # ------------------------------------------------------------ admins' commands

    def member_of(self, name: str) -> str:
        """The participant id of the member called ``name`` (a nick, or the start of an id); ValueError (one line)
        if none or several."""
        want = name.strip().lstrip("@")
        names, me = self.node.names(), self.state.me
        found = [p for p in self.state.members if p != me and names.get(p) == want]
        if not found:
            found = [p for p in self.state.members if p != me and len(want) >= 4 and p.startswith(want.lower())]
        if not found:
            known = sorted(names.get(p) or p[:8] for p in self.state.others())
            raise ValueError(f"no member called {want!r} here (members: {', '.join(known) or 'none yet'})")
        if len(found) > 1:
            raise ValueError(f"{len(found)} members are called {want!r}: give the start of an id "
                             f"({', '.join(p[:8] for p in found)})")
        return found[0]

    def check_admin(self) -> None:
        """ValueError (one line) unless we are an admin of the channel (and still a member)."""
        name = self.node.key.channel_name
        if self.removed_me:
            raise ValueError(f"you were removed from #{name}")
        if not self.state.is_admin:
            names = self.node.names()
            admins = sorted(names.get(p) or p[:8] for p in self.state.admins)
            raise ValueError(f"only an admin of #{name} can do that "
                             f"(admins: {', '.join(admins) or 'none: a channel joined without an invite'})")

    async def kick(self, name: str) -> tuple[str, int, int]:
        await self._ready()
        self.check_admin()
        pid = self.member_of(name)
        if pid in self.state.removed:
            raise ValueError(f"{name} was already removed")
        n, count = await self.rekey(remove=(pid,))
        return pid, n, count

    async def rekey(self, remove=()) -> tuple[int, int]:
        await self._ready()
        self.check_admin()
        data = self.state.new_epoch(self.node.identity, remove)
        await self.node.send_control("epoch", data)
        return data["epoch"], len(data["keys"])

    async def name_admin(self, name: str) -> str:
        await self._ready()
        self.check_admin()
        pid = self.member_of(name)
        await self.node.send_control("admin", {"add": [pid]})
        return pid

    async def _ready(self) -> None:
        if self.node.channel is None:
            await self.node.wait_ready()

    # ------------------------------------------------------------ keys over time

    def help_straggler(self, epoch: int, now: int) -> None:
        """A member's frame came under an older key: publish the later epoch messages again under the keys they
        were sealed with (rate-limited), so it switches even with no store node; and the admin messages since, under
        its key (it needs them to accept an epoch message of an admin it has not heard named)."""
        if now - self._straggler_sent.get(epoch, -STRAGGLER_EVERY_MS) < STRAGGLER_EVERY_MS:
            return
        self._straggler_sent[epoch] = now
        for mid, frame in self.state.epoch_frames_after(epoch):
            self.node.outbox.put_nowait((frame, "repair", mid))
        key = next((self.state.key_of(e) for e in self.state.epochs if e.number == epoch), None)
        if key is None:
            return  # its key is no longer kept here: nothing of ours it could open
        for mid, (number, frame) in self.admin_frames.items():
            if number >= epoch:  # named since: under the straggler's own key, which it opens
                self.node.outbox.put_nowait((frame, "repair", mid, [key]))

    def tick(self, now: int) -> None:
        """Once a second: delete the keys superseded more than the retention window ago; rotate if the profile
        asks."""
        if now - self._last_tick_ms < 1_000:
            return
        self._last_tick_ms = now
        node, m = self.node, self.state
        gone = m.expire(now, node.config.epoch_retention_ms)
        if gone:
            last = max(e.number for e in gone)
            for mid in m.epoch_messages_upto(last):
                node.channel.forget_cached(mid)  # the repair cache keeps whole frames: their key boxes too
                m.sealed_under.pop(mid, None)
            for e in gone:
                topic = m.key_of(e).topic
                if node.transport is not None and topic not in m.topics():
                    node.transport.unsubscribe(topic)
            node.persist(now, kv={MEMBERSHIP_KEY: m.to_json()})
            node.spawn(self._scrub(), "sdschat-scrub")
            node.emit(ev.MembershipChanged("expired", "", (), last))
        every = node.config.rekey_every_ms
        if (every > 0 and node.config.membership and m.is_admin and not self.removed_me
                and now - m.current.started_ms >= every and not node.has_task("sdschat-rekey")):
            node.spawn(self.rekey(), "sdschat-rekey")

    async def _scrub(self) -> None:
        """Once a deleted key's row is written, empty the database's log, which still held older copies."""
        await self.node.writer.flush()
        await self.node.store.scrub()
