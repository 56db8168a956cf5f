"""Fixtures of the pipeline tests: real participant databases, a small simulation, and one Spark run per session."""

from __future__ import annotations

import asyncio
import contextlib
import io
import signal
import sqlite3
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
seeds = [1, 2]

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
    from sdschat.cli import main
    from sdschat.pipeline import report as report_mod
    from sdschat.pipeline import spark as spark_mod
    from sdschat.pipeline.inputs import stage_inputs
    from sdschat.pipeline.queries import reduce_with_spark
    from sdschat.sim import SimParams, simulate

    base = tmp_path_factory.mktemp("spark")
    sim_dir = base / "sim-run"
    simulate(
        SimParams(
            participants=12,
            messages=15,
            rate=2.0,
            loss=0.2,
            duplicate=0.05,
            seed=3,
            overrides={"repair_t_min_ms": 1000, "repair_t_max_ms": 4000},
            horizon_ms=120_000,
        ),
        sim_dir,
    )
    db_a, db_b, log = make_databases(base)
    grid = base / "grid.toml"
    grid.write_text(SWEEP_GRID)
    result: dict = {"sim_dir": sim_dir, "dbs": (db_a, db_b), "log": log, "base": base}
    # a JVM option of the caller's is added to the session's own (the log settings, the parallel collector)
    conf = {"spark.driver.extraJavaOptions": "-Dsdschat.test.option=added"}
    interrupt_before = signal.getsignal(signal.SIGINT)
    with spark_mod.spark_session("sdschat-tests", log_dir=base, conf=conf) as session:
        result["interrupt_handlers"] = (interrupt_before, signal.getsignal(signal.SIGINT))
        asked = result["sessions_asked"] = []  # what the CLI asked spark_session for, each time

        @contextlib.contextmanager
        def reuse(*_a, **kwargs):
            asked.append(kwargs)
            yield session

        with pytest.MonkeyPatch.context() as mp:
            mp.delenv("SDSCHAT_SPARK_CLASS_ARCHIVE", raising=False)  # unset: the CLI asks for the class archive
            mp.setattr(report_mod, "spark_session", reuse)
            mp.setattr(spark_mod, "spark_session", reuse)
            err, out = io.StringIO(), io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                result["report_code"] = main(
                    ["report", str(sim_dir), str(db_a), str(db_b), "--out", str(base / "report")]
                )
            result["report_stderr"], result["report_stdout"] = err.getvalue(), out.getvalue()
            # the same group without loss, against the first run
            sim_clean = base / "sim-clean"
            simulate(SimParams(participants=12, messages=15, rate=2.0, loss=0.0, seed=3, horizon_ms=120_000), sim_clean)
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                result["compare_code"] = main(
                    ["report", "--compare", str(sim_dir), str(sim_clean), "--out", str(base / "compare")]
                )
            result["compare_stderr"] = err.getvalue()
            err, out = io.StringIO(), io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                result["sweep_code"] = main(["sweep", "--grid", str(grid), "--out", str(base / "sweep")])
            result["sweep_stderr"], result["sweep_stdout"] = err.getvalue(), out.getvalue()
        # the Spark reduction of the same inputs, for comparison with the Python reference
        from sdschat.pipeline.report import build_events_view

        staged = stage_inputs([sim_dir, db_a, db_b], base / "staging")
        build_events_view(session, staged)
        result["spark_reduced"] = reduce_with_spark(session)
        result["staged"] = staged
        # every kind and typed fact: a simulation of each format and a database of the previous schema, together
        kinds = base / "all-kinds"
        inputs = [
            write_all_kinds_sim(kinds / "sim-v2", 2),
            write_all_kinds_sim(kinds / "sim-v1", 1),
            write_all_kinds_db(kinds / "old.db", 3),
        ]
        staged = stage_inputs(inputs, kinds / "staging")
        build_events_view(session, staged)
        from sdschat.pipeline.queries import LOG_KEYS_CONF

        seen = {}

        def note(name, _secs):
            if name == "per_participant":
                seen["during"] = session.conf.get(LOG_KEYS_CONF, None)

        result["all_kinds"] = (staged, reduce_with_spark(session, note))
        result["log_keys_conf"] = (seen.get("during"), session.conf.get(LOG_KEYS_CONF, None))
        # the same database migrated to this version's schema
        from sdschat.store import migrate as store_migrate

        conn = sqlite3.connect(inputs[2], isolation_level=None)
        result["migrated_versions"] = store_migrate.migrate(conn)
        conn.close()
        staged = stage_inputs([inputs[2]], kinds / "staging-migrated")
        build_events_view(session, staged)
        session.conf.set(LOG_KEYS_CONF, "4096")  # a caller's own setting stays, during and after
        seen.clear()
        result["migrated"] = (staged, reduce_with_spark(session, note))
        result["log_keys_conf_set"] = (seen.get("during"), session.conf.get(LOG_KEYS_CONF, None))
        session.conf.unset(LOG_KEYS_CONF)
        # the embedded JVM's garbage collectors (spark.spark_session picks the parallel one)
        beans = session._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
        result["jvm_collectors"] = sorted(str(b.getName()) for b in beans)
        system = session._jvm.java.lang.System
        result["jvm_properties"] = {
            k: system.getProperty(k) for k in ("sdschat.test.option", "log4j2.configurationFile")
        }
        runtime = session._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
        result["jvm_arguments"] = [str(a) for a in runtime.getInputArguments()]
        result["adaptive"] = session.conf.get("spark.sql.adaptive.enabled")
        # last: the spark-submit entry point, on the session spark-submit would provide (it stops it)
        from sdschat.cli import submit

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            result["submit_code"] = submit.main(
                ["report", str(sim_dir), str(db_a), str(db_b), "--out", str(base / "report-submit"), "--quiet"]
            )
        result["submit_stderr"] = err.getvalue()
    return result


