"""Fuzzing: generated and mutated frames and database rows through every parser of the receive path.

Targets (each input's outcome is counted by reason; anything that raises an
exception not documented for that layer is a BUG, printed with a sample):

  open      ChannelKey.open(envelope)                -> plaintext | EnvelopeError(reason)
  decode    frame.unpack + wire.decode(node frame)   -> frame | FrameError | WireError
  receive   MessageChannel.receive(SDS frame)        -> events (Rejected(reason) for bad ones), never raises;
            the receiver lives on across inputs (tick()ed, check_invariants() every 500 inputs,
            snapshot -> restore -> snapshot round trip every 2,000)
  node      Node._on_frame(topic, seal(node frame)) on a running node (real store, real broker): frames
            sealed with the channel key (so they pass AEAD), including content signed by a member
            with mutated application payloads; after each frame the store writer is flushed and the
            node must not have failed (node.failure) nor broken its engine's invariants
  rows      a copy of a real participant database with one row mutated through sqlite3, then
            Store.open + Store.load_state + MessageChannel.restore (+ check_invariants, a tick, a
            snapshot): documented outcomes are success or StoreError (the CLI prints it as one line)
  nodestart Node.start on such a mutated copy (what `sdschat bot`/`chat` do): success, StoreError
            or TransportError, else the CLI would print a traceback

Inputs come from a seeded random mutator over a corpus of real frames (message, sync, resend,
repair answer, ephemeral; byte-level and protobuf-aware mutations), and from hypothesis
strategies (``hyp`` examples per target).

This is a test, not a measurement, so it lives with the tests: tests/reliability/test_rel_fuzz.py runs a few
thousand inputs in the default run, tests/fuzz/test_fuzz_frames.py the long run (``pytest -m slow -s tests/fuzz``).
Coverage-guided fuzzing with atheris (``pip install atheris``) is ``atheris_main``:

    PYTHONPATH=tests/support:bench .venv/bin/python -c "import fuzz_frames; fuzz_frames.atheris_main(200_000, 1)"
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

from sdschat.crypto import ChannelKey, EnvelopeError, Identity
from sdschat.node import AppPayload, Node, NodeConfig, node_channel_config, signer
from sdschat.node import events as nev
from sdschat.node.frame import FrameError, pack, unpack
from sdschat.sds import MessageChannel, Rejected, WireError, sds_pb2, wire
from sdschat.store import Store, StoreError
from sdschat.transport import TransportError

FAST = dict(
    repair_t_min_ms=300,
    repair_t_max_ms=1500,
    resend_unacknowledged_ms=400,
    resend_possibly_acknowledged_ms=1200,
    resend_max_interval_ms=3000,
    sync_interval_ms=2000,
    sync_jitter_ms=500,
)
CONFIG = node_channel_config(**FAST)
T0 = 1_763_769_600_000  # a fixed "now" for the engine-level targets


# ------------------------------------------------------------------ tally


class Tally:
    """Outcomes per target and reason; bugs with one sample each (by target, exception type, place)."""

    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self.bugs: dict[tuple, dict] = {}
        self.bug_count = 0
        #: mutated databases that restored without an error into an engine failing check_invariants()
        self.inconsistent: list[str] = []

    def ok(self, target: str, outcome: str) -> None:
        self.counts[(target, outcome)] += 1

    def bug(self, target: str, exc: BaseException | str, sample: bytes | str = b"", note: str = "") -> None:
        self.bug_count += 1
        if isinstance(exc, BaseException):
            tb = traceback.extract_tb(exc.__traceback__)
            where = next(
                (f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(tb) if "sdschat" in f.filename),
                tb[-1].name if tb else "?",
            )
            kind = type(exc).__name__
            text = str(exc).splitlines()[0][:160] if str(exc) else ""
        else:
            where, kind, text = note or "-", "check", str(exc)[:300]
        key = (target, kind, where)
        self.counts[(target, f"BUG {kind}")] += 1
        entry = self.bugs.setdefault(
            key,
            {
                "target": target,
                "type": kind,
                "where": where,
                "message": text,
                "count": 0,
                "sample": _sample(sample),
                "note": note,
            },
        )
        entry["count"] += 1

    def total(self, target: str | None = None) -> int:
        return sum(n for (t, _), n in self.counts.items() if target is None or t == target)

    def by_target(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for (t, outcome), n in sorted(self.counts.items()):
            out.setdefault(t, {})[outcome] = n
        return out

    def print(self) -> None:
        for target, outcomes in self.by_target().items():
            total = sum(outcomes.values())
            parts = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items(), key=lambda kv: -kv[1]))
            print(f"  {target:<9} {total:7d} inputs: {parts}")
        if self.inconsistent:
            print(f"  restored silently into an inconsistent engine: {len(self.inconsistent)} databases, e.g.")
            for line in self.inconsistent[:3]:
                print(f"    {line[:200]}")
        print(f"  BUGS: {self.bug_count} inputs raised, {len(self.bugs)} distinct")
        for b in self.bugs.values():
            print(
                f"    [{b['target']}] {b['type']} at {b['where']} x{b['count']}: {b['message']}"
                + (f" ({b['note']})" if b["note"] else "")
            )
            print(f"        sample: {b['sample']}")


def _sample(data: bytes | str) -> str:
    if isinstance(data, str):
        return data[:240]
    return data[:120].hex() + ("..." if len(data) > 120 else "") + f" ({len(data)} bytes)"


# ------------------------------------------------------------------ corpus


class Corpus:
    """Real frames of a 3-member channel, produced by the engine and the node's framing."""

    def __init__(self, key: ChannelKey, seed: int = 0) -> None:
        self.key = key
        rng = random.Random(seed)
        self.members = [Identity.from_private_bytes(rng.randbytes(32)) for _ in range(3)]
        self.receiver_identity = Identity.from_private_bytes(rng.randbytes(32))
        chans = {m.participant_id: MessageChannel(key.channel_id, m.participant_id, CONFIG, T0) for m in self.members}
        self.sds: list[tuple[str, str, bytes]] = []  # (reason, publisher, SDS frame)
        now = T0
        for r in range(4):
            for m in self.members:
                pid = m.participant_id
                app = AppPayload.new("msg", f"nick{pid[:4]}", f"hello {r} from {pid[:6]} ✓", now).encode()
                out = chans[pid].send(app, now, sign=signer(m, key.channel_binding))
                self.sds.append(("message", pid, out.data))
                for other, ch in chans.items():
                    if other != pid and (r + len(other)) % 3:  # some members miss some messages
                        ch.receive(out.data, now)
                now += 137
            for pid, ch in chans.items():
                now += 50
                for e in ch.tick(now + 5_000):
                    if hasattr(e, "data"):
                        self.sds.append((e.reason, pid, e.data))
        for pid, ch in chans.items():
            for e in ch.resend_now(now):
                self.sds.append(("resend", pid, e.data))
                self.sds.append(("repair", self.members[0].participant_id, e.data))  # a third party's answer
            typing = AppPayload.new("typing", "t", "", now).encode()
            m = next(x for x in self.members if x.participant_id == pid)
            self.sds.append(
                ("ephemeral", pid, ch.send_ephemeral(typing, now, sign=signer(m, key.channel_binding)).data)
            )
        self.now = now
        self.identities = {m.participant_id: m for m in self.members}
        DECODE_BINDING[0] = key.channel_binding
        self.node_frames = [self.frame(pub, data, reason) for reason, pub, data in self.sds]
        self.envelopes = [key.seal(f) for f in self.node_frames[:12]]  # a few (message frames are ~19 KB)
        self.small = [f for f in self.node_frames if len(f) < 2000]
        self.channels = chans

    def frame(self, publisher: str, sds_frame: bytes, reason: str) -> bytes:
        """A node frame signed by the member ``publisher`` (a member's frames are signed: fuzzing an unsigned
        one only tests the signature check)."""
        return pack(self.identities[publisher], self.key.channel_binding, sds_frame, reason)

    def receiver(self) -> MessageChannel:
        return MessageChannel(self.key.channel_id, self.receiver_identity.participant_id, CONFIG, T0)


