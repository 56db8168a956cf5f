"""Members, admins and key epochs of one channel: the rules, without I/O.

Signed chat-log messages (application payload kinds, sdschat.node.payload) change them:

- ``join`` ``{"x": X25519 public key}``: its author is a member and can be sent later keys. Every node announces
  itself once per channel. A removed member's joins are ignored.
- ``admin`` ``{"add": [participant id, ...]}``: from an admin, names more admins. The first admins (the trust
  root) are those of the invite the member joined with (the channel's creator).
- ``epoch`` ``{"epoch": n, "removed": [...], "e": ephemeral X25519 key, "keys": {participant id: box}}``: from
  an admin, starts key epoch ``n`` (a fresh secret, sealed to each remaining member's X25519 key:
  sdschat.crypto.epochs) and removes ``removed``. The same number with only new boxes grants the current epoch's
  key to a member who joined after it started.

Two admins starting the same epoch number at once: both keys are kept (each member reads traffic under
either), and every member sends under the one whose message id is lower; the author of the other starts the
next epoch if a member it removed holds the winner's key.

An epoch message is sealed under its predecessor's key (so the members who have not switched yet can read it),
then its readers switch. A key superseded here is kept ``retention_ms`` (traffic of members who had not switched
still opens) and then deleted.

A removal is final (:meth:`Membership.refusal`). The newest epoch that removed someone is the *cut*; the members
*admitted* since are that epoch's recipients, those of every later epoch or grant, and the authors of joins written
under the cut's key or a later one. Every application payload names the epoch its author wrote it under (``e``,
signed with it). A message written under a key from before the cut by anyone not admitted is refused
(``stale_key``): an invite made before a kick, or re-made from a removed member's profile, admits nobody, however
its join is relayed, and no admin grants it a key. A message published by its own author that names a later epoch
than the key it came under is a lie (``bad_epoch``). A member that learns of an epoch sealed to others but not to it
(and that did not remove it) is *locked out* (:attr:`Membership.locked_out`) until it holds that epoch's key.
"""

from __future__ import annotations

import dataclasses
import json

from ..crypto import ChannelKey, CryptoError, Identity
from ..crypto.epochs import (
    EXCHANGE_KEY_SIZE,
    epoch_key,
    exchange_public,
    new_epoch_secret,
    open_for_member,
    seal_to_members,
)
from .errors import UserError
from .events import Refusal
from .payload import MAX_EPOCH

__all__ = [
    "ControlError",
    "Epoch",
    "Membership",
    "EpochApplied",
    "parse_control",
    "redacted_body",
    "invite_refusal",
    "MAX_EPOCH",
]

#: at most this many members in one epoch message (its boxes are ~100 bytes each)
MAX_RECIPIENTS = 5_000
_PID_LEN = 32


class ControlError(UserError, ValueError):
    """A membership message whose data is not what sdschat writes (refused as ``bad_control``). Its text is
    one readable line: what the refusal tells a person."""


def _pid(value) -> str:
    if not isinstance(value, str) or len(value) != _PID_LEN or any(c not in "0123456789abcdef" for c in value):
        raise ControlError("a participant id is 32 hex digits")
    return value


def _hex(value, size: int, what: str) -> bytes:
    try:
        raw = bytes.fromhex(value) if isinstance(value, str) else None
    except ValueError:
        raw = None
    if raw is None or len(raw) != size:
        raise ControlError(f"{what}: {size} bytes in hex")
    return raw


