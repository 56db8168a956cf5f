"""Who we can reach by name, and which inbox requests we take: the rosters' side of direct messages.

A *contact* is a member of one of our channels (not us, not removed) whose signed join announced an X25519
key: we can compute its inbox topic and seal a request to it (:mod:`sdschat.crypto.inbox`). A contact is
named as the window names members: its nick, or ``nick#3f2a`` while another contact goes by the same nick
(:func:`contacts`, :func:`resolve`).

:class:`InboxReceiver` decides what becomes of a blob on our inbox topic: shown once, if it opens for us,
verifies, names us, is recent, and comes from a contact; everything else is counted by reason and dropped.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..crypto import InboxError, OpenedRequest, open_request
from ..crypto.identity import Identity
from .book import FINGERPRINT_DIGITS
from .errors import MemberNotFound

__all__ = [
    "Contact",
    "InboxReceiver",
    "MAX_REQUEST_AGE_MS",
    "channel_label",
    "contacts",
    "dm_channel_name",
    "resolve",
]

#: a request older than this is refused as stale (a kept session queues for 7 days by default; a day more)
MAX_REQUEST_AGE_MS = 8 * 86_400_000
#: how far ahead of our clock a request's time may be (clocks differ)
MAX_CLOCK_AHEAD_MS = 10 * 60_000
#: request ids remembered (a replay of one is dropped); the oldest go first, and are stale by then
MAX_SEEN = 10_000
#: the longest channel name (sdschat.profile.names.MAX_NAME)
MAX_CHANNEL_NAME = 40


@dataclass
class Contact:
    """A member of one of our channels we can send a request to."""

    participant_id: str
    nick: str | None
    #: its announced X25519 public key (its inbox topic and what a request is sealed to)
    exchange_key: bytes
    #: the channels we share with it, in window order
    channels: list[str] = field(default_factory=list)
    #: as the window shows it: the nick, ``nick#3f2a`` while another contact has the same nick, else the id's start
    name: str = ""


def contacts(nodes: Iterable) -> dict[str, Contact]:
    """The members of the channels of ``nodes`` (other than us, not removed) with an announced key, by id."""
    found: dict[str, Contact] = {}
    for node in nodes:
        membership = node.membership
        if membership is None:
            continue
        people = node.book.participants
        for pid, xpub in membership.others().items():
            if len(xpub) != 32:
                continue
            row = people.get(pid)
            contact = found.setdefault(pid, Contact(pid, None, bytes(xpub)))
            contact.nick = contact.nick or (row.nick if row is not None and row.nick else None)
            contact.channels.append(node.key.channel_name)
    clashing = Counter(c.nick for c in found.values() if c.nick)
    for c in found.values():
        if not c.nick:
            c.name = c.participant_id[:8]
        elif clashing[c.nick] > 1:
            c.name = f"{c.nick}#{c.participant_id[:FINGERPRINT_DIGITS]}"
        else:
            c.name = c.nick
    return found


def resolve(known: dict[str, Contact], name: str) -> Contact:
    """The contact called ``name`` (as shown, ``bob#3f2a``; a nick; or the start of an id, 4 digits or more);
    :class:`MemberNotFound` (one line) if none or several."""
    want = name.strip().lstrip("@")
    pool = list(known.values())
    if not want:
        names = sorted(c.name for c in pool)
        raise MemberNotFound(f"say whom: a member of your channels ({', '.join(names) or 'nobody yet'})")
    found = [c for c in pool if c.name == want]
    if not found:
        found = [c for c in pool if c.nick == want]
    if not found and "#" in want:
        nick, _, start = want.rpartition("#")
        found = [c for c in pool if c.nick == nick and len(start) >= 4 and c.participant_id.startswith(start.lower())]
    if not found:
        found = [c for c in pool if len(want) >= 4 and c.participant_id.startswith(want.lower())]
    if not found:
        names = sorted(c.name for c in pool)
        raise MemberNotFound(
            f"nobody called {want!r} in your channels (you can reach: {', '.join(names) or 'nobody yet'})"
        )
    if len(found) > 1:
        raise MemberNotFound(
            f"{len(found)} people are called {want!r}: say which ({', '.join(sorted(c.name for c in found))})"
        )
    return found[0]


def dm_channel_name(mine: str, theirs: str) -> str:
    """The name of a two-member channel, the same on both sides (a channel's key is bound to its name):
    ``@`` and the two nicks in order, joined by ``+``, each cut to fit a channel name."""
    room = (MAX_CHANNEL_NAME - 2) // 2
    a, b = sorted((mine.strip()[:room].strip() or "?", theirs.strip()[:room].strip() or "?"))
    return f"@{a}+{b}"


def channel_label(name: str, me: str = "") -> str:
    """A channel as the window names it: ``#team``; a two-member channel opened by name (``@alice+bob``: both
    nicks, the same name on both sides) by the other member: ``@bob`` for alice (``me``)."""
    if not name.startswith("@"):
        return f"#{name}"
    others = [part for part in name[1:].split("+") if part and part != me]
    return f"@{others[0]}" if len(others) == 1 else name


class InboxReceiver:
    """Opens what arrives on our inbox topic and keeps what may be shown: each request once, from a contact.

    ``counts`` holds every drop by reason: the sealing's own (:class:`~sdschat.crypto.InboxError`: ``auth``,
    ``padding``, ``signature``, ``format``, ``recipient``, ...), ``stranger`` (signed by nobody in our
    channels), ``replay`` (a request id seen before) and ``stale`` (older than :data:`MAX_REQUEST_AGE_MS`, or
    from the future). ``seen`` (request id -> its time) is what a caller keeps across restarts.
    """

    def __init__(self, identity: Identity, seen: dict[str, int] | None = None, clock=time.time) -> None:
        self._identity = identity
        self._clock = clock
        self.seen: dict[str, int] = dict(seen or {})
        self.counts: Counter[str] = Counter()

    def take(self, blob: bytes, is_contact: Callable[[str], bool]) -> OpenedRequest | None:
        """The request in ``blob`` if it is to be shown; None (counted) if not."""
        try:
            opened = open_request(self._identity, blob)
        except InboxError as exc:
            self.counts[exc.reason] += 1
            return None
        request, now = opened.request, int(self._clock() * 1000)
        if request.request_id in self.seen:
            self.counts["replay"] += 1
            return None
        if not now - MAX_REQUEST_AGE_MS <= request.sent_ms <= now + MAX_CLOCK_AHEAD_MS:
            self.counts["stale"] += 1
            return None
        if not is_contact(opened.sender):
            self.counts["stranger"] += 1
            return None
        self._remember(request.request_id, request.sent_ms, now)
        return opened

    def _remember(self, request_id: str, sent_ms: int, now: int) -> None:
        self.seen[request_id] = sent_ms
        if len(self.seen) > MAX_SEEN:
            self.seen = {r: t for r, t in self.seen.items() if t >= now - MAX_REQUEST_AGE_MS}
            while len(self.seen) > MAX_SEEN:
                self.seen.pop(next(iter(self.seen)))

    @property
    def dropped(self) -> int:
        return sum(self.counts.values())
