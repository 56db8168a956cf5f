"""Running the shards: alone in this process, or one per forked worker process.

**Workers** (``workers > 1``): each worker process (forked) runs one shard
(members ``r`` with ``r % workers == w``). They synchronise conservatively
without a barrier (:class:`Peer`): each advances in steps of a quarter of the
minimum latency (the lookahead) and after each step sends the others,
directly over one socket per pair (:class:`~sdschat.sim.links.Links`), the
frames it published and the promise that it has processed every event before
the step's end; a frame published at ``t`` cannot arrive before
``t + lookahead``, so a worker may process every event before
``min(promises) + lookahead``. A faster worker thus runs up to the lookahead
ahead of a slower one instead of waiting for it at every window, and nothing
waits for a coordinator (the parent only collects progress and results).
Workers write their event shards at the same virtual times
(:data:`~sdschat.sim.clock.FLUSH_GRID_MS`), so one writing does not hold the
others back. The cyclic garbage collector is off while a shard lives
(:func:`~sdschat.sim.clock.no_gc`): the engine makes no reference cycles, and
full collections over tens of millions of objects cost seconds each.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

from sdschat.sds import native

from .clock import FLUSH_GRID_MS, Clock, no_gc
from .links import Links
from .params import SimParams
from .plan import Plan
from .shard import Shard, ShardOptions

__all__ = ["Peer", "agreed", "run_alone", "run_peer", "run_processes", "run_task"]


@no_gc
def run_alone(shard: Shard, clock: Clock) -> None:
    """One worker: windows only at the quiescence checks."""
    shard.start()
    while True:
        t_end = clock.window_end(shard.next_time())
        shard.run(t_end)
        clock.windows += 1
        if t_end == clock.next_check and clock.checked(t_end, shard.quiescent()):
            return
        if t_end > clock.end:
            return


class Peer:
    """One of several workers: conservative parallel simulation without a barrier.

    Every worker processes events in steps of a few virtual milliseconds and,
    after each step, sends the others ``("p", t, frames)``: the frames it
    published, and the promise that it has processed every event before
    ``t`` (so whatever it publishes later is published at ``t`` or after, and
    arrives at ``t + lookahead`` or after). A worker may therefore process
    every event before ``min(promises) + lookahead``: a fast worker runs
    ahead of a slow one by up to the lookahead instead of waiting for it at
    every window boundary, and nobody waits for a round trip. At a
    quiescence check time every worker stops there, waits until every other
    has promised that time (so all frames published before it are
    scheduled everywhere), then all exchange ``("q", t, idle)`` and take the
    same decision. Which events happen, and in which order for each member,
    does not depend on the steps (see :class:`~sdschat.sim.shard.Shard`).
    """

    def __init__(self, shard: Shard, clock: Clock, links: Links, report: Callable[[int], None] | None) -> None:
        self.shard = shard
        self.clock = clock
        self.links = links
        self.report = report
        self.lookahead = clock.lookahead
        self.step = max(1, self.lookahead // 4)
        start = shard.p.start_ms
        self.promised = dict.fromkeys(links.fds, start)
        self.half_shard = shard.sink.limit // 2
        self.flags: dict[int, bool] = {}
        self.done = start  # every event before `done` has been processed
        self.last = 0.0

    def run(self) -> None:
        self.shard.start()
        clock = self.clock
        while True:
            cap = min(clock.next_check, clock.end + 1)
            bound = min(min(self.promised.values()) + self.lookahead, cap)
            if self.done < bound:
                self.advance(bound)
            elif self.done < cap:
                self.take(True)  # a slower worker holds us back: wait for its next promise
            elif cap > clock.end or self.check(cap):
                self.links.drain()  # the others may still need our last promise or flag
                return

    def advance(self, bound: int) -> None:
        """Process one step (up to ``bound``), then promise its end and send what was published."""
        shard = self.shard
        done = self.done
        t_end = min(bound, done + self.step)
        shard.run(t_end)
        crossed = t_end // FLUSH_GRID_MS != done // FLUSH_GRID_MS
        self.done = t_end
        self.clock.windows += 1
        out, shard.outbox = shard.outbox, []
        self.links.send_all(("p", t_end, out))
        if crossed and len(shard.sink.rows) >= self.half_shard:
            shard.sink.flush()  # after the promise: the others go on meanwhile
        self.take(False)
        if self.report is not None and time.perf_counter() - self.last >= 0.25:
            self.last = time.perf_counter()
            self.report(t_end)

    def check(self, cap: int) -> bool:
        """The quiescence check at ``cap``, agreed with every other worker; True if the run stops."""
        promised = self.promised
        while min(promised.values()) < cap:  # every frame published before `cap` must be scheduled everywhere
            self.take(True)
        idle = self.shard.quiescent()
        self.links.send_all(("q", cap, idle))
        while len(self.flags) < len(promised):
            self.take(True)
        everyone = idle and all(self.flags.values())
        self.flags.clear()
        return self.clock.checked(cap, everyone)

    def take(self, block: bool) -> None:
        """Handle the other workers' messages (with ``block``, wait for at least one)."""
        if block:
            t0 = time.perf_counter()
            got = self.links.receive(True)
            self.shard.wait_s += time.perf_counter() - t0
        else:
            got = self.links.receive(False)
        for peer, msg in got:
            if msg[0] == "p":
                self.shard.ingest(msg[2])
                self.promised[peer] = msg[1]
            else:  # ("q", t, idle)
                self.flags[peer] = msg[2]