# ------------------------------------------------ every kind, every typed fact

#: typed column -> the detail key it is read from (migration 0004's generated columns)
TYPED_FROM_DETAIL = {
    "repaired": "repaired",
    "by_bloom": "by_bloom",
    "bytes": "bytes",
    "by_id": "by",
    "frame_ts": "frame_ts",
    "missing_ids": "missing",
    "carrier": "carrier",
}

#: (kind, ts_ms, message_id, sender_id, participant_id, lamport_timestamp, detail) as the node and the simulator
#: write them: every kind, every detail field the report reads (and some it does not). Three members, A B C.
ALL_KINDS = [
    ("sent", 1000, "m1", "A", "A", 1, {"bytes": 100}),
    ("received", 1040, "m1", "A", "B", 1, None),
    ("delivered", 1040, "m1", "A", "B", 1, None),
    ("duplicate", 1045, "m1", "A", "B", None, {"via": "resend", "publisher": "A"}),
    ("sent", 1100, "m2", "B", "B", 2, {"bytes": 120}),
    ("received", 1130, "m2", "B", "A", 2, {"via": "store", "publisher": "S"}),
    ("delivered", 1130, "m2", "B", "A", 2, None),
    ("sync_sent", 1150, "s1", "C", "C", 5, {"bytes": 60}),
    ("sync_received", 1160, "s1", "C", "A", 5, None),
    ("received", 1200, "m3", "B", "C", 3, None),  # shown at once; delivered in order at 1301
    ("missing", 1200, "m3", "B", "C", 3, {"missing": ["m1", "m2"], "waiting_on": ["m1", "m2"]}),
    ("missing", 1210, None, "B", "C", None, {"missing": ["m1", "m0"], "source": "sync"}),  # m0: lost at 1302
    ("repair_requested", 1220, "m1", None, "C", None, {"carrier": "s9"}),
    ("repair_requested", 1220, "m2", None, "C", None, {"carrier": "s9"}),
    ("repair_served", 1250, "m1", "A", "A", None, {"bytes": 90}),
    ("repair_served", 1260, "m1", "A", "B", None, {"bytes": 90}),
    ("repair_cancelled", 1265, "m1", "A", "C", None, {"what": "request", "via": "repair", "publisher": "A"}),
    ("received", 1270, "m1", "A", "C", 1, None),
    ("delivered", 1270, "m1", "A", "C", 1, {"repaired": True, "via": "repair", "publisher": "A", "after_lost": []}),
    ("store_query", 1280, None, None, "C", None, {"ids": 1}),
    ("store_answer", 1290, None, None, "C", None, {"found": 1}),
    ("received", 1300, "m2", "B", "C", 2, None),
    ("delivered", 1300, "m2", "B", "C", 2, {"repaired": False, "via": "store", "publisher": "S", "after_lost": ["m0"]}),
    ("delivered", 1301, "m3", "B", "C", 3, None),
    ("lost", 1302, "m0", "A", "C", None, {"dependants": ["m2"]}),
    ("possibly_acked", 1400, "m1", "A", "A", None, {"count": 1, "by": "B", "frame_ts": 1090}),
    ("possibly_acked", 1410, "m2", "B", "B", None, {"count": 1, "by": "C", "frame_ts": 1200}),
    ("acked", 1500, "m1", "A", "A", None, {"by_bloom": True, "by": "C", "frame_ts": 1260}),
    ("acked", 1510, "m2", "B", "B", None, {"by_bloom": False, "by": "A"}),
    ("ack_seen", 1520, "m2", "B", "B", None, {"by": "A", "frame": "m9"}),
    ("resent", 5600, "m3", "B", "B", 3, {"resends": 1, "bytes": 110}),
    ("rejected", 5700, "mx", "Z", "A", None, {"reason": "bad_signature"}),
    ("rejected", 5800, None, None, "A", None, {"reason": "undecryptable", "count": 3}),
]


