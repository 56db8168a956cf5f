"""The report's reduction as Spark SQL over the view ``events`` (the typed event columns plus ``source``).

How the work is shaped
----------------------
* **Two passes over the bulk.** ``km``: every event, narrow columns, grouped
  by (source, kind, message, sender) -- a few rows per message, from which
  come the counts and bytes per kind, each source's span and ``msg``, one row
  per message with its sender and first send. ``pm``: the ``sent``,
  ``received``, ``delivered``, ``acked`` and ``lost`` events and each id a
  ``missing`` event names, one row per *(source, message, participant)* with
  the first time of each, whether a delivery came through repair, and its log
  entry; joined with ``msg`` into the cached ``pmm``, from which every
  per-message, per-participant, latency, gap, backlog and log-hash table is
  derived (a gap is a row with ``detected_ts``: what closed it is on the same
  row, no join). Every aggregate over the bulk is a number (a string min/max
  makes Spark sort instead of hash).
* **Narrow passes for the rest.** The repair traffic (rounds, load per member), the bloom evidence and
  the ``received`` events it names filter on ``kind``, which the simulator's shards are sorted by, so Parquet skips the
  row groups of every other kind.
* **No JSON, no Python UDF**: the facts are typed columns
  (``migrations/0004_typed_events.sql``).
* **Bounded driver memory.** What is collected to the driver is per message,
  per participant, per latency value, per kind or per source: never per
  event. The two per-event tables the report keeps (repair rounds, bloom
  evidence) are written to Parquet by the executors (``detail_dir``); only
  their totals per source come back.
* After ``pmm`` is built, the queries run a few at once.

Each query yields one table of :class:`sdschat.pipeline.metrics.Reduced`, with
the same columns in the same order; :func:`sdschat.pipeline.metrics.reduce_events`
is the same reduction in Python (the integration test checks they agree).
"""

from __future__ import annotations

import time
from pathlib import Path

from .metrics import BACKLOG_BUCKETS, PUBLISH_KINDS

__all__ = [
    "QUERIES",
    "DERIVED_VIEWS",
    "DETAIL_TABLES",
    "LOG_ENTRIES_IN_MEMORY",
    "LOG_KEYS_CONF",
    "log_keys_in_memory",
    "reduce_with_spark",
]

