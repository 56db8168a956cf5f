"""A model-based membership test: seeded random schedules over real nodes, and four invariants checked after each.

A schedule (:func:`make_schedule`, from a seed alone) starts 3-5 members of one channel (the first, ``m0``, made
it: the admin named in every invite) and plays 10-25 steps, each followed by a short pause:

- ``say``: a member writes a line (now and then a burst of 12-20, longer than the causal history). A removed
  member writes too: its node is told it is still a member for that one send (as a removed member who keeps
  every key it had and runs modified software would);
- ``offline`` / ``online``: the member's link is cut / back (the node keeps running: its sends queue);
- ``stop`` / ``start``: the node is stopped; a new :class:`~sdschat.node.Node` is started on the same database,
  as the CLI starts it again (the invite's admins and removed members, the invite's key no longer: adopted);
- ``restart``: ``stop`` then ``start`` at once;
- ``kick`` / ``rekey`` / ``admin``: an admin (one whose own node says so, online and on the newest key) runs
  ``/kick``, ``/rekey``, ``/admin`` (:meth:`Node.kick`, :meth:`Node.rekey`, :meth:`Node.name_admin`);
- ``invite``: a member (removed ones included) makes an invite from its state: a running node's as the
  channel window does (its current key, admins, removed members), a stopped one's from its database as
  ``sdschat invite`` does (:meth:`Membership.read_keys`). What an invite made from a removed member's files
  would carry: nothing stops a removed member from writing that token by hand;
- ``join``: a new identity (new database) joins with one of the invites made so far, as ``sdschat join`` and
  the first start after it configure its node (``admins``, ``epoch``, ``removed`` from the token);
- ``store``: a store node (:class:`~sdschat.storenode.StoreNode`, its own database, kept across) on or off.

:func:`run_schedule` plays one on a broker, then brings every node up and online, gives the honest members up
to ``converge_s`` seconds to converge (polling), watches resends for ``watch_s`` more seconds, stops everything and
checks, from each node's database and its last state:

1. ``epoch_confidentiality`` -- nobody holds a line written in a key epoch it was not a member of: a member
   removed by the epoch-``k`` kick holds no line written under an epoch ``>= k``; a newcomer refused (it joined
   with a key from before the newest kick at the time: :attr:`Peer.refused`) holds no line written under an
   epoch later than its invite's. A line's epoch is its author's current epoch when it wrote it (a member who
   has not learned of a kick writes under the older key, which the removed member holds: not counted);
2. ``convergence`` -- every honest member ends on the same, newest key epoch (its database's state), and holds,
   delivered, every honest line of the epochs since it joined (for the first members: every honest line; a line
   of a member removed later, written before its removal, once any honest member holds it: one that reached
   nobody before the kick can only arrive published by a removed member, and is rightly refused);
3. ``non_member_refused`` -- no honest member holds a line of a removed member written once every honest
   member knew of the removal, nor a line of a refused newcomer written once every honest member knew of the kick
   that made its key stale. (Lines written before that, while some member had not learned, may be taken in by
   that member: SECURITY.md, "a removal takes effect as members learn of it"; counted in ``info``, not a break);
4. ``resends_stop`` -- after convergence, no honest member has a message in its outgoing buffer that it keeps
   resending (its buffer is empty, or its resend counter does not grow over the watch window).

Honest members: those never removed and not refused. The harness drives only public node APIs; it touches a
node's state in one place, the removed member's forced ``say`` above.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import sqlite3
import time
from pathlib import Path

from sdschat.crypto import ChannelKey, Identity
from sdschat.node import MEMBERSHIP_KEY, Node, NodeConfig, node_channel_config
from sdschat.node.membership import Membership
from sdschat.storenode import StoreNode

__all__ = ["FEATURES", "INVARIANTS", "Schedule", "ScheduleResult", "Step", "make_schedule", "run", "run_schedule"]

INVARIANTS = ("epoch_confidentiality", "convergence", "non_member_refused", "resends_stop")
#: what a schedule exercised (ScheduleResult.features), to choose seeds that cover them
FEATURES = (
    "kick_with_member_offline",
    "kick_with_member_stopped",
    "restart",
    "removed_member_invite_used",
    "stale_invite_used",
    "legit_late_joiner",
    "store_on_off",
    "admin_named_acted",
    "rekey",
    "removed_member_wrote",
)

#: protocol timers scaled down (tests/support/node_helpers.FAST, resends capped at 3 s: a message resent
#: forever shows in a watch window of a few seconds)
TUNE = {
    "resend_unacknowledged_ms": 500,
    "resend_possibly_acknowledged_ms": 1500,
    "resend_max_interval_ms": 3_000,
    "sync_interval_ms": 2_000,
    "sync_jitter_ms": 500,
    "repair_t_min_ms": 300,
    "repair_t_max_ms": 1500,
}

log = logging.getLogger("sdschat.tests.membership_model")


# ------------------------------------------------------------------------------------------------ schedules


@dataclasses.dataclass(frozen=True)
class Step:
    kind: str
    #: who acts (a peer's name); for ``join`` the newcomer's name; for ``store`` "on"/"off"
    actor: str = ""
    #: whom it is about (``kick``/``admin``: the target; ``join``: the invite's index)
    target: str = ""
    #: pause after the step, seconds
    pause: float = 0.3

    def __str__(self) -> str:
        return " ".join(x for x in (self.kind, self.actor, self.target) if x)


@dataclasses.dataclass(frozen=True)
class Schedule:
    seed: int
    members: int
    store: bool
    steps: tuple[Step, ...]

    def __str__(self) -> str:
        return f"seed {self.seed}: {self.members} members, store {'on' if self.store else 'off'}: " + "; ".join(
            map(str, self.steps)
        )


def make_schedule(seed: int, *, min_steps: int = 10, max_steps: int = 25) -> Schedule:
    """A schedule from ``seed`` alone (the same seed, the same schedule). The generator keeps a rough model
    (who is removed, running, online, an admin) to choose plausible steps; at run time a step whose actor cannot
    do it (an admin's node that does not know the target yet, say) is skipped and recorded."""
    rng = random.Random(seed)
    n = rng.randint(3, 5)
    names = [f"m{i}" for i in range(n)]
    st = {p: {"removed": False, "running": True, "online": True, "admin": p == "m0"} for p in names}
    store = first_store = rng.random() < 0.5
    invites = 1  # invite 0: the creator's first one, made before anyone joined
    newcomers = kicks = admins_named = 0
    steps: list[Step] = []
    total = rng.randint(min_steps, max_steps)
    removed_pending: list[str] = []  # removed members whose invite the schedule has not used yet

    def honest(p):
        return not st[p]["removed"]

    while len(steps) < total:
        running = [p for p in st if st[p]["running"]]
        honest_now = [p for p in st if honest(p)]
        options: list[tuple[float, Step]] = []
        for p in running:
            # mostly one line; now and then a burst longer than the causal history (10), so that the first lines of
            # it are acknowledged only by the others' bloom filters
            count = "1" if rng.random() < 0.8 or not honest(p) else str(rng.randint(12, 20))
            options.append((4.0 / len(running) if honest(p) else 1.2, Step("say", p, count)))
        online = [p for p in running if st[p]["online"]]
        offline = [p for p in running if not st[p]["online"]]
        stopped = [p for p in st if not st[p]["running"]]
        if online:
            options.append((1.4, Step("offline", rng.choice(online))))
        if offline:
            options.append((2.0, Step("online", rng.choice(offline))))
        if len(running) > 2:
            options.append((0.9, Step("stop", rng.choice(running))))
        if stopped:
            options.append((2.0, Step("start", rng.choice(stopped))))
        if running:
            options.append((1.0, Step("restart", rng.choice(running))))
        admins = [p for p in online if st[p]["admin"] and honest(p)]
        targets = [p for p in honest_now if not st[p]["admin"]]
        if admins and targets and kicks < 2 and len(honest_now) > 2:
            options.append((1.6, Step("kick", rng.choice(admins), rng.choice(targets))))
        if admins:
            options.append((0.6, Step("rekey", rng.choice(admins))))
            if targets and admins_named < 2:
                options.append((0.6, Step("admin", rng.choice(admins), rng.choice(targets))))
        options.append((1.0, Step("invite", rng.choice(list(st)))))
        if removed_pending:
            options.append((2.5, Step("invite", removed_pending[0])))
        if newcomers < 2:
            options.append((1.2, Step("join", f"n{newcomers}", str(rng.randrange(invites)))))
        options.append((0.7, Step("store", "off" if store else "on")))
        weights = [w for w, _ in options]
        step = rng.choices([s for _, s in options], weights)[0]
        step = dataclasses.replace(step, pause=round(rng.uniform(0.2, 0.8), 2))
        # the rough model follows
        a = step.actor
        if step.kind == "offline":
            st[a]["online"] = False
        elif step.kind == "online":
            st[a]["online"] = True
        elif step.kind == "stop":
            st[a]["running"] = False
        elif step.kind in ("start", "restart"):
            st[a].update(running=True, online=True)
        elif step.kind == "kick":
            st[step.target]["removed"] = True
            removed_pending.append(step.target)
            kicks += 1
        elif step.kind == "admin":
            st[step.target]["admin"] = True
            admins_named += 1
        elif step.kind == "invite":
            if a in removed_pending:
                removed_pending.remove(a)
                steps.append(step)
                # its invite is used (soon): a newcomer joins with it
                if newcomers < 2 and len(steps) < total:
                    step = Step("join", f"n{newcomers}", str(invites), round(rng.uniform(0.2, 0.8), 2))
                    invites += 1
                    newcomers += 1
                    st[step.actor] = {"removed": False, "running": True, "online": True, "admin": False}
                    steps.append(step)
                    continue
                invites += 1
                continue
            invites += 1
        elif step.kind == "join":
            newcomers += 1
            # (its status, refused or admitted, depends on the invite: decided at run time)
            st[a] = {"removed": False, "running": True, "online": True, "admin": False}
        elif step.kind == "store":
            store = step.actor == "on"
        steps.append(step)
    return Schedule(seed, n, first_store, tuple(steps))


# ------------------------------------------------------------------------------------------------ run state


@dataclasses.dataclass
class Invite:
    maker: str
    at: float
    admins: tuple[str, ...]
    epoch: tuple[int, bytes] | None
    removed: tuple[str, ...]
    maker_removed: bool

    @property
    def number(self) -> int:
        return self.epoch[0] if self.epoch else 0


@dataclasses.dataclass
class Peer:
    name: str
    identity: Identity
    db: Path
    admins: tuple[str, ...]
    epoch: tuple[int, bytes] | None
    removed_at_join: tuple[str, ...]
    node: Node | None = None
    running: bool = False
    online: bool = True
    joined_at: float = 0.0
    #: the newest epoch issued when it joined (a newcomer's lines-to-hold start there)
    join_epoch: int = 0
    #: removed: by the kick starting epoch ``removed_epoch`` at ``removed_at``; when every honest member knew
    removed_epoch: int | None = None
    removed_at: float | None = None
    all_knew_at: float | None = None
    #: a newcomer whose invite's key predates the newest kick when it joined: (invite epoch, that kick's epoch)
    refused: tuple[int, int] | None = None
    invite: Invite | None = None

    @property
    def pid(self) -> str:
        return self.identity.participant_id

    @property
    def honest(self) -> bool:
        return self.removed_epoch is None and self.refused is None


@dataclasses.dataclass
class Line:
    mid: str
    author: str
    #: the author's current key epoch when it wrote it
    epoch: int
    at: float
    #: the author was an honest member then (not removed, not refused)
    honest: bool
    #: a removed member writing with its node told it is still a member
    forced: bool = False


@dataclasses.dataclass
class Kick:
    epoch: int
    at: float
    target: str
    #: when every honest member's state held the target as removed
    all_knew_at: float | None = None


@dataclasses.dataclass
class ScheduleResult:
    seed: int
    schedule: Schedule
    #: invariant -> what broke it (one line each; empty: held)
    violations: dict[str, list[str]]
    #: invariant -> how many (reader, line) or (member, property) pairs were checked
    checked: dict[str, int]
    #: steps as run ("skipped: ..." for those that could not be), counts, timings
    log: list[str]
    info: dict
    features: set[str]
    seconds: float
    #: harness or node errors (an exception out of a node call): a schedule with errors proves nothing
    errors: list[str]

    @property
    def broken(self) -> list[str]:
        return [k for k in INVARIANTS if self.violations.get(k)]

    def counts(self) -> dict[str, tuple[int, int]]:
        """invariant -> (violations, checks)."""
        return {k: (len(self.violations.get(k, [])), self.checked.get(k, 0)) for k in INVARIANTS}

    def summary(self) -> str:
        parts = [f"{k} {'BROKEN x' + str(v) if v else 'held'} ({c} checks)" for k, (v, c) in self.counts().items()]
        return f"seed {self.seed} ({self.seconds:.1f} s): " + ", ".join(parts)


# ------------------------------------------------------------------------------------------------ the runner


class Runner:
    def __init__(self, schedule: Schedule, url: str, workdir: Path, *, converge_s: float, watch_s: float) -> None:
        self.schedule = schedule
        self.url = url
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.converge_s = converge_s
        self.watch_s = watch_s
        self.rng = random.Random(schedule.seed * 7919 + 1)
        self.key = ChannelKey.generate(f"model-{schedule.seed}")
        self.peers: dict[str, Peer] = {}
        self.lines: list[Line] = []
        self.kicks: list[Kick] = []
        self.invites: list[Invite] = []
        self.issued = 0  # the newest epoch number issued
        self.store: StoreNode | None = None
        self.log: list[str] = []
        self.errors: list[str] = []
        self.features: set[str] = set()
        self.info: dict = {
            "lines": 0,
            "forced_lines": 0,
            "skipped": 0,
            "kicks": 0,
            "rekeys": 0,
            "admins": 0,
            "joins_admitted": 0,
            "joins_refused": 0,
            "restarts": 0,
            "store_toggles": 0,
        }
        self.t0 = time.monotonic()
        self._counter = 0

    def now(self) -> float:
        return time.monotonic() - self.t0

    def note(self, text: str) -> None:
        self.log.append(f"{self.now():6.2f} {text}")

    # ------------------------------------------------------------ nodes

    def _config(self, p: Peer, *, first: bool) -> NodeConfig:
        return NodeConfig(
            p.name,
            self.key,
            p.db,
            self.url,
            channel_config=node_channel_config(**TUNE),
            seed=self.schedule.seed,
            identity=p.identity,
            membership=True,
            admins=p.admins,
            epoch=p.epoch if first else None,
            removed=p.removed_at_join,
        )

    async def _start(self, p: Peer, *, first: bool = False) -> None:
        p.node = await Node.start(self._config(p, first=first))
        p.running, p.online = True, True

    async def _stop(self, p: Peer) -> None:
        if p.node is not None and p.running:
            await p.node.stop()
        p.running = False

    def honest(self) -> list[Peer]:
        return [p for p in self.peers.values() if p.honest]

    def watch(self) -> None:
        """When every honest member's state (a stopped one's: its last) holds each removed member as removed."""
        honest = self.honest()
        for k in self.kicks:
            if k.all_knew_at is None and all(
                p.node is not None and self.peers[k.target].pid in p.node.membership.removed for p in honest
            ):
                k.all_knew_at = self.now()
                self.peers[k.target].all_knew_at = k.all_knew_at
                self.note(f"every honest member knows {k.target} was removed")

    async def _watcher(self) -> None:
        while True:
            self.watch()
            await asyncio.sleep(0.1)

    async def _until(self, cond, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return True
            await asyncio.sleep(0.05)
        return cond()

    # ------------------------------------------------------------ the run

    async def run(self) -> ScheduleResult:
        sched = self.schedule
        creator = Identity.generate()
        first = Invite("m0", 0.0, (creator.participant_id,), None, (), False)
        self.invites.append(first)
        for i in range(sched.members):
            name = f"m{i}"
            self.peers[name] = Peer(
                name, creator if i == 0 else Identity.generate(), self.workdir / f"{name}.db", first.admins, None, ()
            )
        watcher = asyncio.ensure_future(self._watcher())
        try:
            if sched.store:
                self.store = await StoreNode.start(self.url, self.workdir / "store.db")
            for p in self.peers.values():
                await self._start(p, first=True)
            everyone = list(self.peers.values())
            ok = await self._until(
                lambda: all(q.pid in p.node.membership.members for p in everyone for q in everyone), 20.0
            )
            self.note(f"{len(everyone)} members up, joins {'seen by all' if ok else 'NOT all seen after 20 s'}")
            for step in sched.steps:
                try:
                    await self.play(step)
                except Exception as exc:  # noqa: BLE001 - a node call failing is news: recorded, the schedule goes on
                    self.errors.append(f"{step}: {type(exc).__name__}: {exc}")
                    self.note(f"ERROR {step}: {type(exc).__name__}: {exc}")
                await asyncio.sleep(step.pause)
            await self.settle()
        finally:
            watcher.cancel()
            for p in self.peers.values():
                try:
                    await self._stop(p)
                except Exception as exc:  # noqa: BLE001 - recorded, the others still stop
                    self.errors.append(f"stop {p.name}: {type(exc).__name__}: {exc}")
            if self.store is not None:
                await self.store.stop()
        return self.check()

    async def play(self, step: Step) -> None:
        kind, p = step.kind, self.peers.get(step.actor)
        if p is None and kind not in ("join", "store"):
            return self.skip(step, "no such member (its join was skipped)")
        if kind == "say":
            for _ in range(int(step.target or 1)):
                await self.say(p)
        elif kind == "offline":
            if not p.running:
                return self.skip(step, "not running")
            p.node.set_impairment(offline=True)
            p.online = False
            self.note(f"{p.name} offline")
        elif kind == "online":
            if not p.running:
                return self.skip(step, "not running")
            p.node.set_impairment(offline=False)
            p.online = True
            self.note(f"{p.name} online")
        elif kind == "stop":
            if not p.running:
                return self.skip(step, "not running")
            await self._stop(p)
            self.note(f"{p.name} stopped")
        elif kind == "start":
            if p.running:
                return self.skip(step, "running")
            await self._start(p)
            self.info["restarts"] += 1
            self.features.add("restart")
            self.note(f"{p.name} started on its database")
        elif kind == "restart":
            await self._stop(p)
            await self._start(p)
            self.info["restarts"] += 1
            self.features.add("restart")
            self.note(f"{p.name} restarted")
        elif kind in ("kick", "rekey", "admin"):
            await self.admin_step(step)
        elif kind == "invite":
            self.make_invite(p)
        elif kind == "join":
            await self.join(step.actor, int(step.target))
        elif kind == "store":
            await self.toggle_store(step.actor == "on")
        else:
            raise ValueError(f"unknown step {kind}")

    def skip(self, step: Step, why: str) -> None:
        self.info["skipped"] += 1
        self.note(f"skipped: {step} ({why})")

    async def say(self, p: Peer) -> None:
        if not p.running:
            return self.skip(Step("say", p.name), "not running")
        number = self._counter
        self._counter += 1
        epoch = p.node.membership.current.number
        text = f"{p.name} line {number} (epoch {epoch})"
        forced = False
        if p.honest and p.node.removed_me:
            self.info.setdefault("removed_without_kick", []).append(p.name)
            return self.skip(Step("say", p.name), "its node says it was removed, yet no kick named it")
        if p.removed_epoch is not None:
            m = p.node.membership
            saved = m.removed.pop(p.pid, None)
            forced = True
            try:
                mid = await p.node.send_text(text)
            finally:
                if saved is not None:
                    m.removed[p.pid] = saved
            self.info["forced_lines"] += 1
            self.features.add("removed_member_wrote")
        else:
            try:
                mid = await p.node.send_text(text)
            except ValueError as exc:  # its node refuses (it learnt something the model has not: say so)
                return self.skip(Step("say", p.name), str(exc))
        self.lines.append(Line(mid, p.name, epoch, self.now(), p.honest, forced))
        self.info["lines"] += 1
        self.note(
            f"{p.name} says line {number} under epoch {epoch}{' (removed, forced)' if forced else ''}"
            f"{'' if p.online else ' while offline'}"
        )

    def _able_admins(self) -> list[Peer]:
        """Admins whose node can act now: running, online, an admin in its own state, on the newest key."""
        out = []
        for p in self.peers.values():
            m = p.node.membership if p.node is not None else None
            if (
                p.honest
                and p.running
                and p.online
                and m is not None
                and m.is_admin
                and not p.node.removed_me
                and m.current.number == self.issued
            ):
                out.append(p)
        return out

    async def admin_step(self, step: Step) -> None:
        able = self._able_admins()
        if not able:
            return self.skip(step, "no admin able to act (running, online, on the newest key)")
        actor = self.peers[step.actor] if self.peers[step.actor] in able else self.rng.choice(able)
        if step.kind == "rekey":
            n, count = await actor.node.rekey()
            self.issued = max(self.issued, n)
            self.info["rekeys"] += 1
            self.features.add("rekey")
            if actor.name != "m0":
                self.features.add("admin_named_acted")
            self.note(f"{actor.name} rekeys: epoch {n} for {count}")
            return
        target = self.peers.get(step.target)
        if target is None or not target.honest or target is actor:
            return self.skip(step, "target not an honest member")
        if step.kind == "admin":
            if target.pid in actor.node.membership.admins:
                return self.skip(step, "already an admin")
            try:
                await actor.node.name_admin(target.pid[:16])
            except ValueError as exc:
                return self.skip(step, str(exc))
            self.info["admins"] += 1
            self.note(f"{actor.name} names {target.name} admin")
            return
        if target.pid in actor.node.membership.admins:
            return self.skip(step, "the target is an admin (the model removes members only)")
        honest_after = [p for p in self.honest() if p is not target]
        if len(honest_after) < 2:
            return self.skip(step, "would leave fewer than two honest members")

        # a kick by an admin that has not seen a newcomer's join yet would leave that newcomer out of the new key,
        # and its join then arrives under a key from before the kick: indistinguishable from a stale invite's. The
        # model's kicks wait (bounded) for an admin that knows every honest member.
        def knows_all(a: Peer) -> bool:
            return all(p.pid in a.node.membership.members for p in self.honest() if p is not a)

        if not knows_all(actor):
            await self._until(lambda: any(knows_all(a) for a in self._able_admins()), 5.0)
            able = [a for a in self._able_admins() if knows_all(a)]
            if not able:
                return self.skip(step, "no admin able to act has seen every member's join")
            actor = self.peers[step.actor] if self.peers[step.actor] in able else self.rng.choice(able)
            if actor is target:
                return self.skip(step, "the only able admin is the target")
        try:
            pid, n, count = await actor.node.kick(target.pid[:16])
        except ValueError as exc:
            return self.skip(step, str(exc))
        assert pid == target.pid
        self.issued = max(self.issued, n)
        target.removed_epoch, target.removed_at = n, self.now()
        self.kicks.append(Kick(n, target.removed_at, target.name))
        self.info["kicks"] += 1
        if actor.name != "m0":
            self.features.add("admin_named_acted")
        others = [
            p
            for p in self.peers.values()
            if p is not actor and p.refused is None and (p.removed_epoch is None or p is target)
        ]
        away = [p.name for p in others if not p.running or not p.online]
        if any(not p.online and p.running for p in others):
            self.features.add("kick_with_member_offline")
        if any(not p.running for p in others):
            self.features.add("kick_with_member_stopped")
        self.note(
            f"{actor.name} kicks {target.name}: epoch {n} for {count}"
            f"{' (away: ' + ', '.join(away) + ')' if away else ''}"
        )

    def make_invite(self, p: Peer) -> None:
        """An invite from ``p``'s state: a running node's as the window makes it, a stopped one's database as
        ``sdschat invite`` reads it."""
        if p.refused is not None:
            return self.skip(Step("invite", p.name), "a refused newcomer")
        if p.running:
            m = p.node.membership
            cur = m.current
            epoch = (cur.number, cur.secret) if cur.number > 0 else None
            admins, removed, how = tuple(sorted(m.admins)), tuple(sorted(m.removed)), "from its node"
        else:
            with sqlite3.connect(f"file:{p.db}?mode=ro", uri=True) as conn:
                raw = conn.execute("SELECT value FROM kv WHERE key = ?", (MEMBERSHIP_KEY,)).fetchone()[0]
            admins_s, epoch, removed_s = Membership.read_keys(raw)
            admins, removed, how = tuple(sorted(admins_s)), tuple(sorted(removed_s)), "from its database"
            if epoch is not None and epoch[0] == 0:
                epoch = None
        inv = Invite(p.name, self.now(), admins or p.admins, epoch, removed, p.removed_epoch is not None)
        self.invites.append(inv)
        self.note(
            f"{p.name} makes invite {len(self.invites) - 1} {how}: epoch {inv.number}"
            f"{' (removed member)' if inv.maker_removed else ''}"
        )

    async def join(self, name: str, index: int) -> None:
        if index >= len(self.invites):
            return self.skip(Step("join", name, str(index)), "no such invite")
        inv = self.invites[index]
        stale = [k for k in self.kicks if k.epoch > inv.number]
        peer = Peer(
            name, Identity.generate(), self.workdir / f"{name}.db", inv.admins, inv.epoch, inv.removed, invite=inv
        )
        if stale:
            cut = max(stale, key=lambda k: k.epoch)
            peer.refused = (inv.number, cut.epoch)
            # (the kick first reaches the members online: a join racing it is a removal members have not learnt)
            await self._until(
                lambda: all(
                    self.peers[cut.target].pid in p.node.membership.removed
                    for p in self.honest()
                    if p.running and p.online
                ),
                10.0,
            )
            self.info["joins_refused"] += 1
            self.features.add("removed_member_invite_used" if inv.maker_removed else "stale_invite_used")
        else:
            self.info["joins_admitted"] += 1
            if inv.number < self.issued:
                self.features.add("legit_late_joiner")
        peer.joined_at, peer.join_epoch = self.now(), self.issued
        self.peers[name] = peer
        await self._start(peer, first=True)
        self.note(
            f"{name} joins with invite {index} (by {inv.maker}, epoch {inv.number}): "
            + (
                f"must be refused (key before the kick of epoch {peer.refused[1]})"
                if peer.refused
                else "must be admitted"
            )
        )

    async def toggle_store(self, on: bool) -> None:
        self.info["store_toggles"] += 1
        self.features.add("store_on_off")
        if on and self.store is None:
            self.store = await StoreNode.start(self.url, self.workdir / "store.db")
        elif not on and self.store is not None:
            await self.store.stop()
            self.store = None
        self.note(f"store node {'on' if on else 'off'}")

    # ------------------------------------------------------------ settle, then check

    def _required(self, p: Peer) -> list[Line]:
        """The honest lines ``p`` must hold: those of the epochs since it joined. A line its author wrote before it
        was removed is required only once an honest member holds it: one that had reached nobody before the kick
        (written offline, say) arrives published by a removed member, which nobody can tell from a line written
        after the removal and back-dated (a removed member holds the older keys): refusing it is right."""
        held = self._held_pre_removal
        return [
            ln
            for ln in self.lines
            if ln.honest
            and ln.epoch >= p.join_epoch
            and (self.peers[ln.author].removed_epoch is None or ln.mid in held)
        ]

    @property
    def _held_pre_removal(self) -> set[str]:
        out = set()
        for ln in self.lines:
            if (
                ln.honest
                and self.peers[ln.author].removed_epoch is not None
                and any(
                    q.node is not None and q.node.channel is not None and ln.mid in q.node.channel
                    for q in self.honest()
                    if q.name != ln.author
                )
            ):
                out.add(ln.mid)
        return out

    def _converged(self) -> bool:
        honest = self.honest()
        currents = {(p.node.membership.current.number, p.node.membership.current.secret) for p in honest}
        if len(currents) != 1 or next(iter(currents))[0] < self.issued:
            return False
        for p in honest:
            ch = p.node.channel
            if ch.outgoing_ids or any(ln.mid not in ch for ln in self._required(p)):
                return False
        return True

    async def settle(self) -> None:
        for p in self.peers.values():  # everyone back: the honest to converge, the others to try their luck
            if not p.running:
                await self._start(p)
            elif not p.online:
                p.node.set_impairment(offline=False)
                p.online = True
        self.note("everyone up and online")
        t = time.monotonic()
        ok = await self._until(self._converged, self.converge_s)
        self.info["converge_s"] = round(time.monotonic() - t, 2)
        self.info["converged"] = ok
        self.note(f"{'converged' if ok else 'NOT converged'} after {self.info['converge_s']} s")
        before = {p.name: (p.node.channel.stats["resends"], list(p.node.channel.outgoing_ids)) for p in self.honest()}
        await asyncio.sleep(self.watch_s)
        self.watch()
        self.resends = {
            p.name: (
                before[p.name][0],
                p.node.channel.stats["resends"],
                before[p.name][1],
                list(p.node.channel.outgoing_ids),
            )
            for p in self.honest()
        }

    def check(self) -> ScheduleResult:
        dbs = {name: _messages(p.db) for name, p in self.peers.items()}
        states = {name: _state(p.db) for name, p in self.peers.items()}
        violations = {k: [] for k in INVARIANTS}
        checked = dict.fromkeys(INVARIANTS, 0)
        by_mid = {ln.mid: ln for ln in self.lines}
        inv1_no_line_outside_ones_epochs(self, dbs, violations, checked)
        inv2_honest_members_converge(self, dbs, states, violations, checked)
        inv3_nothing_from_non_members(self, dbs, violations, checked)
        inv4_resends_stop(self, violations, checked)
        # the documented window: lines of removed members written before every member knew, taken in by some
        window = 0
        for p in self.honest():
            for mid in dbs[p.name]:
                ln = by_mid.get(mid)
                if ln is not None and not ln.honest and ln.author != p.name and not _after_all_knew(self, ln):
                    window += 1
        self.info["window_lines_accepted"] = window
        self.info["members"] = {
            n: ("honest" if p.honest else "removed" if p.removed_epoch is not None else "refused")
            for n, p in self.peers.items()
        }
        return ScheduleResult(
            self.schedule.seed,
            self.schedule,
            violations,
            checked,
            self.log,
            self.info,
            self.features,
            self.now(),
            self.errors,
        )


# ------------------------------------------------------------------------------------------------ invariants


def _messages(db: Path) -> dict[str, str]:
    """message id -> state, of every row in a node's ``messages`` table (what it shows, waiting ones too)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return dict(conn.execute("SELECT message_id, state FROM messages"))


def _state(db: Path) -> dict:
    """The membership state a node's database holds: its current epoch (number, secret hex) and removed ids."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        row = conn.execute("SELECT value FROM kv WHERE key = ?", (MEMBERSHIP_KEY,)).fetchone()
    if row is None:
        return {"epoch": (0, ""), "removed": set()}
    _, epoch, removed = Membership.read_keys(row[0])
    return {
        "epoch": (epoch[0], epoch[1].hex()) if epoch else (0, ""),
        "removed": set(removed),
        "raw": json.loads(row[0]),
    }


def inv1_no_line_outside_ones_epochs(run: Runner, dbs, violations, checked) -> None:
    """1. A removed member holds no line written under the epoch that removed it or later; a refused newcomer
    none written under an epoch later than its invite's."""
    for p in run.peers.values():
        if p.removed_epoch is not None:
            limit, who = p.removed_epoch, f"{p.name} (removed by epoch {p.removed_epoch})"
        elif p.refused is not None:
            limit, who = p.refused[0] + 1, f"{p.name} (refused newcomer, invite epoch {p.refused[0]})"
        else:
            continue
        for ln in run.lines:
            if ln.author == p.name:
                continue
            checked["epoch_confidentiality"] += 1
            if ln.epoch >= limit and ln.mid in dbs[p.name]:
                violations["epoch_confidentiality"].append(
                    f"{who} holds {ln.author}'s line written under epoch {ln.epoch} at {ln.at:.1f} s "
                    f"({dbs[p.name][ln.mid]})"
                )


def inv2_honest_members_converge(run: Runner, dbs, states, violations, checked) -> None:
    """2. Every honest member ends (its database's state) on the newest epoch, the same everywhere, and holds
    every honest line of its epochs, delivered."""
    honest = run.honest()
    newest = max((states[p.name]["epoch"] for p in honest), default=(0, ""))
    if newest[0] < run.issued:
        violations["convergence"].append(
            f"no honest member is on epoch {run.issued}, the newest issued (newest held: {newest[0]})"
        )
    for p in honest:
        checked["convergence"] += 1
        if states[p.name]["epoch"] != newest:
            violations["convergence"].append(
                f"{p.name} ends on epoch {states[p.name]['epoch'][0]}, not on the newest ({newest[0]})"
            )
        for ln in run._required(p):
            checked["convergence"] += 1
            state = dbs[p.name].get(ln.mid)
            if state is None or state == "waiting":
                violations["convergence"].append(
                    f"{p.name} (joined at epoch {p.join_epoch}) lacks {ln.author}'s line under epoch {ln.epoch} "
                    f"written at {ln.at:.1f} s ({state or 'absent'})"
                )


def _after_all_knew(run: Runner, ln: Line) -> bool:
    """Whether a non-member's line was written once every honest member knew it was not one."""
    p = run.peers[ln.author]
    if p.removed_epoch is not None:
        if ln.at < p.removed_at:
            return False  # written while a member
        return p.all_knew_at is not None and ln.at >= p.all_knew_at
    if p.refused is not None:
        cut = next(k for k in run.kicks if k.epoch == p.refused[1])
        return cut.all_knew_at is not None and ln.at >= cut.all_knew_at
    return False


def inv3_nothing_from_non_members(run: Runner, dbs, violations, checked) -> None:
    """3. No honest member holds a line of a removed member written after every honest member knew of its removal,
    nor one of a refused newcomer written after every honest member knew of the kick that made its key stale."""
    outsiders = [ln for ln in run.lines if not ln.honest and _after_all_knew(run, ln)]
    for p in run.honest():
        for ln in outsiders:
            checked["non_member_refused"] += 1
            if ln.mid in dbs[p.name]:
                author = run.peers[ln.author]
                what = "removed" if author.removed_epoch is not None else "refused newcomer"
                violations["non_member_refused"].append(
                    f"{p.name} holds a line of {ln.author} ({what}) written at {ln.at:.1f} s under epoch "
                    f"{ln.epoch}{' (forced)' if ln.forced else ''} ({dbs[p.name][ln.mid]})"
                )


def inv4_resends_stop(run: Runner, violations, checked) -> None:
    """4. After convergence no honest member keeps resending: its outgoing buffer is empty, or its resend counter
    did not grow over the watch window."""
    for name, (before, after, _ids_before, ids_after) in run.resends.items():
        checked["resends_stop"] += 1
        if ids_after and after > before:
            kinds = _kinds(run, ids_after)
            violations["resends_stop"].append(
                f"{name} resent {after - before} times in {run.watch_s:.0f} s after convergence; "
                f"{len(ids_after)} in its outgoing buffer ({kinds})"
            )


def _kinds(run: Runner, mids) -> str:
    lines = {ln.mid: ln for ln in run.lines}
    out = []
    for mid in mids:
        ln = lines.get(mid)
        out.append(f"{ln.author}'s line at {ln.at:.1f} s" if ln else f"membership message {mid[:8]}")
    return ", ".join(out)


# ------------------------------------------------------------------------------------------------ entry points


async def run_schedule(
    seed: int,
    url: str,
    workdir: Path,
    *,
    converge_s: float = 25.0,
    watch_s: float = 4.0,
    schedule: Schedule | None = None,
) -> ScheduleResult:
    """Play the schedule of ``seed`` (or ``schedule``) on the broker at ``url``, nodes' files in ``workdir``."""
    sched = schedule or make_schedule(seed)
    return await Runner(sched, url, workdir, converge_s=converge_s, watch_s=watch_s).run()


def run(seed: int, url: str, workdir: Path, **kw) -> ScheduleResult:
    """:func:`run_schedule` in a fresh event loop, bounded (the convergence wait, plus 120 s for the steps)."""
    timeout = kw.get("converge_s", 25.0) + kw.get("watch_s", 4.0) + 120.0
    return asyncio.run(asyncio.wait_for(run_schedule(seed, url, workdir, **kw), timeout))
