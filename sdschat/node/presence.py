"""Presence: who is online, away or offline, from ephemeral beats (never stored, never repaired).

A member's presence is what this node last heard of it, held in memory only. Two things tell it:

- **Any frame** a member publishes live (a message, a sync, a resend, a typing notice, a beat) says it is there:
  its *last heard* time moves, and a member shown offline is online again.
- A **beat**: an ephemeral ``presence`` payload (``d`` = ``{"s": state, "i": seconds}``, the away message as its
  ``text``) saying ``online``, ``away`` or ``offline``. A member sends one when its state changes (at once, and
  once more :data:`REPEAT_AFTER_MS` later, in case the first is lost), when it starts (asking the others to answer
  with theirs: ``"q": 1``; an online member that publishes anything before its answer is due sends none), and
  when it stops cleanly (``offline``).

A member not heard for :data:`OFFLINE_AFTER` times the interval it announced (``i``, :data:`BEAT_EVERY_MS` by
default) is shown offline. Because every frame counts, a member taking part in the channel needs nothing more, and
a quiet one is mostly heard through its share of the channel's periodic syncs (the node's channels draw their sync
jitter afresh each round: ``sync_fresh_jitter``). One that still published nothing for its interval makes the
channel's next periodic sync its own (``MessageChannel.sync_soon``, held until a frame of its own goes out): the
sync says it is here and takes the place of one the channel would have had (every member that hears a sync puts
its own off), so being heard adds no frame; an ephemeral beat only while its log is empty.
``bench/presence_bytes.py`` measures
what presence costs against the channel's bytes, idle and at a chat rate. A member of a version without presence
is shown online while heard, from its other frames.

Our own state: online, or away -- set with ``/away [message]`` (:meth:`PresenceKeeper.set_away`), or on its own
once nothing was pressed for ``away_after_ms`` (:meth:`PresenceKeeper.active` is every key press). Typing or
sending brings us back, from either; a key press only from an idle away.

The keeper is sans-I/O in the sense of the engine's timers: it is handed ``now`` by the node's ticker and the
receive pipeline, and sends through the node's door (:class:`~.ports.PresenceHost`).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Literal

from . import events as ev
from .config import AWAY_AFTER_MS, BEAT_EVERY_MS
from .outbox import Outbound
from .payload import AppPayload
from .ports import PresenceHost

__all__ = [
    "ANSWER_WITHIN_MS",
    "AWAY",
    "BEAT_MEMBERS",
    "AWAY_AFTER_MS",
    "BEAT_EVERY_MS",
    "KIND",
    "MAX_AWAY_MESSAGE",
    "MemberPresence",
    "OFFLINE",
    "OFFLINE_AFTER",
    "ONLINE",
    "Presence",
    "PresenceKeeper",
    "PresenceState",
    "beat_interval",
    "beat_payload",
    "read_beat",
]

#: the payload kind of a beat (ephemeral only)
KIND = "presence"
PresenceState = Literal["online", "away", "offline"]
ONLINE: PresenceState = "online"
AWAY: PresenceState = "away"
OFFLINE: PresenceState = "offline"
_STATES: tuple[PresenceState, ...] = (ONLINE, AWAY, OFFLINE)
#: a member not heard for this many of its announced beat intervals is shown offline
OFFLINE_AFTER = 2.5
#: a state change is beaten again this much later (the first beat may be lost: QoS 0)
REPEAT_AFTER_MS = 5_000
#: answers to a newcomer's start beat come within this (drawn: N members do not answer at once)
ANSWER_WITHIN_MS = (300, 3_000)
#: the longest away message kept (a beat stays small)
MAX_AWAY_MESSAGE = 120
#: the shortest and longest beat interval a peer may announce (seconds): outside, the nearest
_INTERVAL_S = (1, 3_600)
#: up to this many members a member is heard at its configured beat interval; past it, the interval grows with the
#: channel (:func:`beat_interval`): a quiet channel has about 16 periodic syncs in 180 s at the node's sync
#: interval, shared among its members, and more members than that wait longer for their share (measured with
#: ``bench/presence_bytes.py --simulated --members 10``: at 180 s presence cost 1.6% of the channel's bytes, at
#: 360 s, this rule's, 0.2% at 0.5 lines a minute and 0.8% idle)
BEAT_MEMBERS = 5
#: how often the keeper looks at the channel's member count (ms)
SIZE_EVERY_MS = 5_000


@dataclasses.dataclass(frozen=True, slots=True)
class Presence:
    """What is known of one member's presence. ``last_heard_ms`` 0: never heard since this node started;
    ``epoch``: the key epoch of the last frame heard from it (None: none heard)."""

    state: PresenceState
    message: str = ""
    last_heard_ms: int = 0
    epoch: int | None = None

    @property
    def label(self) -> str:
        """``online``, ``away``, ``away (at lunch)`` or ``offline``."""
        return f"{self.state} ({self.message})" if self.state == AWAY and self.message else self.state


@dataclasses.dataclass(frozen=True, slots=True)
class MemberPresence:
    """One line of ``/names``: a member's name as shown, whether an admin, whether us, and its presence."""

    participant_id: str
    name: str
    admin: bool
    me: bool
    presence: Presence