# ---------------------------------------------------------------- mutators

_INTERESTING_INTS = [0, 1, -1, 2**31 - 1, 2**31, 2**32, 2**53, 2**63 - 1, 2**63, 2**64 - 1, T0, T0 * 1000]
_INTERESTING_STR = [
    "",
    "a",
    "x" * 257,
    "x" * 4096,
    "\x00",
    "é",
    "\u202e",
    "sync-",
    "../",
    "'; DROP TABLE x; --",
    "0" * 64,
    "💥" * 10,
]


def mutate_bytes(data: bytes, rng: random.Random, corpus_items: list[bytes]) -> bytes:
    """Byte-level mutations: flips, sets, inserts, deletes, truncation, splicing, varint garbage."""
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 8))):
        op = rng.randrange(9)
        n = len(b)
        if op == 0 and n:  # flip a bit
            i = rng.randrange(n)
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and n:  # set a byte
            b[rng.randrange(n)] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
        elif op == 2:  # insert bytes
            i = rng.randrange(n + 1)
            b[i:i] = rng.randbytes(rng.choice((1, 2, 4, 16, 200)))
        elif op == 3 and n:  # delete a range
            i = rng.randrange(n)
            del b[i : i + rng.choice((1, 2, 8, 100, 5000))]
        elif op == 4 and n:  # truncate
            del b[rng.randrange(n) :]
        elif op == 5 and n:  # duplicate a range
            i = rng.randrange(n)
            b[i:i] = b[i : i + rng.choice((1, 10, 100))]
        elif op == 6:  # splice with another item
            other = rng.choice(corpus_items)
            i = rng.randrange(n + 1)
            j = rng.randrange(len(other) + 1)
            b = b[:i] + bytearray(other[j:])
        elif op == 7:  # a varint of all-continuation bytes / huge length prefix
            i = rng.randrange(n + 1)
            b[i:i] = rng.choice((b"\xff" * 10, b"\x80" * 11, b"\x0a\xff\xff\xff\xff\x0f", b"\x52\xff\xff\x03"))
        elif n:  # overwrite a run
            i = rng.randrange(n)
            b[i : i + 4] = rng.randbytes(4)
    return bytes(b)