#: views the queries share, registered in this order (:data:`CACHED_VIEWS` are computed once and kept)
DERIVED_VIEWS = {
    # one row per (source, kind, message, sender): one narrow pass over every event, a few rows per message
    # (their counts give kind_counts and wire_bytes; the message kinds give msg)
    "km": """
        SELECT source, kind, message_id, sender_id, count(*) AS n, sum(bytes) AS bytes, min(ts_ms) AS first_ts,
               max(ts_ms) AS last_ts
        FROM events GROUP BY source, kind, message_id, sender_id""",
    # each source's first and last event, and the width of its backlog buckets (ceil of span / buckets)
    "span": f"""
        SELECT source, t0, (t1 - t0 + {BACKLOG_BUCKETS}) div {BACKLOG_BUCKETS} AS width
        FROM (SELECT source, min(first_ts) AS t0, max(last_ts) AS t1 FROM km GROUP BY source)""",
    # one row per message seen in a sent/received/delivered event: its sender (the smallest named) and when it
    # was first sent
    "msg": """
        SELECT source, message_id, min(sender_id) AS sender_id,
               min(CASE WHEN kind = 'sent' THEN first_ts END) AS sent_ts
        FROM km WHERE kind IN ('sent', 'received', 'delivered') AND message_id IS NOT NULL
        GROUP BY source, message_id""",
    # one row per (source, message, participant) that sent, received, delivered, acked, noted missing or declared
    # lost it: the one pass over the bulk of the rows (a ``missing`` event counts once for each id it names). Every
    # aggregate is a number, so Spark aggregates in a hash map (a string min/max would make it sort the rows).
    "pm": """
        SELECT source, message_id, participant_id,
               min(CASE WHEN kind = 'sent' THEN ts_ms END) AS sent_ts,
               min(CASE WHEN kind = 'received' THEN ts_ms END) AS received_ts,
               min(CASE WHEN kind = 'delivered' THEN ts_ms END) AS delivered_ts,
               max(CASE WHEN kind = 'delivered' THEN CASE WHEN repaired THEN 1 ELSE 0 END END) AS repaired,
               min(CASE WHEN kind = 'acked' THEN ts_ms END) AS acked_ts,
               min(CASE WHEN kind IN ('sent', 'delivered') THEN lamport_timestamp END) AS log_lamport,
               max(CASE WHEN kind IN ('sent', 'delivered') THEN 1 ELSE 0 END) AS in_log,
               min(CASE WHEN kind = 'missing' THEN ts_ms END) AS detected_ts,
               min(CASE WHEN kind = 'lost' THEN ts_ms END) AS lost_ts
        FROM (SELECT source, kind, message_id, participant_id, ts_ms, repaired, lamport_timestamp FROM events
              WHERE kind IN ('sent', 'received', 'delivered', 'acked', 'lost') AND message_id IS NOT NULL
            UNION ALL
              SELECT source, kind, mid AS message_id, participant_id, ts_ms, NULL AS repaired,
                     NULL AS lamport_timestamp
              FROM events LATERAL VIEW explode(missing_ids) ids AS mid WHERE kind = 'missing')
        GROUP BY source, message_id, participant_id""",
    # pm with its message's sender and first send (none for an id only noted missing, acked or lost)
    "pmm": """
        SELECT p.*, m.sender_id, m.sent_ts AS msg_sent_ts, p.participant_id <=> m.sender_id AS is_sender
        FROM pm p LEFT JOIN msg m ON m.source = p.source AND m.message_id = p.message_id""",
    # every latency the report gives, as histograms per sender, from one pass over pmm (a row gives up to four):
    # send to shown (first copy) and to delivered in order, at each receiver; send to ack, at the sender; gap
    # noticed to repaired (delivered). A time that is not there (NULL) makes the latency NULL: no row
    "hist": """
        SELECT source, sender_id, metric, latency_ms, count(*) AS n FROM (
            SELECT source, sender_id, stack(4,
                'send_to_shown', received_ts - msg_sent_ts,
                'send_to_deliver', delivered_ts - msg_sent_ts,
                'send_to_ack', CASE WHEN is_sender THEN acked_ts - msg_sent_ts END,
                'repair', CASE WHEN delivered_ts >= detected_ts THEN delivered_ts - detected_ts END)
                AS (metric, latency_ms)
            FROM pmm)
        WHERE latency_ms IS NOT NULL
        GROUP BY source, sender_id, metric, latency_ms""",
    # the backlog's steps per bucket of its source's span (metrics.backlog_series), from one pass over pmm: waiting
    # +1 when a message is shown, -1 when it is delivered in order (if later); gaps +1 when a gap is noted, -1 when
    # it is filled (received) or given up (lost), if later; an interval open to the end has no -1
    "backlog_steps": """
        SELECT e.source, (e.ts - s.t0) div s.width AS bucket, sum(e.dw) AS waiting, sum(e.dg) AS gaps
        FROM (SELECT source, stack(4, CASE WHEN w THEN received_ts END, 1, 0,
                                      CASE WHEN w THEN delivered_ts END, -1, 0,
                                      CASE WHEN g THEN detected_ts END, 0, 1,
                                      CASE WHEN g THEN gap_end END, 0, -1) AS (ts, dw, dg)
              FROM (SELECT source, received_ts, delivered_ts, detected_ts, least(received_ts, lost_ts) AS gap_end,
                           received_ts IS NOT NULL AND (delivered_ts IS NULL OR delivered_ts > received_ts) AS w,
                           detected_ts IS NOT NULL AND (gap_end IS NULL OR gap_end > detected_ts) AS g
                    FROM pmm WHERE received_ts IS NOT NULL OR detected_ts IS NOT NULL)) e
        JOIN span s ON s.source = e.source
        WHERE e.ts IS NOT NULL
        GROUP BY e.source, (e.ts - s.t0) div s.width""",
    # repair requests and answers numbered into rounds (a round starts at each request; see metrics.repair_rounds)
    "repair_rounds_v": """
        SELECT source, message_id, round, min(CASE WHEN k = 0 THEN ts_ms END) AS started_ts,
               sum(k) AS responses, sum(1 - k) AS requests
        FROM (SELECT source, message_id, ts_ms, k,
                     sum(1 - k) OVER (PARTITION BY source, message_id ORDER BY ts_ms, k, participant_id
                                      ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS round
              FROM (SELECT source, message_id, ts_ms, participant_id,
                           CASE WHEN kind = 'repair_requested' THEN 0 ELSE 1 END AS k
                    FROM events WHERE kind IN ('repair_requested', 'repair_served')))
        GROUP BY source, message_id, round""",
    # every bloom-filter ack evidence (few rows: only a message's sender records them)
    "evidence": """
        SELECT source, participant_id, message_id, kind, ts_ms, by_id, frame_ts
        FROM events WHERE kind = 'possibly_acked' OR (kind = 'acked' AND by_bloom)""",
    # ... judged against when its named participant first received the message: the received events it names
    # are picked by a semi join (the evidence is broadcast, the events are not shuffled), then joined to it
    "bloom_v": """
        SELECT source, participant_id, message_id, kind, ts_ms, by_ AS by, frame_ts, by_received_ts,
               false_positive,
               max(CASE WHEN false_positive THEN 1 ELSE 0 END)
                   OVER (PARTITION BY source, participant_id, message_id ORDER BY ts_ms
                         RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS chain_false
        FROM (SELECT e.source, e.participant_id, e.message_id, e.kind, e.ts_ms, e.by_id AS by_, e.frame_ts,
                     r.received_ts AS by_received_ts,
                     CASE WHEN e.by_id IS NULL OR e.frame_ts IS NULL THEN NULL
                          ELSE r.received_ts IS NULL OR r.received_ts > e.frame_ts END AS false_positive
              FROM evidence e
              LEFT JOIN (SELECT p.source, p.participant_id, p.message_id, min(p.ts_ms) AS received_ts
                         FROM events p LEFT SEMI JOIN evidence x
                           ON x.source = p.source AND x.by_id = p.participant_id AND x.message_id = p.message_id
                         WHERE p.kind = 'received'
                         GROUP BY p.source, p.participant_id, p.message_id) r
                ON r.source = e.source AND r.participant_id = e.by_id AND r.message_id = e.message_id)""",
}

