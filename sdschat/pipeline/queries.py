"""The report's reduction as Spark SQL over the view ``events`` (the events table plus ``source``).

Each query yields one table of :class:`sdschat.pipeline.metrics.Reduced`, with
the same columns in the same order; :func:`sdschat.pipeline.metrics.reduce_events`
is the same reduction in Python (the integration test checks they agree).
Every result is small (per message, per participant, per latency value, or
the rare repair/bloom events), so it is collected to the driver with Arrow.
"""

from __future__ import annotations

__all__ = ["QUERIES", "DERIVED_VIEWS", "reduce_with_spark"]

#: views the queries share (registered in this order)
DERIVED_VIEWS = {
    "ev_sender": """
        SELECT source, message_id, min(sender_id) AS sender_id
        FROM events
        WHERE kind IN ('sent', 'received', 'delivered') AND message_id IS NOT NULL
        GROUP BY source, message_id""",
    "ev_sent": """
        SELECT source, message_id, min(ts_ms) AS sent_ts, min(sender_id) AS sender_id
        FROM events WHERE kind = 'sent'
        GROUP BY source, message_id""",
    "ev_delivered": """
        SELECT source, message_id, participant_id, min(ts_ms) AS ts, min(sender_id) AS sender_id,
               max(CASE WHEN get_json_object(detail, '$.repaired') = 'true' THEN 1 ELSE 0 END) AS repaired
        FROM events WHERE kind = 'delivered'
        GROUP BY source, message_id, participant_id""",
}

QUERIES = {
    "kind_counts": """
        SELECT source, kind, count(*) AS n FROM events GROUP BY source, kind""",
    "messages": """
        SELECT s.source, s.message_id, s.sender_id, t.sent_ts,
               coalesce(a.n, 0) AS delivered_to, a.first_ts, a.last_ts, coalesce(a.repaired, 0) AS repaired
        FROM ev_sender s
        LEFT JOIN ev_sent t ON t.source = s.source AND t.message_id = s.message_id
        LEFT JOIN (
            SELECT d.source, d.message_id, count(*) AS n, min(d.ts) AS first_ts, max(d.ts) AS last_ts,
                   sum(d.repaired) AS repaired
            FROM ev_delivered d
            JOIN ev_sender x ON x.source = d.source AND x.message_id = d.message_id
            WHERE x.sender_id IS NULL OR d.participant_id <> x.sender_id
            GROUP BY d.source, d.message_id
        ) a ON a.source = s.source AND a.message_id = s.message_id""",
    "latency_hist": """
        SELECT source, metric, latency_ms, count(*) AS n FROM (
            SELECT d.source, 'send_to_deliver' AS metric, d.ts - t.sent_ts AS latency_ms
            FROM ev_delivered d JOIN ev_sent t ON t.source = d.source AND t.message_id = d.message_id
          UNION ALL
            SELECT a.source, 'send_to_ack' AS metric, a.ts - t.sent_ts AS latency_ms
            FROM (SELECT source, message_id, participant_id, min(ts_ms) AS ts FROM events WHERE kind = 'acked'
                  GROUP BY source, message_id, participant_id) a
            JOIN ev_sent t ON t.source = a.source AND t.message_id = a.message_id AND t.sender_id = a.participant_id
          UNION ALL
            SELECT m.source, 'repair' AS metric, d.ts - m.detected AS latency_ms
            FROM (SELECT source, participant_id, mid, min(ts_ms) AS detected FROM (
                      SELECT source, participant_id, ts_ms,
                             explode(from_json(get_json_object(detail, '$.missing'), 'array<string>')) AS mid
                      FROM events WHERE kind = 'missing')
                  GROUP BY source, participant_id, mid) m
            JOIN ev_delivered d ON d.source = m.source AND d.participant_id = m.participant_id
                                AND d.message_id = m.mid AND d.ts >= m.detected
        ) GROUP BY source, metric, latency_ms""",
    "participants": """
        SELECT source, participant_id,
               count(DISTINCT CASE WHEN kind = 'delivered' AND (sender_id IS NULL OR sender_id <> participant_id)
                              THEN message_id END) AS delivered,
               count(DISTINCT CASE WHEN kind = 'sent' THEN message_id END) AS sent
        FROM events WHERE kind IN ('delivered', 'sent') AND participant_id IS NOT NULL
        GROUP BY source, participant_id""",
    "repair_events": """
        SELECT source, message_id, ts_ms, kind, participant_id
        FROM events WHERE kind IN ('repair_requested', 'repair_served')""",
    "bloom_evidence": """
        SELECT e.source, e.participant_id, e.message_id, e.kind, e.ts_ms, e.by_, e.frame_ts, r.received_ts
        FROM (SELECT source, participant_id, message_id, kind, ts_ms,
                     get_json_object(detail, '$.by') AS by_,
                     cast(get_json_object(detail, '$.frame_ts') AS BIGINT) AS frame_ts
              FROM events
              WHERE kind = 'possibly_acked'
                 OR (kind = 'acked' AND get_json_object(detail, '$.by_bloom') = 'true')) e
        LEFT JOIN (SELECT source, participant_id, message_id, min(ts_ms) AS received_ts
                   FROM events WHERE kind = 'received' GROUP BY source, participant_id, message_id) r
          ON r.source = e.source AND r.participant_id = e.by_ AND r.message_id = e.message_id""",
    "wire_bytes": """
        SELECT source, kind, count(*) AS frames, sum(cast(get_json_object(detail, '$.bytes') AS BIGINT)) AS bytes
        FROM events WHERE kind IN ('sent', 'resent', 'sync_sent', 'repair_served')
        GROUP BY source, kind""",
    "event_log_hashes": """
        SELECT source, participant_id,
               sha2(concat_ws('\\n', transform(array_sort(collect_list(struct(lamport_timestamp, message_id))),
                                              x -> x.message_id)), 256) AS log_hash,
               count(*) AS log_length
        FROM (SELECT DISTINCT source, participant_id, message_id, lamport_timestamp
              FROM events WHERE kind IN ('sent', 'delivered') AND message_id IS NOT NULL)
        GROUP BY source, participant_id""",
}


def reduce_with_spark(spark, on_table=None):
    """Run every query over the registered ``events`` view; returns a :class:`~sdschat.pipeline.metrics.Reduced`.

    ``on_table(name, seconds)`` is called after each table is collected.
    """
    import time

    from .metrics import Reduced

    for name, sql in DERIVED_VIEWS.items():
        spark.sql(sql).createOrReplaceTempView(name)
    # the derived views are read by several queries: compute each once
    for name in DERIVED_VIEWS:
        spark.table(name).cache()
    out = Reduced()
    for name, sql in QUERIES.items():
        t0 = time.perf_counter()
        table = spark.sql(sql).toArrow()
        cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
        setattr(out, name, list(zip(*cols)) if cols else [])
        if on_table is not None:
            on_table(name, time.perf_counter() - t0)
    for name in DERIVED_VIEWS:
        spark.catalog.uncacheTable(name)
    return out