@no_gc
def run_peer(shard: Shard, clock: Clock, links: Links, report: Callable[[int], None] | None) -> None:
    """Run ``shard`` as one of several workers (see :class:`Peer`)."""
    Peer(shard, clock, links, report).run()


def run_task(
    p: SimParams,
    plan: Plan,
    wid: int,
    workers: int,
    out: Path | None,
    kw: dict,
    conns: dict,
    report: Callable[[int], None] | None = None,
) -> dict:
    """Run shard ``wid`` of ``workers`` as one peer, connected to the others by ``conns`` (peer -> a connected
    socket or pipe end); returns its part of the result (:meth:`~sdschat.sim.shard.Shard.finish`, with when
    and why the run stopped). A worker process runs this, and so does a Spark barrier task: a process that runs
    nothing else, whose Python arenas go on huge pages first (:func:`~sdschat.sds.native.huge_page_arenas`; the
    part says whether they did)."""
    huge_pages = native.huge_page_arenas()
    shard = Shard(p, plan, wid, workers, out, **kw)
    clock = Clock(p, plan, p.latency_ms[0])
    run_peer(shard, clock, Links(conns), report)
    result = shard.finish()
    result.update(stop_reason=clock.stop_reason, stop_t=clock.stop_t, windows=clock.windows, huge_pages=huge_pages)
    return result


def agreed(parts: list[dict]) -> tuple[list[dict], str, int, int]:
    """The workers' parts and when and why the run ended, which every worker decided alike."""
    first = parts[0]
    if any((r["stop_reason"], r["stop_t"]) != (first["stop_reason"], first["stop_t"]) for r in parts):
        raise RuntimeError("simulation workers disagree on when the run ended (a bug)")
    return parts, first["stop_reason"], first["stop_t"], first["windows"]


def _worker_main(ctl, peer_conns: dict, args: tuple, kwargs: dict) -> None:  # pragma: no cover - child process
    """Entry point of a worker process (covered through :func:`~sdschat.sim.simulate`)."""
    try:
        p, plan, wid, workers, out = args
        report = (lambda t: ctl.send(("progress", t))) if wid == 0 else None
        ctl.send(("done", run_task(p, plan, wid, workers, out, kwargs, peer_conns, report)))
    except BaseException as exc:  # report, then exit
        try:
            ctl.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
        except Exception:
            pass


def run_processes(p: SimParams, plan: Plan, workers: int, out: Path | None, kw: ShardOptions, report) -> tuple:
    """Run ``workers`` forked worker processes; ``(parts, stop_reason, stop_t, windows)``."""
    import multiprocessing as mp

    # fork: no re-import of the caller's __main__ (spawn would need an ``if __name__ == "__main__"`` guard
    # in every script that calls simulate); the parent has no threads of ours at this point
    ctx = mp.get_context("fork")
    pairs: dict[tuple[int, int], tuple] = {}
    for i in range(workers):
        for j in range(i + 1, workers):
            pairs[(i, j)] = ctx.Pipe(duplex=True)
    procs, ctls = [], []
    try:
        for w in range(workers):
            mine = {}
            for (i, j), (ci, cj) in pairs.items():
                if i == w:
                    mine[j] = ci
                elif j == w:
                    mine[i] = cj
            parent, child = ctx.Pipe(duplex=True)
            proc = ctx.Process(target=_worker_main, args=(child, mine, (p, plan, w, workers, out), kw), daemon=True)
            proc.start()
            child.close()
            procs.append(proc)
            ctls.append(parent)
        for ci, cj in pairs.values():  # the children hold their ends
            ci.close()
            cj.close()
        results = _collect(ctls, procs, report)
    finally:
        _stop(ctls, procs)
    return agreed([results[w] for w in range(workers)])


def _collect(ctls: list[Connection], procs: list, report) -> dict[int, dict]:
    """Every worker's result (passing progress on); a worker's error or death is a RuntimeError."""
    from multiprocessing.connection import wait

    results: dict[int, dict] = {}
    pending = dict(enumerate(ctls))
    while pending:
        for ready in wait(list(pending.values())):
            w = next(k for k, c in pending.items() if c is ready)
            conn = pending[w]
            try:
                kind, value = conn.recv()
            except EOFError:
                raise RuntimeError(f"simulation worker {w} died (exit code {procs[w].exitcode})") from None
            if kind == "progress":
                report(value)
            elif kind == "error":
                raise RuntimeError(f"simulation worker {w} failed: {value}")
            else:
                results[w] = value
                del pending[w]
    return results


def _stop(ctls: list, procs: list) -> None:
    for conn in ctls:
        conn.close()
    for proc in procs:
        proc.join(timeout=10)
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=5)
