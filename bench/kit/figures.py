"""Figures of a run: percentiles, a process's CPU time and resident memory, a two-column table, and a polling wait."""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def percentile(values, q: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def rss_kb(pid: int) -> int | None:
    """VmRSS of a process in kB (from /proc/PID/status), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None


def cpu_s(pid: int, *, main_thread: bool = False) -> float | None:
    """CPU time of a process so far, user + system, in seconds (from /proc/PID/stat), or None when it is gone.
    ``main_thread``: its main thread's alone (/proc/PID/task/PID/stat: the event loop, without the database's
    and the checkpoints' threads)."""
    path = f"/proc/{pid}/task/{pid}/stat" if main_thread else f"/proc/{pid}/stat"
    try:
        with open(path) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def sample_cpu(
    procs: dict[str, subprocess.Popen], samples: dict[str, list[tuple[float, float, float]]], done: threading.Event
) -> None:
    """Every 0.2 s until ``done``: each process's CPU time so far (user + system, from /proc), with the time, and its
    main thread's. It never polls the processes: a poll may reap one before the main thread's ``wait4`` reads
    its resource usage."""
    while not done.is_set():
        for name, p in procs.items():
            used, main = cpu_s(p.pid), cpu_s(p.pid, main_thread=True)
            if used is not None and main is not None:
                samples[name].append((time.time(), used, main))
        done.wait(0.2)


def cpu_share(
    points: list[tuple[float, float, float]], start: float, end: float, *, main_thread: bool = False
) -> float | None:
    """The share of one core used between ``start`` and ``end`` (wall times), from samples ``(wall time, CPU s,
    the main thread's CPU s)`` (:func:`cpu_s`), the nearest inside; ``main_thread``: the main thread's share."""
    inside = [p for p in points if start <= p[0] <= end]
    if len(inside) < 2 or inside[-1][0] - inside[0][0] < 1.0:
        return None
    i = 2 if main_thread else 1
    first, last = inside[0], inside[-1]
    return (last[i] - first[i]) / (last[0] - first[0])


def ed25519_us(repeat: int = 300, size: int = 1500) -> tuple[float, float]:
    """One Ed25519 check and one signature of ``size`` bytes on this host, in us of the calling thread's CPU
    (medians of 5 rounds of ``repeat``): every received message needs two checks, every line sent two
    signatures."""
    from sdschat.crypto import Identity, verify

    who = Identity.generate()
    data = b"x" * size
    signature, public = who.sign(data), who.public_bytes()
    checks, signs = [], []
    for _ in range(5):
        t = time.thread_time()
        for _ in range(repeat):
            verify(public, data, signature)
        checks.append((time.thread_time() - t) / repeat * 1e6)
        t = time.thread_time()
        for _ in range(repeat):
            who.sign(data)
        signs.append((time.thread_time() - t) / repeat * 1e6)
    return statistics.median(checks), statistics.median(signs)


def wait_until(predicate, timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


def print_table(rows: list[tuple[str, object]]) -> None:
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")
