"""What the stack under an sdschat node costs at a chat's rate, with none of the node's own work: the floor.

3 members over mosquitto (loopback, QoS 0), 50 msg/s in all, as ``bench/node_latency.py`` runs its nodes. Each
member is a process with the parts an sdschat node cannot do without, and nothing else:

- the node's MQTT transport (``sdschat.transport.MqttTransport``: paho driven by the asyncio loop);
- per line sent: the author's Ed25519 signature over the content, a head of the size a node's SDS frame has
  (causal history of 10, a 248-byte bloom filter) compressed, the publisher's signature over the frame, AES-GCM;
- per frame received: AES-GCM open, the head inflated, the author's Ed25519 check (and the publisher's, were it
  someone else: a node takes its author's own message on the content signature when the frame's filter decides
  nothing), the payload's JSON read;
- one row a message (sent or received) in SQLite (WAL), written by a thread that commits every 100 ms.

No SDS engine, no message book, no events, no presence, no wire log: what is left of a node's CPU above this
floor is its own Python. Prints each member's CPU while the messages flow (the main thread's apart), read from
/proc as ``bench/node_latency.py`` reads it, and one Ed25519 signature and check timed on this host.

    python bench/stack_floor.py [--seconds 30] [--rate 50] [--members 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from kit import Broker, cpu_share, ed25519_us, sample_cpu

from sdschat.crypto import Identity, verify
from sdschat.transport import MqttTransport

TOPIC = "sdschat-floor/channel"
KEY_ENV = "SDSCHAT_FLOOR_KEY"  # the members' shared AES key (hex), handed down by the parent
COMMIT_EVERY_S = 0.1
HISTORY = 10


def _head(pool: bytes, sender: bytes, lamport: int) -> bytes:
    """An SDS frame head's bytes of a node's size: 10 history entries (a message id and its sender in hex, a
    32-byte retrieval hint) and a sparse 248-byte bloom filter, the random parts taken from ``pool``."""
    at = lamport % (len(pool) - 64 * HISTORY - 48)
    parts = [lamport.to_bytes(8, "big")]
    for i in range(HISTORY):
        entry = pool[at + 64 * i : at + 64 * (i + 1)]
        parts += (entry[:32].hex().encode(), sender, entry[32:])
    parts.append(bytes(200) + pool[at : at + 48])
    return b"".join(parts)


def _writer(rows: queue.SimpleQueue, path: Path, done: threading.Event) -> None:
    con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("CREATE TABLE m (id TEXT PRIMARY KEY, sender TEXT, lamport INTEGER, body BLOB)")
    while not done.is_set() or not rows.empty():
        time.sleep(COMMIT_EVERY_S)
        batch = []
        while not rows.empty():
            batch.append(rows.get())
        if batch:
            con.execute("BEGIN")
            con.executemany("INSERT OR IGNORE INTO m VALUES (?, ?, ?, ?)", batch)
            con.execute("COMMIT")
    con.close()


async def _member(args: argparse.Namespace) -> int:
    aead = AESGCM(bytes.fromhex(os.environ[KEY_ENV]))
    me = Identity.generate()
    rows: queue.SimpleQueue = queue.SimpleQueue()
    done = threading.Event()
    writer = threading.Thread(target=_writer, args=(rows, Path(args.db), done), daemon=True)
    writer.start()
    received = refused = 0

    def on_frame(topic: str, sealed: bytes, source: str | None = None) -> None:
        nonlocal received, refused
        plain = aead.decrypt(sealed[:12], sealed[12:], None)
        publisher, signature = plain[:32], plain[32:96]
        head_len = int.from_bytes(plain[96:98], "big")
        content = plain[98 + head_len :]
        frame = zlib.decompress(plain[98 : 98 + head_len]) + content
        author, content_sig, payload = content[:32], content[32:96], content[96:]
        # the author's check, and the publisher's when it is someone else (a node checks a frame signature only
        # then, or when the frame's bloom filter would acknowledge something: never here)
        if not verify(author, frame[:8] + payload, content_sig) or (
            publisher != author and not verify(publisher, frame, signature)
        ):
            refused += 1
            return
        line = json.loads(payload)
        rows.put((line["id"], line["nick"], int.from_bytes(frame[:8], "big"), payload))
        received += 1

    transport = MqttTransport(args.broker, client_id=f"floor-{os.urandom(6).hex()}")
    await transport.start()
    transport.set_message_handler(on_frame)
    await transport.subscribe(TOPIC)
    print("ready", flush=True)
    start_at = float(await asyncio.to_thread(sys.stdin.readline))  # once every member listens
    await asyncio.sleep(max(0.0, start_at - time.time()))
    pool, sender = os.urandom(4096), me.participant_id.encode()
    for i in range(args.count):
        lamport = int(time.time() * 1000)
        payload = json.dumps(
            {"v": 1, "k": "msg", "nick": args.name, "id": f"{args.name}-{i}", "ts": lamport, "text": "x" * 80}
        ).encode()
        content = me.public_bytes() + me.sign(lamport.to_bytes(8, "big") + payload) + payload
        raw = _head(pool, sender, lamport)
        head = zlib.compress(raw, 6)
        plain = me.public_bytes() + me.sign(raw + content) + len(head).to_bytes(2, "big") + head + content
        nonce = os.urandom(12)
        await transport.publish(TOPIC, nonce + aead.encrypt(nonce, plain, None))
        rows.put((f"{args.name}-{i}", args.name, lamport, payload))
        await asyncio.sleep(max(0.0, start_at + (i + 1) * args.interval - time.time()))
    await asyncio.sleep(args.linger)
    await transport.stop()
    done.set()
    writer.join()
    print(f"{args.name}: sent {args.count}, received {received}, refused {refused}", flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--rate", type=float, default=50.0, help="messages per second, all members together")
    ap.add_argument("--members", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="a few seconds (the test suite runs this)")
    ap.add_argument("--member", help=argparse.SUPPRESS)  # a member's settings (JSON): the parent starts each one
    args = ap.parse_args()
    if args.member:
        return asyncio.run(_member(argparse.Namespace(linger=2.0, **json.loads(args.member))))
    if args.smoke:
        args.seconds, args.rate, args.members = 3.0, 20.0, 2

    work = Path(tempfile.mkdtemp(prefix="sdschat-floor-"))
    broker = Broker(work)  # (one line and exit when mosquitto is missing: `bash .ci/setup` installs it)
    broker.start()
    per_member = args.rate / args.members
    count = int(args.seconds * per_member)
    env = {**os.environ, KEY_ENV: AESGCM.generate_key(bit_length=256).hex()}
    procs = {}
    for i in range(args.members):
        name = f"m{i}"
        member = {"name": name, "broker": broker.url, "db": str(work / f"{name}.db"), "count": count}
        member["interval"] = 1 / per_member
        procs[name] = subprocess.Popen(
            [sys.executable, __file__, "--member", json.dumps(member)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
    for name, p in procs.items():  # every member connected and subscribed before anyone sends
        if p.stdout.readline().strip() != "ready":
            raise SystemExit(f"member {name} did not start: exit {p.wait()}")
    start_at = time.time() + 0.5
    for p in procs.values():
        p.stdin.write(f"{start_at}\n")
        p.stdin.close()
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in procs}
    ended = threading.Event()
    sampler = threading.Thread(target=sample_cpu, args=(procs, samples, ended), daemon=True)
    sampler.start()
    outputs = {name: p.stdout.read().strip() for name, p in procs.items()}
    for p in procs.values():
        p.wait()
    ended.set()
    sampler.join()
    broker.close()
    shutil.rmtree(work, ignore_errors=True)
    codes = [p.returncode for p in procs.values()]
    window = (start_at + 0.5, start_at + args.seconds - 0.5)
    shares = {name: cpu_share(samples[name], *window) for name in procs}
    mains = {name: cpu_share(samples[name], *window, main_thread=True) for name in procs}
    checked, signed = ed25519_us()
    print(f"{args.members} members over mosquitto (loopback, QoS 0), {args.rate:g} msg/s in all for {args.seconds:g} s")
    for name, out in outputs.items():
        share, main = shares[name], mains[name]
        cpu = f"{100 * share:.1f}% (main thread {100 * main:.1f}%)" if share is not None and main is not None else "n/a"
        print(f"  {out or name + ': no output'}; CPU while messages flow {cpu}")
    got = [v for v in shares.values() if v is not None]
    got_main = [v for v in mains.values() if v is not None]
    if got and got_main:
        print(
            f"the stack alone, per member: median {100 * statistics.median(got):.1f}% of one core "
            f"(main thread {100 * statistics.median(got_main):.1f}%)"
        )
    print(f"one Ed25519 check on this host: {checked:.0f} us, one signature: {signed:.0f} us")
    return 0 if all(code == 0 for code in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