def _rand_str(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.4:
        return rng.choice(_INTERESTING_STR)
    if r < 0.7:
        return rng.randbytes(rng.randrange(1, 40)).hex()
    return "".join(
        chr(rng.choice((rng.randrange(32, 127), rng.randrange(0x80, 0x2FFF), rng.randrange(0xE000, 0x10FFFF))))
        for _ in range(rng.randrange(0, 20))
    )


def _rand_entry(pb_entry, rng: random.Random, known: list[str]) -> None:
    pb_entry.message_id = rng.choice(known) if known and rng.random() < 0.5 else _rand_str(rng)
    if rng.random() < 0.5:
        pb_entry.sender_id = _rand_str(rng)
    if rng.random() < 0.5:
        pb_entry.retrieval_hint = rng.randbytes(rng.choice((0, 8, 32, 1000)))


def mutate_pb(data: bytes, rng: random.Random, known_ids: list[str], channel_id: str) -> bytes:
    """Protobuf-aware mutation of an SDS frame: valid encoding, hostile field values."""
    pb = sds_pb2.Message()
    try:
        pb.ParseFromString(data)
    except Exception:
        return data
    for _ in range(rng.choice((1, 1, 2, 3))):
        op = rng.randrange(12)
        if op == 0:
            pb.message_id = _rand_str(rng) if rng.random() < 0.7 else rng.choice(known_ids or ["x"])
        elif op == 1:
            pb.sender_id = _rand_str(rng)
        elif op == 2:
            pb.channel_id = channel_id if rng.random() < 0.7 else _rand_str(rng)
        elif op == 3:
            if rng.random() < 0.2:
                pb.ClearField("lamport_timestamp")
            else:
                v = rng.choice(_INTERESTING_INTS + [T0 + rng.randrange(-(10**6), 10**6)])
                pb.lamport_timestamp = v % 2**64
        elif op == 4:
            del pb.causal_history[:]
            for _ in range(rng.choice((0, 1, 10, 11, 257))):
                _rand_entry(pb.causal_history.add(), rng, known_ids)
        elif op == 5:
            _rand_entry(pb.causal_history.add(), rng, known_ids)
        elif op == 6:
            if rng.random() < 0.3:
                pb.ClearField("bloom_filter")
            else:
                n = rng.choice((0, 1, 18752, 18751, 18753, 100))
                pb.bloom_filter = rng.choice((b"\xff" * n, b"\x00" * n, rng.randbytes(n)))
        elif op == 7:
            del pb.repair_request[:]
            for _ in range(rng.choice((1, 3, 33))):
                _rand_entry(pb.repair_request.add(), rng, known_ids)
        elif op == 8:
            if rng.random() < 0.3:
                pb.ClearField("content")
            else:
                pb.content = rng.choice(
                    (b"", rng.randbytes(rng.randrange(1, 300)), mutate_bytes(pb.content, rng, [pb.content or b"x"]))
                )
        elif op == 9:  # swap in a real id for the message id (duplicate / collision)
            if known_ids:
                pb.message_id = rng.choice(known_ids)
        elif op == 10 and pb.causal_history:
            # history names the message itself (a self-loop) or a cycle partner
            pb.causal_history[0].message_id = pb.message_id
        else:
            pb.sender_id = rng.choice(known_ids or ["s"])[:16]
    return pb.SerializeToString()


#: the identity of the node under fuzzing (so some epoch messages carry a box that really opens for it)
TARGET: dict[str, Identity] = {}


def membership_data(rng: random.Random) -> tuple[str, object]:
    """A membership message's kind and data (join, admin, epoch), well-formed or not."""
    pid = lambda: rng.randbytes(16).hex()  # noqa: E731
    kind = rng.choice(("join", "admin", "epoch"))
    if kind == "join":
        return kind, {"x": rng.choice((rng.randbytes(32).hex(), "00" * 32, "zz", None, 5, rng.randbytes(31).hex()))}
    if kind == "admin":
        return kind, {"add": rng.choice(([pid()], [], ["x"], None, [pid()] * 200, [1, 2]))}
    keys = {pid(): rng.randbytes(48).hex() for _ in range(rng.randrange(0, 4))}
    data = {
        "epoch": rng.choice((1, 2, 0, -1, 2**63, True, "1")),
        "why": rng.choice(("kick", "rekey", "grant", "x")),
        "removed": rng.choice(([], [pid()], ["nope"], None)),
        "out": rng.choice(([], [pid()], "x")),
        "e": rng.choice((rng.randbytes(32).hex(), "", "00" * 32, None)),
        "keys": keys,
    }
    target = TARGET.get("identity")
    if target is not None and rng.random() < 0.3:  # a box that opens for the node: a real key change
        from sdschat.crypto.epochs import exchange_public, seal_to_members

        n = rng.choice((1, 2, 3))
        eph, boxes = seal_to_members(
            rng.randbytes(32), n, TARGET["binding"], {target.participant_id: exchange_public(target)}
        )
        data.update(epoch=n, e=eph.hex(), keys={p: b.hex() for p, b in boxes.items()}, why="rekey")
    if rng.random() < 0.3:
        data.pop(rng.choice(list(data)))
    return kind, data


def mutate_payload(rng: random.Random) -> bytes:
    """A hostile application payload (it will be validly signed by a member)."""
    base = {"v": 1, "k": "msg", "nick": "mallory", "text": "hi", "ts": T0, "n": "abcd1234"}
    r = rng.randrange(17)
    if r >= 14:  # membership messages (applied by members only from an admin: corpus member 0 is one)
        base["k"], base["d"] = membership_data(rng)
        if r == 16:
            base["d"] = rng.choice(([], "x", None, 1, {"epoch": {"nested": [1] * 1000}}))
        return json.dumps(base).encode()
    if r == 0:
        return b"[" * rng.choice((10, 1000, 100_000)) + b"]" * rng.choice((0, 10))
    if r == 1:
        return b'{"a":' * rng.choice((100, 10_000, 200_000)) + b"1" + b"}" * 5
    if r == 2:
        base["nick"] = rng.choice(("\ud800", "a\udfffb", "\x00", "\u202egnp.exe", "x" * 100_000))
    elif r == 3:
        base["text"] = rng.choice(("\udcff", "x" * 16_385, "\x1b[2J\x1b[31mred", "line\nline"))
    elif r == 4:
        base["ts"] = rng.choice((-1, 2**63, 2**64, 1.5, "1", None, True, 10**400))
    elif r == 5:
        base["v"] = rng.choice((0, 2, True, "1", None, 2**70, -1))
    elif r == 6:
        base["k"] = rng.choice(("", "typing", "me", "x", None, 1, ["msg"]))
    elif r == 7:
        base["n"] = rng.choice((None, 5, "\ud800", "x" * 10_000))
    elif r == 8:
        base[rng.choice(list(base))] = rng.choice(([], {}, [[[]]], None, 1e308, -0.0))
    elif r == 9:
        return json.dumps(base).encode()[: rng.randrange(1, 60)]
    elif r == 10:
        return rng.randbytes(rng.randrange(1, 100))  # (empty content is a sync: not a payload)
    elif r == 11:
        return b'{"v":1,"k":"msg","nick":"a","text":"' + b"\\ud800" + b'","ts":1}'
    elif r == 12:
        return b'{"v":1,"k":"msg","nick":"a","text":"x","ts":1' + b"0" * 5000 + b"}"
    else:
        base.pop(rng.choice(list(base)))
    return json.dumps(base, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")


def member_frame(corpus: Corpus, rng: random.Random, now: int) -> tuple[bytes, str]:
    """An SDS content frame from a member, validly signed, around a hostile app payload."""
    member = rng.choice(corpus.members)
    body = mutate_payload(rng)
    sign = signer(member, corpus.key.channel_binding)
    ch = MessageChannel(corpus.key.channel_id, member.participant_id, CONFIG, now)
    ephemeral = rng.random() < 0.15
    out = ch.send_ephemeral(body, now, sign=sign) if ephemeral else ch.send(body, now, sign=sign)
    frame = pack(member, corpus.key.channel_binding, out.data, "ephemeral" if ephemeral else "message")
    return frame, body[:80].decode("utf-8", "replace")


# ----------------------------------------------------------------- targets


def target_open(key: ChannelKey, data: bytes, tally: Tally) -> None:
    try:
        key.open(data)
    except EnvelopeError as exc:
        tally.ok("open", exc.reason)
    except Exception as exc:  # noqa: BLE001 - the point
        tally.bug("open", exc, data)
    else:
        tally.ok("open", "opened")


#: the channel binding target_decode checks frame signatures against (set from the corpus)
DECODE_BINDING = [b""]


def target_decode(data: bytes, tally: Tally) -> None:
    try:
        _, _, frame = unpack(data, DECODE_BINDING[0])
        wire.decode(frame)
    except FrameError:
        tally.ok("decode", "frame_error")
    except WireError:
        tally.ok("decode", "wire_error")
    except Exception as exc:  # noqa: BLE001
        tally.bug("decode", exc, data)
    else:
        tally.ok("decode", "decoded")


class ReceiveTarget:
    """One long-lived receiver; time advances; periodic invariant and persistence round-trip checks."""

    def __init__(self, corpus: Corpus, tally: Tally) -> None:
        self.corpus = corpus
        self.tally = tally
        self.channel = corpus.receiver()
        self.now = corpus.now
        self.n = 0

    def __call__(self, data: bytes) -> None:
        self.n += 1
        self.now += 7
        try:
            events = self.channel.receive(data, self.now)
        except Exception as exc:  # noqa: BLE001
            self.tally.bug("receive", exc, data)
            self.channel = self.corpus.receiver()  # a fresh one: the old may be half-updated
            return
        rejected = [e for e in events if isinstance(e, Rejected)]
        if rejected:
            self.tally.ok("receive", f"rejected:{rejected[0].reason}")
        elif events:
            self.tally.ok("receive", "accepted:" + type(events[-1]).__name__)
        else:
            self.tally.ok("receive", "ignored(dup/echo)")
        if self.n % 50 == 0:
            try:
                self.channel.tick(self.now + 3_000)
            except Exception as exc:  # noqa: BLE001
                self.tally.bug("receive", exc, data, "tick() after this input")
                self.channel = self.corpus.receiver()
        if self.n % 500 == 0:
            problems = self.channel.check_invariants()
            if problems:
                self.tally.bug("receive", f"check_invariants: {problems[:3]}", data, "invariants")
                self.channel = self.corpus.receiver()
        if self.n % 2000 == 0:
            self.round_trip(data)

    def round_trip(self, data: bytes = b"") -> None:
        try:
            snap = self.channel.snapshot()
            again = MessageChannel.restore(snap, CONFIG).snapshot()
        except Exception as exc:  # noqa: BLE001
            self.tally.bug("receive", exc, data, "snapshot/restore")
            return
        if again != snap:
            self.tally.bug("receive", "snapshot -> restore -> snapshot differs", data, "round trip")


class NodeTarget:
    """A running Node; frames go straight into its receive callback (as MQTT would deliver them)."""

    def __init__(self, corpus: Corpus, tally: Tally, url: str, workdir: Path) -> None:
        self.corpus = corpus
        self.tally = tally
        self.url = url
        self.workdir = workdir
        self.node: Node | None = None
        self.generation = 0
        self.rejections: Counter = Counter()

    async def start(self) -> None:
        self.generation += 1
        cfg = NodeConfig(
            "fuzz",
            self.corpus.key,
            self.workdir / f"fuzz-node-{self.generation}.db",
            self.url,
            channel_config=CONFIG,
            membership=True,
            admins=(self.corpus.members[0].participant_id,),
        )
        self.node = await Node.start(cfg)
        TARGET.update(identity=self.node.identity, binding=self.corpus.key.channel_binding)

        def listen(e):
            if isinstance(e, nev.FrameRejected):
                self.rejections[e.reason] += 1
            elif isinstance(e, nev.NodeProblem):  # the node's own trouble (a task failed, its storage)
                self.rejections[e.what] += 1

        self.node.add_listener(listen)

    async def stop(self) -> None:
        if self.node is not None:
            try:
                await self.node.stop()
            except Exception as exc:  # noqa: BLE001
                self.tally.bug("node", exc, b"", "Node.stop()")
            self.node = None

    async def feed(self, plain: bytes, label: str = "") -> None:
        node = self.node
        before = Counter(self.rejections)
        envelope = self.corpus.key.seal(plain)
        try:
            node._on_frame(node.key.topic, envelope)
        except Exception as exc:  # noqa: BLE001
            self.tally.bug("node", exc, label or plain, "Node._on_frame raised (the transport logs a traceback)")
            await self._replace()
            return
        try:
            await asyncio.wait_for(node.writer.flush(), 30)
        except TimeoutError:
            self.tally.bug("node", "store writer flush did not return in 30 s", label or plain, "hang")
            await self._replace()
            return
        except Exception:  # noqa: BLE001 - reported through node.failure below
            pass
        if node.failure:
            self.tally.bug(
                "node",
                f"node failed after this frame: {node.failure}",
                label or plain,
                "persistence broken: `sdschat bot` exits, the chat stops saving",
            )
            await self._replace()
            return
        diff = self.rejections - before
        if diff.get("internal"):  # a node task failed (a membership change it started, say)
            self.tally.bug("node", "a node task failed after this frame", label or plain, "NodeProblem internal")
            return
        self.tally.ok("node", f"rejected:{next(iter(diff))}" if diff else "accepted")

    async def check(self) -> None:
        problems = self.node.channel.check_invariants()
        if problems:
            self.tally.bug("node", f"check_invariants: {problems[:3]}", b"", "invariants")

    async def _replace(self) -> None:
        await self.stop()
        await self.start()


async def fuzz_node(corpus: Corpus, url: str, n: int, rng: random.Random, tally: Tally, workdir: Path) -> None:
    t = NodeTarget(corpus, tally, url, workdir)
    await t.start()
    try:
        items = corpus.node_frames
        ids = [m for _, _, d in corpus.sds for m in [wire.decode(d).message_id]]
        for i in range(n):
            r = rng.random()
            if r < 0.35:
                plain, label = member_frame(corpus, rng, int(time.time() * 1000))
            elif r < 0.7:
                reason, pub, data = rng.choice(corpus.sds)
                plain = corpus.frame(pub, mutate_pb(data, rng, ids, corpus.key.channel_id), reason)
                label = ""
            else:
                plain = mutate_bytes(rng.choice(items), rng, items)
                label = ""
            await t.feed(plain, label)
            if i % 200 == 199:
                await t.check()
        await t.check()
    finally:
        await t.stop()


# -------------------------------------------------------------------- rows


async def make_template(workdir: Path, url: str) -> tuple[Path, ChannelKey]:
    """A real participant database with something in every engine table: two nodes, one very lossy."""
    key = ChannelKey.generate("fuzz-rows")
    a = await Node.start(NodeConfig("ann", key, workdir / "tmpl-ann.db", url, channel_config=CONFIG))
    b = await Node.start(
        NodeConfig(
            "bob",
            key,
            workdir / "tmpl-bob.db",
            url,
            channel_config=CONFIG,
            impairment={"loss_in": 0.5, "loss_out": 0.5},
            seed=5,
        )
    )
    try:
        for i in range(12):
            await a.send_text(f"ann {i} ✓")
            await b.send_text(f"bob {i}")
            await asyncio.sleep(0.03)
        await asyncio.sleep(1.2)  # some resends, syncs, repair requests and answers
        for i in range(6):
            await a.send_text(f"late {i}")
    finally:
        await a.stop()
        await b.stop()
    return workdir / "tmpl-bob.db", key


_ROW_TABLES = (
    "channels",
    "sds_log",
    "sds_outgoing",
    "sds_incoming",
    "sds_missing",
    "sds_lost",
    "sds_repair_requests",
    "sds_repair_responses",
    "sds_cache",
    "sds_bloom_ids",
    "sds_recent_syncs",
    "messages",
    "participants",
    "identity",
    "kv",
)
_PK = {
    "channels": ["channel_id"],
    "sds_log": ["channel_id", "message_id"],
    "participants": ["participant_id"],
    "kv": ["key"],
}


def _rand_value(rng: random.Random, old):
    r = rng.randrange(16)
    if r == 0:
        return None
    if r == 1:
        return rng.choice(_INTERESTING_INTS[:-1] + [-(2**63), -1, 10**18])
    if r == 2:
        return rng.choice((1.5, -0.0, float("inf"), 1e300))
    if r == 3:
        return rng.choice(
            (
                "",
                "x",
                "not json",
                "[",
                "{}",
                "[1,2]",
                "[[1]]",
                '[["a",null,"zz"]]',
                '[["a"]]',
                '[["a",null,null,4]]',
                "null",
                '"str"',
                "[null]",
                "[1]",
                '{"a":1}',
                "[" * 2000,
            )
        )
    if r == 4:
        return rng.randbytes(rng.choice((0, 1, 16, 64)))
    if r == 5:
        return _rand_str(rng)
    if isinstance(old, int) and not isinstance(old, bool):
        return old + rng.choice((-1, 1, -old, 2**40, -(2**40)))
    if isinstance(old, str):
        if old.startswith("[") and rng.random() < 0.6:  # JSON: mutate structurally
            try:
                v = json.loads(old)
                if isinstance(v, list) and v:
                    i = rng.randrange(len(v))
                    v[i] = rng.choice((None, 1, "x", [], [None], ["id", None, "0g"], v[i]))
                    if rng.random() < 0.3:
                        v.append(v[0])
                return json.dumps(v)
            except ValueError:
                pass
        return mutate_bytes(old.encode(), rng, [b"x"]).decode("utf-8", "replace")
    if isinstance(old, bytes):
        return mutate_bytes(old, rng, [old or b"x"])
    return _rand_str(rng)


def mutate_db(db: Path, rng: random.Random) -> str | None:
    """Mutate one row of a random engine/app table in place; returns a description (None: nothing to do)."""
    con = sqlite3.connect(db, isolation_level=None)
    try:
        tables = [t for t in _ROW_TABLES if con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]]
        table = rng.choice(tables)
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        pk = _PK.get(table)
        keycols = pk if pk else ["rowid"]
        rows = con.execute(f"SELECT {', '.join(keycols)}, * FROM {table}").fetchall()
        row = rng.choice(rows)
        where = " AND ".join(f"{c} IS ?" for c in keycols)
        keyvals = row[: len(keycols)]
        values = dict(zip(cols, row[len(keycols) :]))
        if rng.random() < 0.1:
            con.execute(f"DELETE FROM {table} WHERE {where}", keyvals)
            return f"{table}: deleted row {keyvals}"
        if rng.random() < 0.1 and table not in _PK and table != "identity":
            # a duplicate row with a fresh seq (UNIQUE constraints usually refuse it)
            others = [c for c in cols if c != "seq"]
            try:
                con.execute(
                    f"INSERT INTO {table} ({', '.join(others)}) SELECT {', '.join(others)} FROM {table} WHERE {where}",
                    keyvals,
                )
                return f"{table}: duplicated row {keyvals}"
            except sqlite3.Error:
                pass
        col = rng.choice(cols)
        new = _rand_value(rng, values[col])
        try:
            con.execute(f"UPDATE {table} SET {col} = ? WHERE {where}", (new, *keyvals))
        except (sqlite3.Error, OverflowError):
            return None  # the schema refused it (NOT NULL, UNIQUE...): not an input
        return f"{table}.{col}: {values[col]!r:.60} -> {new!r:.80}"
    finally:
        con.close()


async def _restore_check(db: Path, cid: str) -> str:
    """Open, load, restore, check, tick, snapshot. Returns an outcome; raises what a caller would see."""
    store = await Store.open(db, create=False)
    try:
        state = await store.load_state(cid)
        if state is None:
            return "no_state"
        ch = MessageChannel.restore(state, CONFIG, journal=True)
        problems = ch.check_invariants()
        ch.tick(state.last_activity + 60_000)
        ch.snapshot()
        async for _ in store.iter_messages(cid):
            pass
        return f"restored_inconsistent:{problems[0].split(' ')[0]}" if problems else "restored"
    finally:
        await store.close()


async def fuzz_rows(
    template: Path,
    n: int,
    rng: random.Random,
    tally: Tally,
    workdir: Path,
    node_url: str | None = None,
    node_every: int = 10,
    key: ChannelKey | None = None,
) -> None:
    con = sqlite3.connect(template)
    cid = con.execute("SELECT channel_id FROM channels").fetchone()[0]
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    scratch = workdir / "rows"
    scratch.mkdir(exist_ok=True)
    done = 0
    attempts = 0
    while done < n and attempts < n * 5:
        attempts += 1
        db = scratch / f"m{done % 4}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(template, db)
        os.chmod(db, 0o600)
        changes = [mutate_db(db, rng) for _ in range(rng.choice((1, 1, 1, 2, 3)))]
        changes = [c for c in changes if c]
        if not changes:
            continue
        what = "; ".join(changes)
        done += 1
        raised = False
        try:
            outcome = await _restore_check(db, cid)
        except StoreError:
            tally.ok("rows", "store_error")
        except Exception as exc:  # noqa: BLE001
            raised = True
            tally.bug("rows", exc, what, "Store.load_state / MessageChannel.restore raised")
        else:
            # restored without complaint but the engine is inconsistent: counted apart (a finding, not a crash)
            tally.ok(
                "rows", "INCONSISTENT " + outcome.split(":", 1)[1] if outcome.startswith("restored_inc") else outcome
            )
            if outcome.startswith("restored_inc"):
                tally.inconsistent.append(f"{what} -> {outcome}")
        if node_url and key is not None and (raised or done % node_every == 0):
            await _node_start_check(db, key, node_url, what, tally)


async def _node_start_check(db: Path, key: ChannelKey, url: str, what: str, tally: Tally) -> None:
    node = None
    try:
        node = await Node.start(NodeConfig("bob", key, db, url, channel_config=CONFIG))
    except (StoreError, TransportError):
        tally.ok("nodestart", "clean_error")
    except Exception as exc:  # noqa: BLE001
        tally.bug("nodestart", exc, what, "Node.start on the mutated database: `sdschat bot` prints a traceback")
    else:
        tally.ok("nodestart", "started")
    finally:
        if node is not None:
            try:
                await node.stop()
            except Exception as exc:  # noqa: BLE001
                tally.bug("nodestart", exc, what, "Node.stop")


# -------------------------------------------------------------- hypothesis


def hypothesis_phase(corpus: Corpus, receive: ReceiveTarget, tally: Tally, examples: int) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    cfg = settings(
        max_examples=examples, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    key = corpus.key
    ids = [wire.decode(d).message_id for _, _, d in corpus.sds]
    text = st.text(max_size=40)
    entry = st.builds(
        wire.HistoryEntry,
        st.one_of(st.sampled_from(ids), text.filter(bool)),
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), text),
    )
    frames = st.builds(
        wire.Message,
        sender_id=st.one_of(st.sampled_from([m.participant_id for m in corpus.members]), text),
        message_id=st.one_of(st.sampled_from(ids), text),
        channel_id=st.one_of(st.just(key.channel_id), text),
        lamport_timestamp=st.one_of(st.none(), st.integers(0, 2**64 - 1), st.integers(T0 - 10**6, T0 + 10**6)),
        causal_history=st.lists(entry, max_size=12),
        bloom_filter=st.one_of(st.none(), st.binary(max_size=64), st.just(b"\xff" * 18752), st.just(bytes(18752))),
        repair_request=st.lists(entry, max_size=4),
        content=st.one_of(st.none(), st.binary(max_size=200)),
    )

    @cfg
    @given(frames)
    def sds(msg):
        try:
            data = wire.encode(msg)
        except WireError:
            tally.ok("hypothesis", "unencodable")
            return
        target_decode(corpus.frame(corpus.members[0].participant_id, data, "message"), tally)
        receive(data)

    @cfg
    @given(
        st.one_of(
            st.binary(max_size=300),
            st.sampled_from(corpus.envelopes).flatmap(
                lambda env: st.tuples(st.integers(0, len(env) - 1), st.integers(1, 255)).map(
                    lambda t: env[: t[0]] + bytes([env[t[0]] ^ t[1]]) + env[t[0] + 1 :]
                )
            ),
        )
    )
    def envelopes(data):
        target_open(key, data, tally)

    @cfg
    @given(st.binary(max_size=400))
    def node_frames(data):
        target_decode(data, tally)
        target_decode(b"\x01\x00\x02ab" + data, tally)

    sds()
    envelopes()
    node_frames()