#: computed once and kept on the executors: pmm is read by most queries, the others by two each
CACHED_VIEWS = ("km", "pmm", "hist", "evidence", "repair_rounds_v", "bloom_v")

QUERIES = {
    "kinds": """
        SELECT source, kind, sum(n) AS n, sum(bytes) AS bytes FROM km GROUP BY source, kind""",
    "messages": """
        SELECT m.source, m.message_id, m.sender_id, m.sent_ts, coalesce(a.delivered_to, 0), a.first_ts, a.last_ts,
               coalesce(a.repaired, 0)
        FROM msg m LEFT JOIN (
            SELECT source, message_id, count(*) AS delivered_to, min(delivered_ts) AS first_ts,
                   max(delivered_ts) AS last_ts, sum(repaired) AS repaired
            FROM pmm WHERE delivered_ts IS NOT NULL AND NOT is_sender
            GROUP BY source, message_id) a
          ON a.source = m.source AND a.message_id = m.message_id""",
    "latency_hist": """
        SELECT source, metric, latency_ms, sum(n) AS n FROM hist GROUP BY source, metric, latency_ms""",
    # participants and their rebuilt logs, in one pass over pmm
    "per_participant": """
        SELECT source, participant_id,
               count(CASE WHEN delivered_ts IS NOT NULL AND NOT is_sender THEN 1 END) AS delivered,
               count(sent_ts) AS sent,
               sha2(concat_ws('\\n', transform(sort_array(collect_list(
                   CASE WHEN in_log = 1 THEN struct(log_lamport, message_id) END)), x -> x.message_id)), 256)
                   AS log_hash,
               count(CASE WHEN in_log = 1 THEN 1 END) AS log_length
        FROM pmm GROUP BY source, participant_id""",
    # exact nearest-rank percentiles per sender (metrics.percentiles) from the histograms
    "sender_latency": """
        SELECT source, sender_id, metric, max(total) AS n,
               min(CASE WHEN cum >= ceil(total * 50 / 100) THEN latency_ms END) AS p50,
               min(CASE WHEN cum >= ceil(total * 95 / 100) THEN latency_ms END) AS p95,
               min(CASE WHEN cum >= ceil(total * 99 / 100) THEN latency_ms END) AS p99,
               max(latency_ms) AS max
        FROM (SELECT *, sum(n) OVER (PARTITION BY source, sender_id, metric ORDER BY latency_ms
                                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS cum,
                        sum(n) OVER (PARTITION BY source, sender_id, metric) AS total
              FROM hist WHERE metric IN ('send_to_shown', 'send_to_deliver'))
        GROUP BY source, sender_id, metric""",
    "repair_totals": """
        SELECT source, sum(requests) AS requests, sum(responses) AS responses,
               count(CASE WHEN responses > 0 THEN 1 END) AS rounds_answered,
               count(CASE WHEN responses > 1 THEN 1 END) AS rounds_with_duplicates,
               coalesce(sum(CASE WHEN responses > 1 THEN responses - 1 END), 0) AS duplicate_responses
        FROM repair_rounds_v GROUP BY source""",
    "repair_load": """
        SELECT source, participant_id, count(CASE WHEN kind = 'repair_requested' THEN 1 END) AS requests,
               count(CASE WHEN kind = 'repair_served' THEN 1 END) AS answers,
               sum(CASE WHEN kind = 'repair_served' THEN bytes END) AS answer_bytes,
               count(CASE WHEN kind = 'repair_cancelled' THEN 1 END) AS called_off
        FROM events WHERE kind IN ('repair_requested', 'repair_served', 'repair_cancelled')
        GROUP BY source, participant_id""",
    # every bucket of every source, the running sums of the intervals starting and ending in it
    "backlog": f"""
        SELECT s.source, b.bucket, s.t0 + b.bucket * s.width AS bucket_start_ms,
               sum(coalesce(d.waiting, 0)) OVER w AS waiting, sum(coalesce(d.gaps, 0)) OVER w AS gaps_open
        FROM span s CROSS JOIN (SELECT explode(sequence(0, {BACKLOG_BUCKETS - 1})) AS bucket) b
        LEFT JOIN backlog_steps d
          ON d.source = s.source AND d.bucket = b.bucket
        WINDOW w AS (PARTITION BY s.source ORDER BY b.bucket ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)""",
    "bloom_totals": """
        SELECT source, count(*) AS evidence, count(false_positive) AS judged,
               count(CASE WHEN false_positive THEN 1 END) AS false_evidence,
               count(CASE WHEN kind = 'acked' THEN 1 END) AS acks,
               count(CASE WHEN kind = 'acked' AND chain_false = 1 THEN 1 END) AS false_acks
        FROM bloom_v GROUP BY source""",
}

