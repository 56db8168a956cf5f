"""Interop: two sdschat engines and one @waku/sds 0.0.8 participant in one channel.

The js participant is ``tests/interop/waku_peer.mjs`` (a long-running node
process driven over stdin/stdout, one JSON object per line). Frames are relayed
by a tiny in-test broadcast hub; loss is explicit (``drop=``). Clocks are real
(``time.time()``) because @waku/sds reads ``Date.now()``; SDS-R uses
T_min = 50 ms / T_max = 200 ms on every participant, with real sleeps.

Setup: ``npm ci --prefix tests/interop`` (needs node >= 20). Without it these
tests FAIL (they are never skipped).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from sdschat.sds import (
    Acknowledged,
    ChannelConfig,
    Delivered,
    EphemeralReceived,
    HistoryEntry,
    Message,
    MessageChannel,
    Missing,
    Outgoing,
    PossiblyAcknowledged,
    RepairConfig,
    RepairRequested,
    RepairScheduled,
    RepairServed,
    SyncReceived,
    message_id,
    wire,
)

HERE = Path(__file__).resolve().parent
PEER_SCRIPT = HERE / "waku_peer.mjs"
NODE_MODULES = HERE / "node_modules"
INSTALL_HINT = "run `npm ci --prefix tests/interop` (from the repository root) to install @waku/sds 0.0.8"

T_MIN_MS = 50
T_MAX_MS = 200
REPAIR_WAIT_S = (T_MAX_MS + 60) / 1000  # past every T_req / T_resp

# @waku/sds event names (MessageChannelEvent values)
W_SENT = "sds:out:message-sent"
W_DELIVERED = "sds:in:message-delivered"
W_RECEIVED = "sds:in:message-received"
W_ACKED = "sds:out:message-acknowledged"
W_POSSIBLY_ACKED = "sds:out:message-possibly-acknowledged"
W_MISSING = "sds:in:message-missing"
W_SYNC_SENT = "sds:out:sync-sent"
W_SYNC_RECEIVED = "sds:in:sync-received"
W_ERROR = "sds:error-task"
W_REPAIR_REQUEST_SENT = "sds:repair:request-sent"
W_REPAIR_REQUEST_RECEIVED = "sds:repair:request-received"
W_REPAIR_RESPONSE_SENT = "sds:repair:response-sent"
# @waku/sds 0.0.8 dispatches these two under the bare names below, not under
# MessageChannelEvent.RepairRequestQueued / RepairResponseQueued
# ("sds:repair:request-queued" / "sds:repair:response-queued").
W_REPAIR_REQUEST_QUEUED = "RepairRequestQueued"
W_REPAIR_RESPONSE_QUEUED = "RepairResponseQueued"


def now_ms() -> int:
    return int(time.time() * 1000)


# ------------------------------------------------------------------ js driver


class WakuError(RuntimeError):
    pass


class WakuPeer:
    """One @waku/sds participant in a node subprocess (see waku_peer.mjs)."""

    def __init__(self, channel_id: str, participant_id: str, options: dict | None = None, timeout: float = 10.0):
        node = shutil.which("node")
        if node is None:
            pytest.fail(f"node is not on PATH; install Node.js >= 20, then {INSTALL_HINT}")
        if not (NODE_MODULES / "@waku" / "sds" / "package.json").is_file():
            pytest.fail(f"{NODE_MODULES} has no @waku/sds: {INSTALL_HINT}")
        self.participant_id = participant_id
        self.timeout = timeout
        self.events: list[dict] = []  # every event seen, in order
        self.stray: list[dict] = []  # lines that answered no command (uncaught errors)
        self._next_id = 0
        env = {k: v for k, v in os.environ.items() if k != "DEBUG"}  # keep @waku's debug logger quiet
        self._proc = subprocess.Popen(
            [node, str(PEER_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=env,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._pump, args=(self._proc.stdout, self._lines.put), daemon=True).start()
        threading.Thread(target=self._pump, args=(self._proc.stderr, self._stderr.append), daemon=True).start()
        pong = self.call("ping")
        assert pong["version"] == "0.0.8", pong
        self.call("init", channel=channel_id, participant=participant_id, options=options or {})

    @staticmethod
    def _pump(stream, put) -> None:
        for line in stream:
            put(line)
        put(None)

    def call(self, cmd: str, **fields) -> dict:
        """Send one command; return its reply (raise WakuError on an error reply)."""
        reply = self.call_raw(cmd, **fields)
        if "error" in reply:
            raise WakuError(f"{cmd}: {reply['error']}")
        return reply

    def call_raw(self, cmd: str, **fields) -> dict:
        self._next_id += 1
        rid = self._next_id
        line = json.dumps({"cmd": cmd, "id": rid, **fields})
        try:
            self._proc.stdin.write(line + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise WakuError(f"js peer is gone ({exc}); stderr:\n{''.join(self._stderr)}") from None
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                raw = self._lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise WakuError(f"no reply to {cmd} within {self.timeout}s; stderr:\n{''.join(self._stderr)}") from None
            if raw is None:
                raise WakuError(f"js peer exited (rc={self._proc.poll()}); stderr:\n{''.join(self._stderr)}")
            reply = json.loads(raw)
            self.events.extend(reply.get("events", ()))
            if reply.get("id") == rid:
                return reply
            self.stray.append(reply)

    # conveniences
    def send(self, payload: bytes, hint: bytes | None = None) -> tuple[str, bytes, list[dict]]:
        fields = {"payload_hex": payload.hex()}
        if hint is not None:
            fields["hint_hex"] = hint.hex()
        r = self.call("send", **fields)
        return r["message_id"], bytes.fromhex(r["frame_hex"]), r["events"]

    def receive(self, frame: bytes) -> list[dict]:
        return self.call("receive", frame_hex=frame.hex())["events"]

    def state(self) -> dict:
        return self.call("state")

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self.call_raw("exit")
            except WakuError:
                pass
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            try:
                stream.close()
            except OSError:
                pass


def types(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


def of_type(events: list[dict], type_: str) -> list:
    return [e["detail"] for e in events if e["type"] == type_]


def of(events: list, cls: type) -> list:
    return [e for e in events if isinstance(e, cls)]


# ------------------------------------------------------------------------ hub


class Hub:
    """Broadcast medium for two Python engines and one js peer; loss only where asked."""

    def __init__(self, channel_id: str, py: dict[str, MessageChannel], js: WakuPeer):
        self.channel_id = channel_id
        self.py = py
        self.js = js
        self.js_id = js.participant_id
        self.py_events: dict[str, list] = {name: [] for name in py}  # everything each engine emitted

    def _py_in(self, name: str, events: list) -> list:
        self.py_events[name].extend(events)
        return events

    def broadcast(self, sender: str, frame: bytes, drop: tuple[str, ...] = ()) -> dict[str, list]:
        """Give ``frame`` to every participant except ``sender`` and ``drop``; their events by name."""
        out: dict[str, list] = {}
        for name, ch in self.py.items():
            if name != sender and name not in drop:
                out[name] = self._py_in(name, ch.receive(frame, now_ms()))
        if self.js_id != sender and self.js_id not in drop:
            out[self.js_id] = self.js.receive(frame)
        return out

    def py_send(self, name: str, payload: bytes, drop: tuple[str, ...] = ()) -> tuple[str, dict[str, list]]:
        out = self.py[name].send(payload, now_ms())
        return out.message_id, self.broadcast(name, out.data, drop)

    def js_send(self, payload: bytes, drop: tuple[str, ...] = ()) -> tuple[str, dict[str, list]]:
        mid, frame, _ = self.js.send(payload)
        return mid, self.broadcast(self.js_id, frame, drop)

    def py_tick(self, name: str) -> list[Outgoing]:
        """Tick ``name``; relay every frame it emits (no loss); return those frames."""
        events = self._py_in(name, self.py[name].tick(now_ms()))
        frames = of(events, Outgoing)
        for o in frames:
            self.broadcast(name, o.data)
        return frames

    def assert_converged(self) -> list[str]:
        """Every log identical and in the same order (ids and Lamport timestamps); buffers empty."""
        st = self.js.state()
        js_log = st["log"]
        for name, ch in self.py.items():
            assert ch.log == js_log, f"{name} log differs from {self.js_id}"
            assert [str(r.lamport_timestamp) for r in ch.log_entries()] == st["log_lamports"], name
            assert ch.incoming_ids == [], name
            assert ch.check_invariants() == [], name
        assert st["incoming"] == [], st["incoming"]
        assert not self.js.stray, self.js.stray
        assert W_ERROR not in types(self.js.events)
        return js_log


def py_config(causal_history_size: int = 2) -> ChannelConfig:
    return ChannelConfig(
        causal_history_size=causal_history_size,
        possible_acks_threshold=2,
        repair=RepairConfig(t_min_ms=T_MIN_MS, t_max_ms=T_MAX_MS),
    )


def js_options(causal_history_size: int = 2) -> dict:
    return {
        "causalHistorySize": causal_history_size,
        "possibleAcksThreshold": 2,
        "enableRepair": True,
        "repairConfig": {"tMin": T_MIN_MS, "tMax": T_MAX_MS},
    }


@pytest.fixture
def group(request):
    """Factory: ``group(channel, py_k=(2, 2), js_k=2)`` -> Hub with alice/bob (sdschat) and wendy (@waku/sds).

    ``js_opts`` replaces wendy's MessageChannel options entirely (``{}``: @waku/sds defaults).
    """
    peers: list[WakuPeer] = []

    def make(channel: str, py_k: tuple[int, int] = (2, 2), js_k: int = 2, js_opts: dict | None = None) -> Hub:
        js = WakuPeer(channel, "wendy", js_options(js_k) if js_opts is None else js_opts)
        peers.append(js)
        t = now_ms()
        py = {
            "alice": MessageChannel(channel, "alice", py_config(py_k[0]), t),
            "bob": MessageChannel(channel, "bob", py_config(py_k[1]), t),
        }
        return Hub(channel, py, js)

    yield make
    for p in peers:
        p.close()


# ------------------------------------------------------------------ scenarios


def test_delivery_both_directions_same_log_order(group):
    hub = group("interop-delivery")
    alice, bob = hub.py["alice"], hub.py["bob"]
    sent: list[str] = []
    for r in range(3):
        mid, got = hub.py_send("alice", f"alice {r}".encode())
        sent.append(mid)
        assert [e.message_id for e in of(got["bob"], Delivered)] == [mid]
        assert of_type(got["wendy"], W_DELIVERED) == [mid], types(got["wendy"])

        mid, got = hub.js_send(f"wendy {r}".encode())
        sent.append(mid)
        assert mid == message_id(f"wendy {r}".encode())
        for name in ("alice", "bob"):
            (d,) = of(got[name], Delivered)
            assert (d.message_id, d.sender_id, d.content) == (mid, "wendy", f"wendy {r}".encode())

        mid, got = hub.py_send("bob", f"bob {r}".encode())
        sent.append(mid)
        assert [e.message_id for e in of(got["alice"], Delivered)] == [mid]
        assert of_type(got["wendy"], W_DELIVERED) == [mid]

    # concurrent sends: all three send before anyone hears the others, then the hub relays
    frames = {
        "alice": alice.send(b"concurrent alice", now_ms()),
        "bob": bob.send(b"concurrent bob", now_ms()),
    }
    w_mid, w_frame, _ = hub.js.send(b"concurrent wendy")
    for name, out in frames.items():
        hub.broadcast(name, out.data)
        sent.append(out.message_id)
    hub.broadcast("wendy", w_frame)
    sent.append(w_mid)
    # and one more round on top of the concurrent ones
    for name in ("alice", "bob"):
        sent.append(hub.py_send(name, f"after {name}".encode())[0])
    sent.append(hub.js_send(b"after wendy")[0])

    log = hub.assert_converged()
    assert sorted(log) == sorted(sent) and len(log) == len(sent) == 15
    # every participant delivered every other participant's message exactly once
    sender_of = {row.message_id: row.sender_id for row in alice.log_entries()}
    assert sorted(of_type(hub.js.events, W_DELIVERED)) == sorted(m for m in sent if sender_of[m] != "wendy")
    for name in ("alice", "bob"):
        delivered = [e.message_id for e in of(hub.py_events[name], Delivered)]
        assert sorted(delivered) == sorted(m for m in sent if sender_of[m] != name), name


def test_acks_by_causal_history_both_ways(group):
    hub = group("interop-acks")
    alice = hub.py["alice"]

    # a Python message is acknowledged once the js peer's causal history names it
    p, _ = hub.py_send("alice", b"from alice")
    assert alice.outgoing_ids == [p]
    w, frame_got = hub.js_send(b"from wendy")
    assert [e.message_id for e in of(frame_got["alice"], Acknowledged)] == [p]
    assert of(frame_got["alice"], Acknowledged)[0].by_bloom is False
    assert alice.outgoing_ids == []
    js_frame = wire.decode(hub.js.send(b"probe")[1])  # what wendy names now
    assert p in [e.message_id for e in js_frame.causal_history]
    assert {e.sender_id for e in js_frame.causal_history} <= {"alice", "wendy"}
    hub.broadcast("wendy", wire.encode(js_frame))

    # a js message gets OutMessageAcknowledged once a Python message names it
    assert w in hub.js.state()["outgoing"]
    p2, got = hub.py_send("alice", b"alice names wendy")
    acked = of_type(got["wendy"], W_ACKED)
    assert w in acked, types(got["wendy"])
    assert w not in hub.js.state()["outgoing"]
    hub.assert_converged()


def test_possible_acks_by_bloom_both_ways(group):
    # Python engines keep no causal history (K=0); wendy names only her newest log entry (K=1)
    hub = group("interop-bloom-acks", py_k=(0, 0), js_k=1)
    alice = hub.py["alice"]

    # Python side: alice's p is in bob's and wendy's blooms, named by nobody
    p, _ = hub.py_send("alice", b"p from alice")
    q, got = hub.py_send("bob", b"q from bob")  # bob's bloom holds p
    assert of(got["alice"], PossiblyAcknowledged) == [PossiblyAcknowledged(p, 1)]
    assert alice.outgoing_state(p) == ("possibly_acknowledged", 0)
    j, got = hub.js_send(b"j from wendy")  # wendy names q only; her bloom holds p and q
    assert [a for a in of(got["alice"], Acknowledged)] == [Acknowledged(p, by_bloom=True)]
    assert of(got["bob"], Acknowledged) == [Acknowledged(q, by_bloom=False)]
    assert alice.outgoing_ids == []

    # js side: wendy's j is in alice's and bob's blooms (K=0: they name nothing)
    _, got = hub.py_send("alice", b"r from alice")
    assert of_type(got["wendy"], W_POSSIBLY_ACKED) == [{"messageId": j, "count": 1}], types(got["wendy"])
    assert hub.js.call("sweep_outgoing")["possibly_acknowledged"] == [j]
    _, got = hub.py_send("bob", b"s from bob")
    assert j in of_type(got["wendy"], W_ACKED), types(got["wendy"])
    assert j not in hub.js.state()["outgoing"]
    hub.assert_converged()


def test_repair_js_misses_python_message(group):
    hub = group("interop-repair-js")
    alice, bob = hub.py["alice"], hub.py["bob"]
    hub.py_send("alice", b"warm-up alice")
    hub.js_send(b"warm-up wendy")

    a1, got = hub.py_send("alice", b"a1 lost on the way to wendy", drop=("wendy",))
    a2, got = hub.py_send("alice", b"a2 names a1")
    assert of_type(got["wendy"], W_DELIVERED) == []
    (missing,) = of_type(got["wendy"], W_MISSING)
    assert [m["messageId"] for m in missing] == [a1] and missing[0]["senderId"] == "alice"
    (queued,) = of_type(got["wendy"], W_REPAIR_REQUEST_QUEUED)
    assert queued["messageId"] == a1
    assert hub.js.state()["incoming"] == [a2]

    time.sleep(REPAIR_WAIT_S)  # past wendy's T_req
    r = hub.js.call("sync")
    assert r["sent"] is True
    sync_frame = bytes.fromhex(r["frame_hex"])
    msg = wire.decode(sync_frame)
    assert msg.content is None and msg.lamport_timestamp is not None
    assert msg.repair_request == [HistoryEntry(a1, None, "alice")]
    (sent,) = of_type(r["events"], W_REPAIR_REQUEST_SENT)
    assert sent == {"messageIds": [a1], "carrierMessageId": r["message_id"]}

    got = hub.broadcast("wendy", sync_frame)
    (sched,) = of(got["alice"], RepairScheduled)
    assert (sched.message_id, sched.requester_id) == (a1, "wendy")
    assert of(got["alice"], SyncReceived)[0].sender_id == "wendy"
    assert a1 in alice.repair_response_ids
    assert a1 in bob.repair_response_ids  # bob has it too, answers later unless alice is first

    frames = hub.py_tick("alice")  # T_resp of the original sender is "now"; the hub relays
    repairs = [o for o in frames if o.reason == "repair"]
    assert [o.message_id for o in repairs] == [a1]
    assert of(hub.py_events["alice"], RepairServed) == [RepairServed(a1, "alice")]
    assert wire.decode(repairs[0].data).bloom_filter is None  # rebroadcast without bloom: js must accept it
    assert a1 in of_type(hub.js.events, W_DELIVERED)
    assert bob.repair_response_ids == []  # cancelled by alice's answer

    sw = hub.js.call("sweep")  # @waku/sds delivers buffered dependants only on sweep
    assert of_type(sw["events"], W_DELIVERED) == [a2]
    assert sw["missing"] == [] and sw["repairs"] == []
    hub.assert_converged()


def test_repair_python_misses_js_message(group):
    hub = group("interop-repair-py")
    alice, bob = hub.py["alice"], hub.py["bob"]
    hub.py_send("alice", b"warm-up alice")
    hub.js_send(b"warm-up wendy")

    w1, w1_frame, _ = hub.js.send(b"w1 lost on the way to bob")
    hub.broadcast("wendy", w1_frame, drop=("bob",))
    w2, got = hub.js_send(b"w2 names w1")
    (m,) = of(got["bob"], Missing)
    assert m.message_id == w2 and m.missing == [HistoryEntry(w1, None, "wendy")]
    assert bob.repair_request_ids == [w1]

    time.sleep(REPAIR_WAIT_S)  # past bob's T_req
    events = bob.tick(now_ms())
    hub.py_events["bob"].extend(events)
    (sync,) = of(events, Outgoing)
    assert sync.reason == "sync" and sync.repair_request == (w1,)
    assert of(events, RepairRequested) == [RepairRequested((w1,), sync.message_id)]
    assert wire.decode(sync.data).repair_request == [HistoryEntry(w1, None, "wendy")]

    got = hub.broadcast("bob", sync.data)
    w_types = types(got["wendy"])
    assert W_SYNC_RECEIVED in w_types and W_ERROR not in w_types, w_types
    assert of_type(got["wendy"], W_REPAIR_REQUEST_RECEIVED) == [{"messageIds": [w1], "fromSenderId": "bob"}]
    (queued,) = of_type(got["wendy"], W_REPAIR_RESPONSE_QUEUED)
    assert queued["messageId"] == w1
    assert w1 in alice.repair_response_ids  # alice could answer too

    sw = hub.js.call("sweep")  # T_resp of the original sender is "now"
    assert [r["message_id"] for r in sw["repairs"]] == [w1]
    assert of_type(sw["events"], W_REPAIR_RESPONSE_SENT) == [{"messageId": w1}]
    repair_frame = bytes.fromhex(sw["repairs"][0]["frame_hex"])
    assert repair_frame == w1_frame  # @waku/sds rebroadcasts the original frame
    got = hub.broadcast("wendy", repair_frame)
    assert [(d.message_id, d.repaired) for d in of(got["bob"], Delivered)] == [(w1, True), (w2, False)]
    assert got["alice"] == [] and alice.repair_response_ids == []  # duplicate; alice's answer cancelled
    assert bob.repair_request_ids == [] and bob.missing_ids == []
    hub.assert_converged()


def test_gap_noticed_from_sync_causal_history(group):
    """A sync's causal history reveals a lost message (RFC: process a sync's causal
    history "following the same steps as regular messages"); SDS-R then repairs it."""
    hub = group("interop-sync-gap")
    alice, bob = hub.py["alice"], hub.py["bob"]
    hub.py_send("alice", b"warm-up alice")
    hub.js_send(b"warm-up wendy")

    # @waku/sds notices a gap named only by an sdschat sync
    a1, _ = hub.py_send("alice", b"a1 lost on the way to wendy", drop=("wendy",))
    out = alice.sync(now_ms())
    assert a1 in [e.message_id for e in wire.decode(out.data).causal_history]
    w_events = hub.broadcast("alice", out.data)["wendy"]
    assert [m["messageId"] for m in of_type(w_events, W_MISSING)[0]] == [a1], types(w_events)
    assert of_type(w_events, W_REPAIR_REQUEST_QUEUED)[0]["messageId"] == a1
    time.sleep(REPAIR_WAIT_S)
    hub.broadcast("wendy", bytes.fromhex(hub.js.call("sync")["frame_hex"]))
    assert [o.message_id for o in hub.py_tick("alice") if o.reason == "repair"] == [a1]
    assert a1 in of_type(hub.js.events, W_DELIVERED)
    hub.js.call("sweep")

    # sdschat should notice a gap named only by a @waku/sds sync
    w1, w1_frame, _ = hub.js.send(b"w1 lost on the way to bob")
    hub.broadcast("wendy", w1_frame, drop=("bob",))
    r = hub.js.call("sync")
    assert w1 in [e.message_id for e in wire.decode(bytes.fromhex(r["frame_hex"])).causal_history]
    got = hub.broadcast("wendy", bytes.fromhex(r["frame_hex"]))
    assert of(got["bob"], SyncReceived)
    # ENGINE BUG (see report): MessageChannel.receive returns SyncReceived for a
    # sync frame without checking its causal history for missing messages, so
    # w1 is never marked missing nor requested (@waku/sds does both).
    assert bob.missing_ids == [w1] and bob.repair_request_ids == [w1], (bob.missing_ids, bob.repair_request_ids)
    time.sleep(REPAIR_WAIT_S)
    (sync,) = of(hub.py_tick("bob"), Outgoing)
    assert sync.repair_request == (w1,)
    repairs = hub.js.call("sweep")["repairs"]
    assert [x["message_id"] for x in repairs] == [w1]
    got = hub.broadcast("wendy", bytes.fromhex(repairs[0]["frame_hex"]))
    assert [(d.message_id, d.repaired) for d in of(got["bob"], Delivered)] == [(w1, True)]
    hub.assert_converged()


def test_repair_answered_by_third_party_both_ways(group):
    """The original sender stays silent: the other implementation answers in its place."""
    hub = group("interop-repair-third-party")
    alice = hub.py["alice"]
    hub.py_send("alice", b"warm-up alice")
    hub.js_send(b"warm-up wendy")

    # (1) wendy misses alice's a1; bob (sdschat) answers for alice
    a1, _ = hub.py_send("alice", b"a1 lost on the way to wendy", drop=("wendy",))
    a2, _ = hub.py_send("alice", b"a2 names a1")
    time.sleep(REPAIR_WAIT_S)
    r = hub.js.call("sync")
    got = hub.broadcast("wendy", bytes.fromhex(r["frame_hex"]))
    (sched,) = of(got["bob"], RepairScheduled)
    assert sched.message_id == a1
    time.sleep(max(0, sched.t_resp - now_ms() + 5) / 1000)
    frames = hub.py_tick("bob")  # alice is never ticked; the hub relays bob's answer to all
    (rep,) = [o for o in frames if o.reason == "repair"]
    msg = wire.decode(rep.data)
    assert (msg.message_id, msg.sender_id, msg.bloom_filter) == (a1, "alice", None)
    assert a1 in of_type(hub.js.events, W_DELIVERED)
    assert alice.repair_response_ids == []  # her pending answer was cancelled by the echo
    assert of_type(hub.js.call("sweep")["events"], W_DELIVERED) == [a2]

    # (2) bob misses alice's a3; wendy (@waku/sds) answers for alice
    a3_out = alice.send(b"a3 lost on the way to bob", now_ms())
    hub.broadcast("alice", a3_out.data, drop=("bob",))
    a4, got = hub.py_send("alice", b"a4 names a3")
    assert [m.message_id for m in of(got["bob"], Missing)] == [a4]
    time.sleep(REPAIR_WAIT_S)
    (sync,) = of(hub.py_tick("bob"), Outgoing)  # relayed to alice and wendy
    assert sync.repair_request == (a3_out.message_id,)
    (queued,) = of_type(hub.js.events, W_REPAIR_RESPONSE_QUEUED)
    assert queued["messageId"] == a3_out.message_id
    time.sleep(max(0, queued["tResp"] - now_ms() + 5) / 1000)
    sw = hub.js.call("sweep")
    assert [x["message_id"] for x in sw["repairs"]] == [a3_out.message_id]
    repair_frame = bytes.fromhex(sw["repairs"][0]["frame_hex"])
    assert repair_frame == a3_out.data  # @waku/sds re-encodes alice's frame byte for byte
    got = hub.broadcast("wendy", repair_frame)
    assert [(d.message_id, d.repaired) for d in of(got["bob"], Delivered)] == [(a3_out.message_id, True), (a4, False)]
    assert got["alice"] == [] and alice.repair_response_ids == []
    hub.assert_converged()


def test_waku_default_options_long_history(group):
    """@waku/sds with its default options (causal history of up to 200 entries)."""
    hub = group("interop-waku-defaults", js_opts={})  # DEFAULT_CAUSAL_HISTORY_SIZE = 200
    sent = [hub.py_send("alice", b"hello from alice")[0]]
    for i in range(80):
        mid, frame, _ = hub.js.send(f"wendy {i}".encode())
        sent.append(mid)
        got = hub.broadcast("wendy", frame)
        # ENGINE INCOMPATIBILITY (see report): sdschat's default
        # ChannelConfig.max_history_entries = 64 rejects ("too_large") every
        # frame of a default-configured @waku/sds peer once its log holds more
        # than 64 messages (@waku/sds names up to 200 entries by default).
        assert [d.message_id for d in of(got["alice"], Delivered)] == [mid], (i, got["alice"])
    assert len(wire.decode(frame).causal_history) == 80
    b_mid, _ = hub.py_send("bob", b"bob names wendy's last two")
    assert hub.assert_converged() == [*sent, b_mid]


def test_sync_and_ephemeral_both_ways(group):
    hub = group("interop-sync-ephemeral")
    alice = hub.py["alice"]
    a0, _ = hub.py_send("alice", b"something to sync about")

    # js -> Python
    r = hub.js.call("sync")
    assert r["sent"] is True and r["message_id"].startswith("sync-")
    sync_frame = bytes.fromhex(r["frame_hex"])
    assert of_type(r["events"], W_SYNC_SENT)[0]["messageId"] == r["message_id"]
    got = hub.broadcast("wendy", sync_frame)
    lamport = wire.decode(sync_frame).lamport_timestamp
    expected = SyncReceived("wendy", r["message_id"], lamport)
    assert got["alice"] == [Acknowledged(a0), expected]  # the sync's causal history names a0
    assert got["bob"] == [expected]

    r = hub.js.call("ephemeral", payload_hex=b"typing...".hex())
    eph = wire.decode(bytes.fromhex(r["frame_hex"]))
    assert eph.lamport_timestamp is None and eph.bloom_filter is None and eph.causal_history == []
    got = hub.broadcast("wendy", bytes.fromhex(r["frame_hex"]))
    for name in ("alice", "bob"):
        assert got[name] == [EphemeralReceived("wendy", b"typing...", message_id(b"typing..."))]

    # Python -> js
    out = alice.sync(now_ms())
    assert out is not None and out.reason == "sync"
    w_events = hub.broadcast("alice", out.data)["wendy"]
    assert types(w_events) == [W_SYNC_RECEIVED], types(w_events)
    assert w_events[0]["detail"]["messageId"] == out.message_id
    assert w_events[0]["detail"]["lamportTimestamp"] == str(out.lamport_timestamp)
    assert w_events[0]["detail"]["kind"] == "sync"

    out = alice.send_ephemeral(b"alice is typing", now_ms())
    r = hub.js.call_raw("receive", frame_hex=out.data.hex())
    assert "error" not in r and r["kind"] == "ephemeral"
    # @waku/sds 0.0.8 accepts an incoming ephemeral frame but emits no event for
    # it at all (its _pushIncomingMessage just returns), so an app on top of it
    # cannot see ephemeral content through MessageChannel events.
    assert r["events"] == []
    assert hub.js.state()["log"] == [a0]
    hub.assert_converged()


def _py_frames_for_bytes_test(channel: str) -> dict[str, bytes]:
    """Frames from the Python engine and wire module covering every field."""
    t = now_ms()
    cfg = ChannelConfig(repair=RepairConfig(t_min_ms=0, t_max_ms=1))
    a = MessageChannel(channel, "alice", cfg, t)
    b = MessageChannel(channel, "bob", cfg, t)
    frames: dict[str, bytes] = {}
    o1 = a.send(b"one", t)
    frames["first content (all-zero bloom)"] = o1.data
    lost = a.send(b"two, lost", t + 1)
    o3 = a.send(b"three", t + 2)
    frames["content with causal history"] = o3.data
    b.receive(o1.data, t + 3, retrieval_hint=b"\x01\x02hint")
    b.receive(o3.data, t + 3)
    frames["ephemeral"] = b.send_ephemeral(b"eph", t + 4).data
    events = b.tick(t + 10)  # repair request due (T_min 0, T_max 1)
    (sync,) = of(events, Outgoing)
    assert sync.repair_request == (lost.message_id,)
    frames["sync with repair request"] = sync.data
    o4 = b.send(b"four, names a hinted entry", t + 11)
    frames["content with retrieval hint in history"] = o4.data
    assert wire.decode(o4.data).causal_history[0].retrieval_hint == b"\x01\x02hint"
    a.receive(sync.data, t + 12)
    (rep,) = [o for o in of(a.tick(t + 13), Outgoing) if o.reason == "repair"]
    frames["repair answer (no bloom)"] = rep.data
    frames["wire: every field, big lamport, empty hint"] = wire.encode(
        Message(
            sender_id="s",
            message_id="m" * 64,
            channel_id=channel,
            lamport_timestamp=2**64 - 1,
            causal_history=[HistoryEntry("h1", b"", "x"), HistoryEntry("h2"), HistoryEntry("h3", b"\xff", None)],
            bloom_filter=bytes(range(256)) * 3,
            repair_request=[HistoryEntry("r1", b"\x00", "y")],
            content=b"\x00" * 5,
        )
    )
    frames["wire: sync with lamport 0"] = wire.encode(Message("s", "sync-x", channel, lamport_timestamp=0))
    return frames


def test_byte_level_roundtrip_both_ways(group):
    hub = group("interop-bytes")
    js = hub.js

    # Python -> js Message.decode -> encode: identical bytes, same fields
    for label, frame in _py_frames_for_bytes_test("interop-bytes").items():
        r = js.call("reencode", frame_hex=frame.hex())
        assert bytes.fromhex(r["frame_hex"]) == frame, label
        py = wire.decode(frame)
        d = r["decoded"]
        assert (d["sender_id"], d["message_id"], d["channel_id"]) == (py.sender_id, py.message_id, py.channel_id)
        assert d["lamport_timestamp"] == (None if py.lamport_timestamp is None else str(py.lamport_timestamp)), label
        assert d["content"] == (None if py.content is None else py.content.hex()), label
        assert d["bloom_filter"] == (None if py.bloom_filter is None else py.bloom_filter.hex()), label
        for key in ("causal_history", "repair_request"):
            assert [(e["message_id"], e["retrieval_hint"], e["sender_id"]) for e in d[key]] == [
                (e.message_id, None if e.retrieval_hint is None else e.retrieval_hint.hex(), e.sender_id)
                for e in getattr(py, key)
            ], (label, key)

    # js frames -> sdschat.sds.wire decode -> encode: identical bytes
    js_frames: dict[str, bytes] = {}
    hub.py_send("alice", b"from alice")
    _, js_frames["content"], _ = js.send(b"wendy one", hint=b"\xaa\xbb")
    _, js_frames["content with hinted history"], _ = js.send(b"wendy two")
    assert wire.decode(js_frames["content with hinted history"]).causal_history[-1].retrieval_hint == b"\xaa\xbb"
    hub.py_send("alice", b"lost", drop=("wendy",))
    hub.py_send("alice", b"names lost")
    time.sleep(REPAIR_WAIT_S)
    r = js.call("sync")
    js_frames["sync with repair request"] = bytes.fromhex(r["frame_hex"])
    assert wire.decode(js_frames["sync with repair request"]).repair_request
    js_frames["ephemeral"] = bytes.fromhex(js.call("ephemeral", payload_hex="0102")["frame_hex"])
    for label, frame in js_frames.items():
        assert wire.encode(wire.decode(frame)) == frame, label