def parse_control(kind: str, data) -> dict:
    """The checked data of a ``join``, ``admin`` or ``epoch`` message; :class:`ControlError` otherwise."""
    if not isinstance(data, dict):
        raise ControlError("membership data is not an object")
    if kind == "join":
        return {"x": _hex(data.get("x"), EXCHANGE_KEY_SIZE, "join key")}
    if kind == "leave":
        return {}
    if kind == "nick":
        old = data.get("from")
        if not isinstance(old, str) or not 0 < len(old) <= 64:
            raise ControlError("nick: the nick it replaces")
        return {"from": old}
    if kind == "admin":
        add = data.get("add")
        if not isinstance(add, list) or not 0 < len(add) <= 100:
            raise ControlError("admin: a list of participant ids")
        return {"add": [_pid(p) for p in add]}
    if kind == "epoch":
        n = data.get("epoch")
        if not isinstance(n, int) or isinstance(n, bool) or not 0 < n < MAX_EPOCH:
            raise ControlError(f"epoch: a number from 1 to {MAX_EPOCH - 1}")
        removed, keys = data.get("removed", []), data.get("keys")
        if not isinstance(removed, list) or len(removed) > MAX_RECIPIENTS:
            raise ControlError("epoch: removed is a list")
        if not isinstance(keys, dict) or not 0 < len(keys) <= MAX_RECIPIENTS:
            raise ControlError("epoch: keys for 1 to 5,000 members")
        out = data.get("out", [])
        if not isinstance(out, list) or len(out) > MAX_RECIPIENTS:
            raise ControlError("epoch: out is a list")
        why = data.get("why", "rekey")
        if why not in ("kick", "rekey", "grant"):
            raise ControlError("epoch: why is kick, rekey or grant")
        return {
            "epoch": n,
            "why": why,
            "removed": [_pid(p) for p in removed],
            "out": [_pid(p) for p in out],
            "e": _hex(data.get("e"), EXCHANGE_KEY_SIZE, "epoch ephemeral key"),
            "keys": {_pid(p): _hex(b, 48, "epoch key box") for p, b in keys.items()},
        }
    raise ControlError(f"not a membership kind: {kind!r}")


def redacted_body(body: bytes) -> bytes:
    """An epoch message's payload as the database keeps it: without its key boxes (they would let whoever later
    reads the file with the identity key open every epoch's key: no forward secrecy)."""
    try:
        obj = json.loads(body)
        d = obj.get("d")
        if obj.get("k") == "epoch" and isinstance(d, dict) and isinstance(d.get("keys"), dict):
            obj["d"] = {**d, "keys": sorted(d["keys"]), "e": ""}
            return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except (ValueError, AttributeError, RecursionError):
        pass
    return body


@dataclasses.dataclass
class Epoch:
    number: int
    secret: bytes
    #: the epoch message that started it ("" for the key of an invite or key file)
    message_id: str = ""
    author: str = ""
    recipients: frozenset[str] = frozenset()
    #: when a later epoch took over here (its deletion clock starts then); None: current
    retired_ms: int | None = None
    #: the SDS frame of its epoch message, to hand to a member still on an older key (~2 KB: kept in its own kv
    #: row by sdschat.node.roster, not in this state's JSON, and deleted with the key)
    frame: bytes = b""
    #: when it became current here (wall-clock ms; 0: unknown)
    started_ms: int = 0

    def rank(self) -> tuple:
        """Higher is newer; of two at the same number, the lower message id wins."""
        return (self.number, tuple(-ord(c) for c in self.message_id) if self.message_id else ())

    def to_json(self) -> dict:
        return {
            "n": self.number,
            "s": self.secret.hex(),
            "m": self.message_id,
            "a": self.author,
            "r": sorted(self.recipients),
            "t": self.retired_ms,
            "st": self.started_ms,
        }

    @classmethod
    def from_json(cls, obj: dict) -> Epoch:
        return cls(
            int(obj["n"]),
            bytes.fromhex(obj["s"]),
            obj.get("m", ""),
            obj.get("a", ""),
            frozenset(obj.get("r", ())),
            obj.get("t"),
            b"",
            int(obj.get("st", 0)),
        )


@dataclasses.dataclass
class EpochApplied:
    """What one epoch message changed here."""

    number: int
    author: str
    removed: tuple[str, ...] = ()
    #: whether we hold its key now (False: it was not sealed to us)
    mine: bool = False
    #: whether it is now the epoch we send under
    switched: bool = False
    #: we are among the removed
    removed_me: bool = False
    #: a grant (same number, more members) rather than a new epoch
    grant: bool = False
    #: an epoch of ours lost a tie: members we removed hold the winner's key (start another)
    redo: tuple[str, ...] = ()