# -------------------------------------------------------------------- main


async def run_async(
    frames: int, rows: int, hyp: int, seed: int, workdir: Path, url: str | None, node_share: float = 0.15
) -> Tally:
    rng = random.Random(seed)
    tally = Tally()
    key = ChannelKey(bytes(range(32)), "fuzz")
    corpus = Corpus(key, seed)
    receive = ReceiveTarget(corpus, tally)
    ids = [wire.decode(d).message_id for _, _, d in corpus.sds]
    n_node = int(frames * node_share) if url else 0
    n_rest = frames - n_node
    n_open, n_decode = n_rest // 4, n_rest // 4
    n_receive = n_rest - n_open - n_decode
    for _ in range(n_open):
        env = rng.choice(corpus.envelopes)
        target_open(key, mutate_bytes(env, rng, corpus.envelopes) if rng.random() < 0.9 else env, tally)
    items = corpus.node_frames
    for _ in range(n_decode):
        target_decode(mutate_bytes(rng.choice(items), rng, items), tally)
    for _ in range(n_receive):
        reason, pub, data = rng.choice(corpus.sds)
        r = rng.random()
        if r < 0.5:
            data = mutate_pb(data, rng, ids, key.channel_id)
        elif r < 0.9:
            data = mutate_bytes(data, rng, [d for _, _, d in corpus.sds])
        receive(data)
    receive.round_trip()
    if hyp:
        hypothesis_phase(corpus, receive, tally, hyp)
    if url and n_node:
        await fuzz_node(corpus, url, n_node, rng, tally, workdir)
    if url and rows:
        template, template_key = await make_template(workdir, url)
        await fuzz_rows(template, rows, rng, tally, workdir, node_url=url, key=template_key)
    return tally


