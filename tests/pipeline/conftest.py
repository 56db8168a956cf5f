"""Fixtures of the pipeline tests: real participant databases, a small simulation, and one Spark run per session."""

from __future__ import annotations

import asyncio
import contextlib
import io
from pathlib import Path

import pytest

from sdschat.sds import Acknowledged, ChannelConfig, Delivered, MessageChannel
from sdschat.store import EventRow, Store

T0 = 1_700_000_000_000  # epoch milliseconds: beyond 32 bits, as in a real database
CHANNEL = "c0ffee" * 8


def make_databases(folder: Path) -> tuple[Path, Path, list[str]]:
    """Two real participants (engines) exchange three messages; each writes its own database via the store API.

    Returns the two database paths and the message ids in log order.
    """
    cfg = ChannelConfig(causal_history_size=10)
    a = MessageChannel(CHANNEL, "alice", cfg, T0)
    b = MessageChannel(CHANNEL, "bob", cfg, T0)
    ev_a: list[EventRow] = []
    ev_b: list[EventRow] = []

    def deliver(to: MessageChannel, rows: list, frame: bytes, t: int) -> None:
        for e in to.receive(frame, t):
            if isinstance(e, Delivered):
                rows.append(EventRow("received", t, e.message_id, e.sender_id, lamport_timestamp=e.lamport_timestamp))
                rows.append(EventRow("delivered", t, e.message_id, e.sender_id, lamport_timestamp=e.lamport_timestamp))

    t = T0 + 1000
    m1 = a.send(b"hello from alice", t)
    ev_a.append(EventRow("sent", t, m1.message_id, "alice", lamport_timestamp=m1.lamport_timestamp))
    deliver(b, ev_b, m1.data, t + 40)
    m2 = a.send(b"second from alice", t + 500)
    ev_a.append(EventRow("sent", t + 500, m2.message_id, "alice", lamport_timestamp=m2.lamport_timestamp))
    deliver(b, ev_b, m2.data, t + 560)
    m3 = b.send(b"hi alice", t + 900)
    ev_b.append(EventRow("sent", t + 900, m3.message_id, "bob", lamport_timestamp=m3.lamport_timestamp))
    for e in a.receive(m3.data, t + 950):  # names m1 and m2 in its causal history: acks them
        if isinstance(e, Delivered):
            ev_a.append(EventRow("received", t + 950, e.message_id, "bob", lamport_timestamp=e.lamport_timestamp))
            ev_a.append(EventRow("delivered", t + 950, e.message_id, "bob", lamport_timestamp=e.lamport_timestamp))
        elif isinstance(e, Acknowledged):
            ev_a.append(EventRow("acked", t + 950, e.message_id, "alice", detail={"by_bloom": e.by_bloom}))
    assert a.log == b.log and len(a.log) == 3
    paths = (folder / "alice.db", folder / "bob.db")

    async def write() -> None:
        for path, ch, rows in ((paths[0], a, ev_a), (paths[1], b, ev_b)):
            store = await Store.open(path)
            try:
                await store.save_state(ch.snapshot(), "{}")
                await store.apply(CHANNEL, events=rows)
            finally:
                await store.close()

    asyncio.run(write())
    return paths[0], paths[1], list(a.log)


@pytest.fixture
def databases(tmp_path) -> tuple[Path, Path, list[str]]:
    return make_databases(tmp_path)


SWEEP_GRID = """
[sweep]
name = "tiny"
seeds = [1]

[base]
messages = 6
rate = 2.0
horizon_ms = 60000
repair_t_min_ms = 1000
repair_t_max_ms = 3000

[grid]
loss = [0.0, 0.3]
participants = [6]
repair = [true, false]
"""


@pytest.fixture(scope="session")
def spark_run(tmp_path_factory):
    """The real Spark jobs, once per test session: ``report`` and ``sweep`` through the CLI, on one session."""
    from sdschat.pipeline import report as report_mod
    from sdschat.pipeline import spark as spark_mod
    from sdschat.cli import main
    from sdschat.pipeline.inputs import stage_inputs
    from sdschat.pipeline.queries import reduce_with_spark
    from sdschat.sim import SimParams, simulate

    base = tmp_path_factory.mktemp("spark")
    sim_dir = base / "sim-run"
    simulate(SimParams(participants=12, messages=15, rate=2.0, loss=0.2, duplicate=0.05, seed=3,
                       overrides={"repair_t_min_ms": 1000, "repair_t_max_ms": 4000}, horizon_ms=120_000), sim_dir)
    db_a, db_b, log = make_databases(base)
    grid = base / "grid.toml"
    grid.write_text(SWEEP_GRID)
    result: dict = {"sim_dir": sim_dir, "dbs": (db_a, db_b), "log": log, "base": base}
    with spark_mod.spark_session("sdschat-tests", log_dir=base) as session:

        @contextlib.contextmanager
        def reuse(*_a, **_k):
            yield session

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(report_mod, "spark_session", reuse)
            mp.setattr(spark_mod, "spark_session", reuse)
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                result["report_code"] = main(["report", str(sim_dir), str(db_a), str(db_b),
                                              "--out", str(base / "report")])
            result["report_stderr"] = err.getvalue()
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                result["sweep_code"] = main(["sweep", "--grid", str(grid), "--out", str(base / "sweep")])
            result["sweep_stderr"] = err.getvalue()
        # the Spark reduction of the same inputs, for comparison with the Python reference
        from sdschat.pipeline.report import build_events_view

        staged = stage_inputs([sim_dir, db_a, db_b], base / "staging")
        build_events_view(session, staged)
        result["spark_reduced"] = reduce_with_spark(session)
        result["staged"] = staged
        # last: the spark-submit entry point, on the session spark-submit would provide (it stops it)
        from sdschat.cli import submit

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            result["submit_code"] = submit.main(["report", str(sim_dir), str(db_a), str(db_b),
                                                 "--out", str(base / "report-submit"), "--quiet"])
        result["submit_stderr"] = err.getvalue()
    return result