class Membership:
    """The membership state of one channel as this member knows it (persisted as JSON in the node's kv)."""

    def __init__(self, me: str, base: ChannelKey, admins=()) -> None:
        self.me = me
        self.base = base
        self.admins: set[str] = set(admins)
        self.members: dict[str, bytes] = {}
        #: removed participant id -> the epoch that removed it
        self.removed: dict[str, int] = {}
        self.epochs: list[Epoch] = [Epoch(0, b"")]  # epoch 0: the base key (its secret is not kept here)
        #: our own join was written to the log
        self.joined = False
        #: epoch message id -> its epoch number (a new epoch or a grant): it goes out under the key before it
        self.sealed_under: dict[str, int] = {}
        #: grant message id -> the older epochs whose keys it also goes out under (those of the joiners it is for)
        self.also_under: dict[str, set[int]] = {}
        #: the newest epoch that removed someone (0: none yet) and the members admitted since (module docstring)
        self.cut = 0
        self.admitted: set[str] = set()
        #: the key epoch each member's join was written under
        self.joined_under: dict[str, int] = {}
        #: members who left (``/part``) since their last join: no longer listed, nor sealed later keys
        self.left: set[str] = set()
        #: an epoch that began without a key for us (and did not remove us); 0 while we hold the newest key we know
        self.locked_out = 0
        self._keys: dict[str, tuple[Epoch, ChannelKey]] = {}
        self._reindex()

    # ------------------------------------------------------------ keys

    def key_of(self, epoch: Epoch) -> ChannelKey:
        """The envelope key (and topic) of ``epoch``."""
        return self.base if epoch.number == 0 and not epoch.secret else epoch_key(epoch.secret, self.base.channel_name)

    def _reindex(self) -> None:
        self._keys = {}
        for e in self.epochs:
            k = self.key_of(e)
            self._keys[k.topic] = (e, k)

    @property
    def current(self) -> Epoch:
        return max(self.epochs, key=Epoch.rank)

    @property
    def send_key(self) -> ChannelKey:
        return self.key_of(self.current)

    def topics(self) -> list[str]:
        """Every topic whose key is kept (the current one first)."""
        cur = self.send_key.topic
        return [cur, *(t for t in self._keys if t != cur)]

    def key_for_topic(self, topic: str) -> tuple[Epoch, ChannelKey] | None:
        return self._keys.get(topic)

    def keys(self) -> list[tuple[Epoch, ChannelKey]]:
        """Every kept key, the current one first."""
        cur = self.current
        return sorted(self._keys.values(), key=lambda ek: ek[0] is not cur)

    def seal_keys_for(self, message_id: str | None) -> list[ChannelKey]:
        """The keys a frame goes out under: an epoch message (or grant) of epoch ``n`` under the newest key before
        ``n`` (what the members who have not switched hold) and under the current key (what a member who joined
        with it holds); everything else under the current key."""
        current = self.send_key
        n = self.sealed_under.get(message_id) if message_id else None
        if n is not None:
            keys = [current]
            before = [e for e in self.epochs if e.number < n]
            if before:
                keys.insert(0, self.key_of(max(before, key=Epoch.rank)))
            # a grant also goes out under each of its joiners' keys: one whose invite is several epochs old holds
            # none of the two above
            keys += [self.key_of(e) for e in self.epochs if e.number in self.also_under.get(message_id or "", ())]
            return list({k.topic: k for k in keys}.values())
        return [current]

    def epoch_frames_after(self, number: int) -> list[tuple[str, bytes]]:
        """``(message id, SDS frame)`` of the epoch messages later than ``number`` (for a member still on it)."""
        return [(e.message_id, e.frame) for e in sorted(self.epochs, key=Epoch.rank) if e.number > number and e.frame]

    def expire(self, now: int, retention_ms: int) -> list[Epoch]:
        """Forget the keys superseded here more than ``retention_ms`` ago; returns them. Epoch 0's secret is the
        channel's own (in the profile or invite: the SDS channel id and signatures are scoped by it), so it is
        only no longer used to open or listen."""
        gone = [e for e in self.epochs if e.retired_ms is not None and now - e.retired_ms >= retention_ms]
        if gone:
            self.epochs = [e for e in self.epochs if e not in gone]
            self._reindex()
        return gone

    def epoch_messages_upto(self, number: int) -> list[str]:
        """Ids of the epoch messages (and grants) of epochs up to ``number``: their key boxes go with the keys."""
        return [mid for mid, n in self.sealed_under.items() if n <= number]

    def adopt(self, number: int, secret: bytes, now: int) -> bool:
        """Take an epoch key from an invite; True if it is new here. A new member joining with a later key does
        not listen under the older ones (it would take in what a removed member still sends there before it
        knows of the removal); what was sent under them reaches it through repairs."""
        if any(e.secret == secret for e in self.epochs):
            return False
        if len(self.epochs) == 1 and not self.epochs[0].secret and not self.members:
            self.epochs = []  # a fresh member: only the invite's key
        self._add(Epoch(number, secret), now)
        return True

    def _add(self, epoch: Epoch, now: int) -> bool:
        """Keep ``epoch``'s key; returns whether it became the current one."""
        before = self.current if self.epochs else None
        self.epochs.append(epoch)
        after = self.current
        for e in self.epochs:
            if e is not after and e.retired_ms is None:
                e.retired_ms = now
        if after is not epoch:
            epoch.retired_ms = now
        elif after is not before:
            epoch.started_ms = now
        if self.locked_out and after.number >= self.locked_out:
            self.locked_out = 0
        self._reindex()
        return after is not before

    # ------------------------------------------------------------ rules

    def invite_refusal(self) -> str | None:
        """Why this member cannot make an invite (None: it can): removed from the channel, or locked out of its
        newest key. An invite of theirs would admit nobody (:meth:`refusal`)."""
        return _invite_refusal(self.me, self.removed, self.locked_out)

    @property
    def is_admin(self) -> bool:
        return self.me in self.admins

    def others(self) -> dict[str, bytes]:
        """Members other than us and not removed, with their X25519 keys."""
        return {p: x for p, x in self.members.items() if p != self.me and p not in self.removed}

    def apply_join(self, sender: str, xpub: bytes, epoch: int = 0) -> bool:
        """A member's join (written under key epoch ``epoch``); False if ignored (a removed member, or one written
        under a key from before the cut by someone not admitted since)."""
        if self.refusal(sender, epoch, epoch) is not None:  # (removed, or stale_key)
            return False
        if epoch >= self.cut:
            self.admitted.add(sender)
        self.joined_under[sender] = epoch
        self.left.discard(sender)
        self.members[sender] = bytes(xpub)
        if sender == self.me:
            self.joined = True
        return True

    @property
    def gone(self) -> set[str]:
        """Participants who are no members any more: removed, or left (``/part``) since their last join."""
        return self.removed.keys() | self.left

    @staticmethod
    def gone_in(text: str) -> set[str]:
        """:attr:`gone` of a saved state (:meth:`to_json`'s text), without loading its keys."""
        obj = json.loads(text)
        return {_pid(p) for p in obj.get("removed", {})} | {_pid(p) for p in obj.get("left", ())}

    def apply_leave(self, sender: str) -> bool:
        """A member's ``leave`` (``/part``): it is no member any more until it joins again (later keys are not
        sealed to it; it keeps those it has: a removal is ``/kick``). False if it was no member."""
        if sender in self.removed or sender not in self.members:
            return False
        del self.members[sender]
        self.left.add(sender)
        if sender == self.me:
            self.joined = False  # back one day: it announces itself again
        return True

    def apply_admin(self, sender: str, add) -> list[str]:
        if sender not in self.admins:
            raise ControlError("only an admin names admins")
        new = [p for p in add if p not in self.admins]
        self.admins.update(new)
        return new

    def refusal(
        self, author: str, claim: int, envelope: int, *, direct: bool = True, kind: str = "msg"
    ) -> Refusal | None:
        """Why a message of ``author``, written under key epoch ``claim`` (its payload's ``e``) and opened with the
        key of epoch ``envelope``, is refused here (None: it is not). ``direct``: published by its author, not
        relayed. See the module docstring."""
        if author == self.me:
            return None
        gone = self.removed.get(author)
        if gone is not None:
            # written after its removal (what it wrote before may still reach a member through a repair)
            return "removed" if direct or claim >= gone > 0 else None
        if claim < self.cut and author not in self.admitted:
            return "stale_key"
        if direct and claim > envelope and kind not in ("epoch", "admin"):
            # (an admin hands epoch and admin messages on under a straggler's older key)
            return "bad_epoch"
        return None

    def entitled(self, pid: str, number: int) -> bool:
        """Whether ``pid`` should be handed the epochs after ``number``: a member admitted since the cut, or one
        of a later epoch's recipients."""
        if pid in self.removed:
            return False
        return pid in self.admitted or any(pid in e.recipients for e in self.epochs if e.number > number)

    def needs_grant(self, pid: str) -> bool:
        """Whether an admin should send ``pid`` (a member) the current key: it joined after the epoch began."""
        cur = self.current
        return (
            self.is_admin
            and cur.number > 0
            and pid not in self.removed
            and pid != self.me
            and pid in self.members
            and pid not in cur.recipients
        )

    def apply_epoch(
        self, sender: str, message_id: str, data: dict, identity: Identity, now: int, frame: bytes = b""
    ) -> EpochApplied:
        if sender not in self.admins:
            raise ControlError("only an admin starts a key epoch")
        n = data["epoch"]
        self.sealed_under[message_id] = n
        if len(self.sealed_under) > 1_000:
            self.sealed_under.pop(next(iter(self.sealed_under)))
        out = EpochApplied(n, sender, tuple(data["removed"]))
        ahead = n > self.current.number
        if data["removed"] and n > self.cut:
            # admitted: its recipients, and who joined with its key or a later one; any other member we knew
            # (a join under an older key we took before we knew of the cut) is no member any more
            self.cut = n
            self.admitted = set(data["keys"]) | {p for p, e in self.joined_under.items() if e >= n}
            self.members = {p: x for p, x in self.members.items() if p in self.admitted or p == self.me}
        elif n >= self.cut:
            self.admitted |= set(data["keys"])
        for pid in data["removed"]:
            self.removed.setdefault(pid, n)
            self.members.pop(pid, None)
        for pid in data["out"]:  # removed in earlier epochs (news to a member who joined since)
            self.removed.setdefault(pid, 0)
            self.members.pop(pid, None)
        out.removed_me = self.me in self.removed
        box = data["keys"].get(self.me)
        known = next((e for e in self.epochs if e.number == n and e.message_id == message_id), None)
        if box is not None and known is None:
            try:
                secret = open_for_member(identity, data["e"], box, n, self.base.channel_binding)
            except CryptoError as exc:
                raise ControlError(f"epoch {n}: {exc}") from None
            same = next((e for e in self.epochs if e.secret == secret), None)
            if same is not None:  # a grant of a key we hold (or the invite's): learn its message and members
                out.grant = bool(same.message_id) and same.message_id != message_id
                if not same.message_id:
                    same.message_id, same.author, same.frame = message_id, sender, frame
                same.recipients = same.recipients | frozenset(data["keys"])
                out.mine = True
            else:
                out.mine = True
                out.switched = self._add(
                    Epoch(n, secret, message_id, sender, frozenset(data["keys"]), None, frame), now
                )
        elif known is not None:
            known.recipients = known.recipients | frozenset(data["keys"])
            out.mine = True
        else:
            for e in self.epochs:  # a grant to someone else of a key we hold: they have it now
                if e.number == n and e.author == sender and e.message_id:
                    e.recipients = e.recipients | frozenset(data["keys"])
        if ahead and not out.mine and not out.removed_me:
            self.locked_out = max(self.locked_out, n)
        # a tie we lost: the winner's key reached members one of our epochs removed
        cur = self.current
        for e in self.epochs:
            if e is not cur and e.number == cur.number and e.author == self.me:
                leaked = tuple(sorted(p for p in cur.recipients if self.removed.get(p, 1 << 62) <= e.number))
                if leaked:
                    out.redo = leaked
        return out

    def new_epoch(self, identity: Identity, remove=()) -> dict:
        """The data of an epoch message starting the next epoch without ``remove`` (an admin's)."""
        if not self.is_admin:
            raise ControlError("only an admin can change the channel key")
        gone = set(remove) | set(self.removed)
        members = {p: x for p, x in self.members.items() if p not in gone}
        members[self.me] = exchange_public(identity)
        n = self.current.number + 1
        eph, boxes = seal_to_members(new_epoch_secret(), n, self.base.channel_binding, members)
        return {
            "epoch": n,
            "why": "kick" if remove else "rekey",
            "removed": sorted(set(remove)),
            "out": sorted(self.removed),
            "e": eph.hex(),
            "keys": {p: b.hex() for p, b in boxes.items()},
        }

    def grant_data(self, identity: Identity, pids) -> dict:
        """The data of a grant: the current key sealed to ``pids`` (members who joined after it began)."""
        cur = self.current
        members = {p: self.members[p] for p in pids if p in self.members}
        eph, boxes = seal_to_members(cur.secret, cur.number, self.base.channel_binding, members)
        return {
            "epoch": cur.number,
            "why": "grant",
            "removed": [],
            "out": sorted(self.removed),
            "e": eph.hex(),
            "keys": {p: b.hex() for p, b in boxes.items()},
        }

    # ------------------------------------------------------------ persistence

    def to_json(self) -> str:
        base = next((e for e in self.epochs if e.number == 0 and not e.secret), None)
        return json.dumps(
            {
                "admins": sorted(self.admins),
                "members": {p: x.hex() for p, x in self.members.items()},
                "removed": self.removed,
                "joined": self.joined,
                "sealed": self.sealed_under,
                "base": None if base is None else base.retired_ms,
                "base_gone": base is None,
                "base_started": None if base is None else base.started_ms,
                "cut": self.cut,
                "admitted": sorted(self.admitted),
                "locked": self.locked_out,
                "joined_under": self.joined_under,
                "left": sorted(self.left),
                "me": self.me,
                "epochs": [e.to_json() for e in self.epochs if e.secret],
            },
            sort_keys=True,
        )

    def load_json(self, text: str) -> None:
        obj = json.loads(text)
        self.admins |= set(obj.get("admins", ()))
        self.members = {p: bytes.fromhex(x) for p, x in obj.get("members", {}).items()}
        self.removed = {p: int(n) for p, n in obj.get("removed", {}).items()}
        self.joined = bool(obj.get("joined"))
        self.sealed_under = {m: int(n) for m, n in obj.get("sealed", {}).items()}
        self.cut = int(obj.get("cut", 0))
        self.admitted = {_pid(p) for p in obj.get("admitted", ())}
        self.joined_under = {_pid(p): int(n) for p, n in obj.get("joined_under", {}).items()}
        self.left = {_pid(p) for p in obj.get("left", ())}
        self.locked_out = int(obj.get("locked", 0))
        if obj.get("base_gone"):
            self.epochs = []
        elif self.epochs:
            self.epochs[0].retired_ms = obj.get("base")
            self.epochs[0].started_ms = int(obj.get("base_started") or 0)
        for e in (Epoch.from_json(o) for o in obj.get("epochs", ())):
            if not any(k.secret == e.secret for k in self.epochs):
                self.epochs.append(e)
        self._reindex()

    @staticmethod
    def read_keys(text: str) -> tuple[set[str], tuple[int, bytes] | None, set[str]]:
        """The admins, the current key epoch (None: the channel's first key) and the removed members in a saved
        state: what an invite carries."""
        obj = json.loads(text)
        admins, removed = set(obj.get("admins", ())), set(obj.get("removed", {}))
        current = [e for e in obj.get("epochs", ()) if e.get("t") is None]
        if not current:
            return admins, None, removed
        e = max((Epoch.from_json(o) for o in current), key=Epoch.rank)
        return admins, (e.number, e.secret), removed