def run(
    frames: int = 100_000,
    rows: int = 2_000,
    hyp: int = 2_000,
    seed: int = 1,
    workdir: Path | None = None,
    url: str | None = None,
    node_share: float = 0.15,
) -> Tally:
    """Fuzz everything; returns the tally. ``url``: a broker for the node and rows targets (None: skip them)."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="sdschat-fuzz-"))
    return asyncio.run(run_async(frames, rows, hyp, seed, workdir, url, node_share))


def atheris_main(runs: int, seed: int) -> int:
    try:
        import atheris
    except ImportError:
        print("atheris is not installed: .venv/bin/pip install atheris", file=sys.stderr)
        return 2
    tally = Tally()
    key = ChannelKey(bytes(range(32)), "fuzz")
    corpus = Corpus(key, seed)
    receive = ReceiveTarget(corpus, tally)

    seen = [0]

    def one(data: bytes) -> None:
        if not data:
            return
        sel, body = data[0] % 3, data[1:]
        if sel == 0:
            target_open(key, body, tally)
        elif sel == 1:
            target_decode(body, tally)
        else:
            receive(body)
        seen[0] += 1
        if tally.bug_count or seen[0] % 20_000 == 0 or seen[0] == runs:
            tally.print()  # libFuzzer exits without running atexit handlers: report as we go
            sys.stdout.flush()
        if tally.bug_count:
            raise RuntimeError("bug found")

    corpus_dir = Path(tempfile.mkdtemp(prefix="sdschat-atheris-"))
    for i, (_, _, d) in enumerate(corpus.sds):
        (corpus_dir / f"sds{i}").write_bytes(b"\x02" + d)
    for i, f in enumerate(corpus.node_frames[:10]):
        (corpus_dir / f"node{i}").write_bytes(b"\x01" + f)
    atheris.instrument_all()
    atheris.Setup([sys.argv[0], f"-runs={runs}", f"-seed={seed}", "-max_len=40000", str(corpus_dir)], one)
    atheris.Fuzz()
    return 0