@dataclasses.dataclass
class _Heard:
    """A peer as heard: its last announced state, when last heard, under which key epoch, its beat interval."""

    state: PresenceState = ONLINE
    message: str = ""
    last_heard_ms: int = 0
    epoch: int | None = None
    every_ms: int = BEAT_EVERY_MS
    #: the nick its last beat carried ("": none yet)
    nick: str = ""


def beat_payload(
    nick: str, state: PresenceState, message: str, now: int, epoch: int, every_ms: int, ask: bool = False
) -> AppPayload:
    """A beat's payload: ``{"s": state, "i": interval in s}`` (``"q": 1`` asks the others for theirs)."""
    data: dict = {"s": state, "i": max(1, every_ms // 1000)}
    if ask:
        data["q"] = 1
    return AppPayload.new(KIND, nick, message[:MAX_AWAY_MESSAGE] if state == AWAY else "", now, data=data, epoch=epoch)


def beat_interval(base_ms: int, members: int) -> int:
    """The beat interval of a channel of ``members`` (us included), for a configured ``base_ms``: the base up to
    :data:`BEAT_MEMBERS` members, then in proportion (10 members: twice it), at most an hour."""
    if members <= BEAT_MEMBERS:
        return base_ms
    return max(base_ms, min(_INTERVAL_S[1] * 1000, base_ms * members // BEAT_MEMBERS))


def read_beat(app: AppPayload) -> tuple[PresenceState, str, int, bool] | None:
    """``(state, message, interval ms, asks)`` of a beat; None for what is no beat (ignored, as a newer kind)."""
    d = app.data
    if app.kind != KIND or not isinstance(d, dict):
        return None
    state = d.get("s")
    if state not in _STATES:
        return None
    every = d.get("i")
    if not isinstance(every, int) or isinstance(every, bool):
        every = BEAT_EVERY_MS // 1000
    every = min(_INTERVAL_S[1], max(_INTERVAL_S[0], every))
    message = _clean(app.text) if state == AWAY else ""
    return state, message, every * 1000, d.get("q") == 1


def _clean(text: str) -> str:
    """An away message as one line: control characters gone, cut to :data:`MAX_AWAY_MESSAGE`."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())[:MAX_AWAY_MESSAGE]


class PresenceKeeper:
    """Our presence and the others' as heard. The node calls :meth:`start` once it is up, :meth:`tick` from its
    ticker, :meth:`published` for every frame it publishes, :meth:`active` on a key press (``typed``: typing or
    sending) and :meth:`leaving` as it stops; the receive pipeline calls :meth:`heard` for every live frame of
    another member and :meth:`beat` for a beat."""

    def __init__(
        self,
        host: PresenceHost,
        *,
        beat_every_ms: int = BEAT_EVERY_MS,
        away_after_ms: int = AWAY_AFTER_MS,
        seed: int | None = None,
    ) -> None:
        self.host = host
        #: the configured interval, and the one of the channel's size (:func:`beat_interval`), announced in beats
        self.base_every_ms = beat_every_ms
        self.beat_every_ms = beat_every_ms
        self._size_due = 0
        self.away_after_ms = away_after_ms
        self._rng = random.Random(seed)
        # ours
        self.state: PresenceState = ONLINE
        self.message = ""
        #: away by /away (only typing or sending, or /back, ends it), not by idling
        self.manual = False
        self.last_active_ms = 0
        self._last_published_ms = 0
        self._beat_due: int | None = None  # None: not started (nothing is sent before the node is up)
        self._repeat_due: int | None = None
        self._answer_due: int | None = None
        #: when the first start beat we owe an answer arrived
        self._asked_ms = 0
        self._left = False
        # theirs
        self._heard: dict[str, _Heard] = {}
        #: what was last told (PresenceChanged) of each member: an event only when it changes
        self._told: dict[str, tuple[str, str]] = {}
        #: beats sent, and their bytes (the SDS frame; the envelope adds its seal)
        self.beats_sent = 0
        self.beat_bytes = 0
        #: periodic syncs brought forward in a beat's place (:meth:`_be_heard`)
        self.syncs_for_beats = 0

    # ----------------------------------------------------------------- ours

    def start(self, now: int) -> None:
        """The node is up: say we are here, and ask who else is."""
        self.last_active_ms = now
        self._send(now, ask=True)
        self._tell(self.host.participant_id, now)

    def active(self, now: int, *, typed: bool = False) -> None:
        """A key was pressed (``typed``: something typed or sent): back from an idle away (from /away too if
        ``typed``)."""
        self.last_active_ms = now
        if self.state == AWAY and (typed or not self.manual):
            self._change(ONLINE, "", False, now)

    def set_away(self, message: str | None, now: int) -> None:
        """``/away message`` (``""``: away without one); ``None``: back."""
        self.last_active_ms = now
        if message is None:
            self._change(ONLINE, "", False, now)
        else:
            self._change(AWAY, _clean(message), True, now)

    def published(self, now: int) -> None:
        """We published a frame: the others heard from us (no beat needed for a while)."""
        self._last_published_ms = now

    def leaving(self, now: int) -> None:
        """We stop: say so (once)."""
        if self._beat_due is None or self._left:
            return
        self._left = True
        self._send(now, state=OFFLINE)

    def _change(self, state: PresenceState, message: str, manual: bool, now: int) -> None:
        self.manual = manual
        if (state, message) == (self.state, self.message):
            return
        self.state, self.message = state, message
        if self._beat_due is not None:
            self._send(now)
            self._repeat_due = now + REPEAT_AFTER_MS
        self._tell(self.host.participant_id, now)

    def _send(self, now: int, *, state: PresenceState | None = None, ask: bool = False) -> None:
        host = self.host
        channel = host.channel
        if channel is None or host.stopping and state != OFFLINE:
            return
        app = beat_payload(
            host.nick, state or self.state, self.message, now, host.current_epoch(), self.beat_every_ms, ask
        )
        out = channel.send_ephemeral(app.encode(), now, sign=host.sign)
        host.enqueue(Outbound(out.data, "ephemeral"))
        self.beats_sent += 1
        self.beat_bytes += len(out.data)
        self._last_published_ms = now
        self._beat_due = self._next_beat(now)

    def _next_beat(self, after: int) -> int:
        return after + self.beat_every_ms - self._rng.randrange(self.beat_every_ms // 5 + 1)

    # --------------------------------------------------------------- theirs

    def heard(self, pid: str, now: int, epoch: int) -> None:
        """A live frame of ``pid`` (not ours) arrived under key epoch ``epoch``."""
        h = self._heard.get(pid)
        if h is None:
            h = self._heard[pid] = _Heard()
        elif h.state == OFFLINE:  # it said it left, and publishes again: back
            h.state, h.message = ONLINE, ""
        h.last_heard_ms, h.epoch = now, epoch
        self._show(pid, h.state, h.message)  # (what :meth:`_tell` would find: one just heard is not timed out)

    def beat(self, pid: str, app: AppPayload, now: int, epoch: int | None) -> None:
        """A beat of ``pid`` (:meth:`heard` came first, for its frame)."""
        read = read_beat(app)
        if read is None:
            return
        state, message, every_ms, asks = read
        h = self._heard.setdefault(pid, _Heard())
        h.state, h.message, h.every_ms, h.nick = state, message, every_ms, app.nick
        h.last_heard_ms = max(h.last_heard_ms, now)
        if epoch is not None:
            h.epoch = epoch
        if asks and self._beat_due is not None and not self._left:
            due = now + self._rng.randrange(ANSWER_WITHIN_MS[0], ANSWER_WITHIN_MS[1] + 1)
            if self._answer_due is None:
                self._asked_ms = now
            self._answer_due = due if self._answer_due is None else min(self._answer_due, due)
        self._tell(pid, now)

    def forget(self, pid: str) -> None:
        """``pid`` is no member any more (removed, left): nothing more is shown of it."""
        self._heard.pop(pid, None)
        self._told.pop(pid, None)

    # ----------------------------------------------------------------- time

    def tick(self, now: int) -> None:
        """Away after idling, members not heard for long enough offline, our beats when due."""
        if self._beat_due is None or self._left:
            return
        if now >= self._size_due:
            self._size_due = now + SIZE_EVERY_MS
            self.beat_every_ms = beat_interval(self.base_every_ms, self.host.member_count())
        if self.state == ONLINE and self.away_after_ms > 0 and now - self.last_active_ms >= self.away_after_ms:
            self._change(AWAY, "", False, now)
        for pid in [p for p, h in self._heard.items() if h.state != OFFLINE]:
            self._tell(pid, now)
        if self._answer_due is not None and now >= self._answer_due:
            self._answer_due = None
            if self.state != ONLINE or self._last_published_ms < self._asked_ms:
                self._send(now)  # (online, and anything published since the ask: that frame answered it)
        elif self._repeat_due is not None and now >= self._repeat_due:
            self._repeat_due = None
            self._send(now)
        elif now >= self._beat_due:
            if now - self._last_published_ms < self.beat_every_ms * 4 // 5:  # heard from us lately: no beat needed
                self._beat_due = self._next_beat(self._last_published_ms)
            else:
                self._be_heard(now)

    def _be_heard(self, now: int) -> None:
        """Nothing published for a beat interval: the channel's next periodic sync is ours (due when its quiet
        interval ends, and held until a frame of ours goes out, at most half the interval from now: heard within
        1.5 intervals, a lost frame's margin before the 2.5 that mean offline), and says we are here in the place
        of one the channel would have had; a beat only while the log is empty (there is no sync to send). Our
        state was beaten when it changed, and is answered to newcomers."""
        channel = self.host.channel
        if channel is not None and channel.log_size() > 0:
            channel.sync_soon(now, self.beat_every_ms // 2)
            self.syncs_for_beats += 1
            self._beat_due = self._next_beat(now)
        else:
            self._send(now)

    # ---------------------------------------------------------------- views

    def heard_nicks(self) -> dict[str, str]:
        """Participant id -> the nick its last beat carried, of everyone heard since we started."""
        return {pid: h.nick for pid, h in self._heard.items()}

    def others_here(self, now: int) -> list[str]:
        """The other members heard and not shown offline now: one that stopped cleanly said so at once, one that
        vanished is offline :data:`OFFLINE_AFTER` beat intervals after it was last heard."""
        me = self.host.participant_id
        return [pid for pid in self._heard if pid != me and self.of(pid, now).state != OFFLINE]

    def of(self, pid: str, now: int) -> Presence:
        """``pid``'s presence now (ours: our own state)."""
        if pid == self.host.participant_id:
            return Presence(OFFLINE if self._left else self.state, self.message, now, self.host.current_epoch())
        h = self._heard.get(pid)
        if h is None:
            return Presence(OFFLINE)
        # (a peer of the same channel beats at least as seldom as we do: our own interval is the channel's size's)
        if h.state != OFFLINE and now - h.last_heard_ms >= max(h.every_ms, self.beat_every_ms) * OFFLINE_AFTER:
            return Presence(OFFLINE, "", h.last_heard_ms, h.epoch)
        return Presence(h.state, h.message, h.last_heard_ms, h.epoch)

    def _tell(self, pid: str, now: int) -> None:
        p = self.of(pid, now)
        self._show(pid, p.state, p.message)

    def _show(self, pid: str, state: PresenceState, message: str) -> None:
        """``PresenceChanged`` if ``pid`` is shown otherwise than last told."""
        shown = (state, message)
        if self._told.get(pid) != shown:
            self._told[pid] = shown
            self.host.emit(ev.PresenceChanged(pid, state, message))