def invite_refusal(text: str) -> str | None:
    """:meth:`Membership.invite_refusal` of the saved membership state ``text`` (what a channel's database holds,
    read with no node running)."""
    obj = json.loads(text)
    me, removed, locked = obj.get("me"), obj.get("removed", {}), obj.get("locked", 0)
    return _invite_refusal(
        me if isinstance(me, str) else None,
        removed if isinstance(removed, dict) else {},
        locked if isinstance(locked, int) else 0,
    )


def _invite_refusal(me: str | None, removed: dict, locked: int) -> str | None:
    if me is not None and me in removed:
        n = removed[me]
        return (
            "you were removed from this channel"
            + (f" (key epoch {n})" if n else "")
            + ": an invite from you would admit nobody; ask a member for one"
        )
    if locked > 0:
        return (
            f"a newer key (epoch {locked}) was not given to you: an invite from you would admit nobody; ask an "
            "admin for a new invite"
        )
    return None


def describe(kind: str, data, name_of) -> str:
    """The line a membership message shows as (``* alice ...``), from its data (not from its author's text);
    ``name_of(participant id)`` gives a nick."""
    if not isinstance(data, dict):
        return kind
    if kind == "join":
        return "joined"
    if kind == "leave":
        return "left"
    if kind == "nick":
        return f"was {data.get('from')}" if isinstance(data.get("from"), str) else "changed nick"

    def ids(value) -> list[str]:  # (shown before the rules checked it: anything may be there)
        return [name_of(p) for p in value if isinstance(p, str)][:20] if isinstance(value, (list, dict)) else []

    if kind == "admin":
        names = ids(data.get("add"))
        return f"made {_and(names)} {'an admin' if len(names) == 1 else 'admins'}"
    keys = data.get("keys")
    count = len(keys) if isinstance(keys, (dict, list)) else 0
    n = data.get("epoch")
    n = n if isinstance(n, int) else "?"
    removed = ids(data.get("removed"))
    if data.get("why") == "grant":
        return f"gave {_and(ids(keys))} the channel key (epoch {n})"
    head = f"removed {_and(removed)}: " if removed else "rotated the channel key: "
    return head + f"new key (epoch {n}) for {count} member{'s' if count != 1 else ''}"


def _and(names: list[str]) -> str:
    if len(names) <= 1:
        return "".join(names) or "nobody"
    return ", ".join(names[:-1]) + " and " + names[-1]