#: per-event tables of the report: written by the executors, never collected (rows as in metrics.Report)
DETAIL_TABLES = {
    "repair_rounds": """
        SELECT source, message_id, round, started_ts, responses FROM repair_rounds_v WHERE responses > 0""",
    "bloom_evidence": """
        SELECT source, participant_id, message_id, kind, ts_ms, by, frame_ts, by_received_ts, false_positive
        FROM bloom_v""",
}


def reduce_with_spark(spark, on_table=None, detail_dir: Path | None = None, parallel: int = 3):
    """Run every query over the registered ``events`` view; returns a :class:`~sdschat.pipeline.metrics.Reduced`.

    ``on_table(name, seconds)`` is called after each table is collected. With
    ``detail_dir``, the per-event tables (:data:`DETAIL_TABLES`) are written
    there as Parquet by Spark (``NAME.parquet``, a folder of parts) and the
    returned reduction's ``repair_rounds`` and ``bloom_evidence`` are None;
    without it they are collected (small inputs, tests).

    The shared ``pmm`` is materialized first; then up to ``parallel`` queries
    run at once (Spark jobs from several threads share the executors: one
    query's planning and code generation on the driver overlaps another's
    tasks).
    """
    from concurrent.futures import ThreadPoolExecutor

    from .metrics import Reduced

    def timed(name, fn):
        t0 = time.perf_counter()
        result = fn()
        if on_table is not None:
            on_table(name, time.perf_counter() - t0)
        return result

    def views():
        for name, sql in DERIVED_VIEWS.items():
            spark.sql(sql).createOrReplaceTempView(name)
        for name in CACHED_VIEWS:
            spark.table(name).cache()

    timed("views", views)
    out = Reduced()
    keys_before = spark.conf.get(LOG_KEYS_CONF, None)

    def query(name: str) -> None:
        rows = _collect(spark.sql(QUERIES[name]))
        if name == "kinds":
            out.kind_counts = [(s, k, n) for s, k, n, _b in rows]
            out.wire_bytes = [(s, k, n, b) for s, k, n, b in rows if k in PUBLISH_KINDS]
            keys = log_keys_in_memory(rows)
            if keys is not None and keys_before is None:  # (a value the caller set stays)
                spark.conf.set(LOG_KEYS_CONF, str(keys))
        elif name == "per_participant":
            out.participants = [(s, p, d, n) for s, p, d, n, _h, _l in rows if p is not None and (d > 0 or n > 0)]
            out.event_log_hashes = [(s, p, h, n) for s, p, _d, _n, h, n in rows if n > 0]
        else:
            setattr(out, name, rows)

    def detail(name: str) -> None:
        df = spark.sql(DETAIL_TABLES[name])
        if detail_dir is None:
            setattr(out, name, _collect(df))
        else:
            df.write.mode("overwrite").parquet(str(Path(detail_dir) / f"{name}.parquet"))
            setattr(out, name, None)

    try:
        with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
            timed("km", lambda: query("kinds"))  # pmm needs km (through msg)
            jobs = [pool.submit(timed, "pmm", lambda: spark.table("pmm").count())]
            jobs[0].result()
            jobs += [pool.submit(timed, name, lambda name=name: query(name)) for name in QUERIES if name != "kinds"]
            jobs += [pool.submit(timed, name, lambda name=name: detail(name)) for name in DETAIL_TABLES]
            for job in jobs:
                job.result()
    finally:
        for name in CACHED_VIEWS:
            spark.catalog.uncacheTable(name)
        if keys_before is None:
            spark.conf.unset(LOG_KEYS_CONF)
    return out


#: the Spark setting that bounds the participants whose rebuilt logs (per_participant's collect_list) one task
#: holds in a hash map before it sorts its rows instead (Spark's default, 128, makes a report of 2,000
#: participants sort half a million log entries)
LOG_KEYS_CONF = "spark.sql.objectHashAggregate.sortBased.fallbackThreshold"

#: the log entries (~100 bytes each) that may be held that way: every log of the report, or as Spark bounds them
LOG_ENTRIES_IN_MEMORY = 2_000_000


def log_keys_in_memory(kinds: list[tuple]) -> int | None:
    """The participants whose logs a task may hold at once, from the ``kinds`` rows (source, kind, n, bytes):
    all of them (65,536) when every log entry of every source (its ``sent`` and ``delivered`` events) is at most
    :data:`LOG_ENTRIES_IN_MEMORY`; else None, Spark's own bound (more would be held, then sorted all the same)."""
    entries = sum(n or 0 for _s, kind, n, _b in kinds if kind in ("sent", "delivered"))
    return 65_536 if entries <= LOG_ENTRIES_IN_MEMORY else None


def _collect(df) -> list[tuple]:
    table = df.toArrow()
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return list(zip(*cols)) if cols else []
