"""The parts of a run fixed by the seed alone: send times, senders, churn timelines.

Every random draw comes from a generator seeded by ``(seed, purpose, key...)``
(:func:`rng`), never from a stream shared across participants, so any worker
can compute any participant's draws without the others': the network draws of
a frame depend on its publisher and that publisher's frame counter, a member's
churn timeline on the member alone. That is what makes results identical
whatever the number of worker processes.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from .params import SimParams

__all__ = [
    "rng",
    "Plan",
    "make_plan",
    "ChurnTimeline",
    "StoreOutages",
    "RNG_NETWORK",
    "RNG_SEND",
    "RNG_CHURN",
    "RNG_STORE",
    "RNG_STORE_QUERY",
    "RNG_STORE_OUTAGE",
]

RNG_NETWORK, RNG_SEND, RNG_CHURN, RNG_STORE, RNG_STORE_QUERY, RNG_STORE_OUTAGE = 1, 2, 3, 4, 5, 6
#: candidate senders drawn per message (the first one online sends)
SENDER_CANDIDATES = 8


def rng(seed: int, purpose: int, *key: int) -> np.random.Generator:
    return np.random.default_rng([seed & 0xFFFFFFFFFFFFFFFF, purpose, *key])


class ChurnTimeline:
    """Online/offline periods of every member (see :class:`~sdschat.sim.params.SimParams`).

    ``initially_offline(r)`` and ``next_toggle(r, t, online)`` draw from the
    member's own stream, in order: call ``next_toggle`` once per toggle.
    """

    def __init__(self, p: SimParams) -> None:
        self.p = p
        frac, mean_off = p.churn if p.churn else (0.0, 1)
        self.mean_off = float(mean_off)
        self.mean_on = mean_off * (1.0 - frac) / frac if frac > 0 else float("inf")
        self.start_off = rng(p.seed, RNG_CHURN).random(p.participants) < frac
        self._streams: dict[int, np.random.Generator] = {}

    def initially_offline(self, r: int) -> bool:
        return bool(self.start_off[r])

    def next_toggle(self, r: int, t: int, online: bool) -> int:
        """When member ``r``, in state ``online`` since ``t``, toggles next."""
        g = self._streams.get(r)
        if g is None:
            g = self._streams[r] = rng(self.p.seed, RNG_CHURN, r)
        return t + 1 + int(g.exponential(self.mean_on if online else self.mean_off))


class StoreOutages:
    """Up and down periods of every store (``store_outages = (fraction, mean_off_ms)``), as members churn.

    ``up(s, t)`` for any ``t`` in any order: each store's toggle times are drawn from its own stream and
    kept, extended as far as asked.
    """

    def __init__(self, p: SimParams) -> None:
        self.p = p
        frac, mean_off = p.store_outages if p.store_outages else (0.0, 1)
        self.mean_off = float(mean_off)
        self.mean_on = mean_off * (1.0 - frac) / frac if frac > 0 else float("inf")
        self.enabled = frac > 0
        down = rng(p.seed, RNG_STORE_OUTAGE).random(max(1, p.stores)) < frac
        self._start_up = [not bool(x) for x in down]
        self._toggles: list[list[int]] = [[] for _ in range(max(1, p.stores))]
        self._streams = [rng(p.seed, RNG_STORE_OUTAGE, s) for s in range(max(1, p.stores))]

    def up(self, s: int, t: int) -> bool:
        if not self.enabled:
            return True
        toggles = self._toggles[s]
        g = self._streams[s]
        last = toggles[-1] if toggles else self.p.start_ms
        while last <= t:
            up_now = self._start_up[s] == (len(toggles) % 2 == 0)  # the state that starts at `last`
            last = last + 1 + int(g.exponential(self.mean_on if up_now else self.mean_off))
            toggles.append(last)
        return self._start_up[s] == (bisect.bisect_right(toggles, t) % 2 == 0)


@dataclass
class Plan:
    send_times: list[int]
    senders: list[int]
    settle_ms: int  # time of the last send (or the start): the settle phase begins after it

    def __len__(self) -> int:
        return len(self.send_times)


def make_plan(p: SimParams) -> Plan:
    """Send times (exponential gaps at ``rate``) and who sends each message (a random online sender)."""
    g = rng(p.seed, RNG_SEND)
    t0 = p.start_ms
    if p.messages == 0:
        return Plan([], [], t0)
    gaps = g.exponential(1000.0 / p.rate, p.messages)
    times = (t0 + np.maximum(1, np.rint(np.cumsum(gaps)))).astype(np.int64).tolist()
    draws = g.random((p.messages, SENDER_CANDIDATES))
    active = p.senders or p.participants
    cands = (draws * active).astype(np.int64).tolist()
    senders: list[int] = []
    if p.churn is None:
        senders = [c[0] for c in cands]
    else:
        online = _OnlineAt(p)
        for t, c in zip(times, cands):
            r = c[-1]
            for x in c:
                if online(x, t):
                    r = x
                    break
            senders.append(r)
    return Plan(times, senders, times[-1])


class _OnlineAt:
    """``online(r, t)`` for non-decreasing ``t`` per member, following :class:`ChurnTimeline`."""

    def __init__(self, p: SimParams) -> None:
        self.tl = ChurnTimeline(p)
        self.t0 = p.start_ms
        self.state: dict[int, tuple[bool, int]] = {}  # r -> (online, next toggle)

    def __call__(self, r: int, t: int) -> bool:
        st = self.state.get(r)
        if st is None:
            online = not self.tl.initially_offline(r)
            st = (online, self.tl.next_toggle(r, self.t0, online))
        online, nxt = st
        # a send at time t comes before a toggle at t (core orders SEND before CHURN)
        while nxt < t:
            online = not online
            nxt = self.tl.next_toggle(r, nxt, online)
        self.state[r] = (online, nxt)
        return online
