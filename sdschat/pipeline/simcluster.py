"""The simulator's shards as the tasks of a Spark barrier stage: ``sdschat simulate --master URL``.

Spark gang-schedules the ``W`` tasks of a barrier stage (all start together
or none does). Each task opens a TCP listening socket on its executor's
host, the tasks exchange their addresses with
``BarrierTaskContext.allGather``, and each connects to every task before it
and accepts every task after it: the same mesh of one connection per pair
that forked worker processes get from pipes. Then each runs its shard as a
peer (:func:`sdschat.sim.run_task`: the conservative lookahead
synchronisation of :mod:`sdschat.sim.workers`), writes its event shards to
the output folder and returns its part of the result; the driver merges the
parts as for local workers. Same seed, same events, whatever the workers
and wherever they run.

The output folder must be the same path on every machine (one machine, or
a shared file system), and the cluster needs ``W`` free task slots at once.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from sdschat.sim import Runner, agreed, run_task

from .spark import SparkJobError, one_line

__all__ = ["spark_runner", "BARRIER_CONF"]

#: a barrier stage needs all its slots at once: check for them every 2 s, give up after 30 (executors still
#: registering are waited for; a cluster too small fails with one line instead of retrying for 10 minutes)
BARRIER_CONF = {
    "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "2s",
    "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "15",
    "spark.task.maxFailures": "1",
}

#: seconds a task waits for the others to connect
CONNECT_TIMEOUT_S = 120.0
_ID_BYTES = 4


def spark_runner(spark) -> Runner:
    """A :data:`sdschat.sim.Runner` that runs the shards as a barrier stage of ``spark``'s cluster."""

    def run(p, plan, workers, out, kw, report):
        sc = spark.sparkContext
        where = str(out) if out is not None else None
        rdd = (
            sc.parallelize(range(workers), workers)
            .barrier()
            .mapPartitions(lambda it: _task(p, plan, workers, where, kw, it))
        )
        try:
            got = rdd.collect()
        except Exception as exc:
            if "BarrierJobSlotsNumberCheckFailed" in str(exc):
                raise SparkJobError(
                    f"the cluster has fewer than {workers} free task slots (cores) for the "
                    f"{workers} shards of the barrier stage (Spark said "
                    "BarrierJobSlotsNumberCheckFailed; --workers fewer, or more cores)"
                ) from None
            raise SparkJobError(f"the simulation's barrier stage failed: {one_line(exc)}") from None
        parts = [part for _, part in sorted(got, key=lambda x: x[0])]
        if len(parts) != workers:
            raise SparkJobError(f"the barrier stage returned {len(parts)} shards, not {workers}")
        return agreed(parts)

    return run


def _task(p, plan, workers: int, out: str | None, kw: dict, it):  # pragma: no cover - runs in a Spark executor
    """One barrier task: connect to the other tasks, run shard ``partitionId`` of ``workers``."""
    from pyspark import BarrierTaskContext

    for _ in it:
        pass
    ctx = BarrierTaskContext.get()
    wid = ctx.partitionId()
    host = os.environ.get("SPARK_LOCAL_IP") or ctx.getTaskInfos()[wid].address.rsplit(":", 1)[0]
    with socket.create_server(("", 0), backlog=max(1, workers)) as server:
        addresses = _addresses(ctx.allGather(f"{wid} {host} {server.getsockname()[1]}"), workers)
        conns = _mesh(wid, addresses, server)
    try:
        part = run_task(p, plan, wid, workers, Path(out) if out is not None else None, kw, conns)
    finally:
        for s in conns.values():
            s.close()
    yield wid, part


def _addresses(gathered: list[str], workers: int) -> dict[int, tuple[str, int]]:
    out = {}
    for item in gathered:
        wid, host, port = item.split()
        out[int(wid)] = (host, int(port))
    if sorted(out) != list(range(workers)):
        raise RuntimeError(f"barrier tasks announced {sorted(out)}, expected 0..{workers - 1}")
    return out


def _mesh(wid: int, addresses: dict[int, tuple[str, int]], server: socket.socket) -> dict[int, socket.socket]:
    """One connection to every other task: connect to those before ``wid``, accept those after it."""
    conns: dict[int, socket.socket] = {}
    for peer in range(wid):
        s = socket.create_connection(addresses[peer], timeout=CONNECT_TIMEOUT_S)
        s.sendall(wid.to_bytes(_ID_BYTES, "little"))
        conns[peer] = s
    server.settimeout(CONNECT_TIMEOUT_S)
    while len(conns) < len(addresses) - 1:
        s, _ = server.accept()
        s.settimeout(CONNECT_TIMEOUT_S)
        head = b""
        while len(head) < _ID_BYTES:
            chunk = s.recv(_ID_BYTES - len(head))
            if not chunk:
                raise RuntimeError("a barrier task closed its connection before saying who it is")
            head += chunk
        peer = int.from_bytes(head, "little")
        if peer <= wid or peer in conns or peer not in addresses:
            raise RuntimeError(f"task {wid}: unexpected connection from task {peer}")
        conns[peer] = s
    for s in conns.values():
        s.settimeout(None)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conns