def all_kinds_rows(source: str) -> list[dict]:
    """:data:`ALL_KINDS` as rows for the Python reduction (typed columns filled from detail)."""
    out = []
    for seq, (kind, ts, mid, snd, pid, lam, detail) in enumerate(ALL_KINDS, 1):
        out.append(
            {
                "source": source,
                "seq": seq,
                "ts_ms": ts,
                "kind": kind,
                "channel_id": CHANNEL,
                "message_id": mid,
                "sender_id": snd,
                "participant_id": pid,
                "lamport_timestamp": lam,
                **{col: (detail or {}).get(key) for col, key in TYPED_FROM_DETAIL.items()},
            }
        )
    return out


def write_all_kinds_sim(folder: Path, fmt: int) -> Path:
    """:data:`ALL_KINDS` as a simulation directory of format ``fmt`` (1: every fact in detail; 2: typed columns)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from sdschat.sim.output import BASE_COLUMNS, EVENT_SCHEMA

    folder.mkdir(parents=True)
    rows = []
    for seq, (kind, ts, mid, snd, pid, lam, detail) in enumerate(ALL_KINDS, 1):
        row = {
            "seq": seq,
            "ts_ms": ts,
            "kind": kind,
            "channel_id": CHANNEL,
            "message_id": mid,
            "sender_id": snd,
            "participant_id": pid,
            "lamport_timestamp": lam,
        }
        if fmt == 1:
            row["detail"] = None if detail is None else json.dumps(detail)
        else:
            rest = {k: v for k, v in (detail or {}).items() if k not in TYPED_FROM_DETAIL.values()}
            row["detail"] = json.dumps(rest) if rest else None
            row.update({col: (detail or {}).get(key) for col, key in TYPED_FROM_DETAIL.items()})
        rows.append(row)
    schema = pa.schema([EVENT_SCHEMA.field(c) for c in BASE_COLUMNS]) if fmt == 1 else EVENT_SCHEMA
    pq.write_table(pa.Table.from_pylist(rows, schema), folder / "events-00000.parquet")
    (folder / "meta.json").write_text(json.dumps({"format": f"sdschat-sim/{fmt}", "participants": 3}))
    return folder


def write_all_kinds_db(path: Path, version: int) -> Path:
    """:data:`ALL_KINDS` in a node database of schema ``version`` (rows written as the node writes them)."""
    import json
    import sqlite3

    from sdschat.store import migrate as store_migrate

    conn = sqlite3.connect(path, isolation_level=None)
    try:
        store_migrate.migrate(conn, [m for m in store_migrate.load_migrations() if m.version <= version])
        conn.execute(
            "INSERT INTO channels (channel_id, participant_id, lamport_timestamp) VALUES (?, 'C', 0)", (CHANNEL,)
        )
        conn.executemany(
            "INSERT INTO events (ts_ms, kind, channel_id, message_id, sender_id, participant_id, lamport_timestamp,"
            " detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (ts, kind, CHANNEL, mid, snd, pid, lam, None if d is None else json.dumps(d))
                for kind, ts, mid, snd, pid, lam, d in ALL_KINDS
            ],
        )
    finally:
        conn.close()
    return path


#: fixtures that start something costly once (a Spark run, a standalone cluster) for several tests
SHARED_FIXTURES = ("spark_run", "two_workers")


#: seconds added to the time limit of a test that asks for one of :data:`SHARED_FIXTURES`: pytest-timeout counts a
#: fixture's making in the time of the test that asks for it first (whichever that is), and making ``spark_run`` (a
#: simulation, two reports and a sweep) has taken 280 s on a loaded two-core CI machine
SHARED_SETUP_S = 600


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``--dist loadgroup``, as .ci/run runs the suite) the tests that share one of
    :data:`SHARED_FIXTURES` run on one worker, so it is made once, not once per worker that gets one of them; and
    each of them may take :data:`SHARED_SETUP_S` longer than its own limit, for the making."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        for name in SHARED_FIXTURES:
            if name in names:
                item.add_marker(pytest.mark.xdist_group(name))
                limit = item.get_closest_marker("timeout")
                own = limit.args[0] if limit is not None and limit.args else config.getini("timeout")
                item.add_marker(pytest.mark.timeout(float(own) + SHARED_SETUP_S), append=False)
                break
