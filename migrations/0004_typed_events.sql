-- sdschat migration 0004: the facts the report reads out of an event's detail become typed columns.
--
-- The report (sdschat report, a Spark job) used to parse `detail` (JSON text)
-- on every row for a delivery's repaired flag, a gap's missing ids, a frame's
-- size, and the bloom-filter evidence of an ack. Those are now columns of the
-- event schema, the same names and meanings in a node's database and in a
-- simulation's Parquet (sdschat/sim/output.py TYPED_COLUMNS):
--
--   repaired     delivered: the message came through a repair (1) or not (NULL)
--   by_bloom     acked: 1 through a bloom filter, 0 through a causal history
--   bytes        sent, resent, sync_sent, repair_served: the frame's size
--   by_id        acked, possibly_acked: whose frame carried the evidence
--   frame_ts     acked, possibly_acked: when that frame was made (simulations)
--   missing_ids  missing: the ids noted missing (a JSON array here; a list in Parquet)
--   carrier      repair_requested: the frame that carried the request
--
-- In a database they are VIRTUAL generated columns over `detail`, which the
-- node keeps writing as before: the values cannot disagree with the detail,
-- an existing database gains them without a rewrite (ALTER TABLE ADD COLUMN of
-- a virtual column touches no row, so the append-only trigger is not met),
-- and a row costs no byte more. A node database is small (its events are
-- compacted, sdschat/store/compaction.py): the report reads these columns
-- once, while staging, and Spark's hot path reads typed Parquet.
-- detail that is not a JSON object gives NULLs, never an error.

ALTER TABLE events ADD COLUMN repaired INTEGER
    GENERATED ALWAYS AS (CASE WHEN json_valid(detail) THEN json_extract(detail, '$.repaired') END) VIRTUAL;
ALTER TABLE events ADD COLUMN by_bloom INTEGER
    GENERATED ALWAYS AS (CASE WHEN json_valid(detail) THEN json_extract(detail, '$.by_bloom') END) VIRTUAL;
ALTER TABLE events ADD COLUMN bytes INTEGER
    GENERATED ALWAYS AS (CASE WHEN json_valid(detail) THEN json_extract(detail, '$.bytes') END) VIRTUAL;
ALTER TABLE events ADD COLUMN by_id TEXT
    GENERATED ALWAYS AS (CASE WHEN json_valid(detail) THEN json_extract(detail, '$.by') END) VIRTUAL;
ALTER TABLE events ADD COLUMN frame_ts INTEGER
    GENERATED ALWAYS AS (CASE WHEN json_valid(detail) THEN json_extract(detail, '$.frame_ts') END) VIRTUAL;
ALTER TABLE events ADD COLUMN missing_ids TEXT
    GENERATED ALWAYS AS (CASE WHEN json_valid(detail) AND json_type(detail, '$.missing') = 'array'
                              THEN json_extract(detail, '$.missing') END) VIRTUAL;
ALTER TABLE events ADD COLUMN carrier TEXT
    GENERATED ALWAYS AS (CASE WHEN json_valid(detail) THEN json_extract(detail, '$.carrier') END) VIRTUAL;

-- event_history (migration 0003) with the typed columns: a folded ack keeps
-- whether it came through a bloom filter (message_events.flags & 2)
DROP VIEW event_history;

CREATE VIEW event_history (seq, ts_ms, kind, channel_id, message_id, sender_id, participant_id,
                           lamport_timestamp, detail, repaired, by_bloom, bytes, by_id, frame_ts,
                           missing_ids, carrier) AS
SELECT seq, ts_ms, kind, channel_id, message_id, sender_id, participant_id, lamport_timestamp, detail,
       repaired, by_bloom, bytes, by_id, frame_ts, missing_ids, carrier
FROM events
UNION ALL
SELECT -4 * e.msg, e.sent_ms, 'sent', m.channel_id, m.message_id, m.sender_id, c.participant_id,
       m.lamport_timestamp, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM message_events e JOIN messages m ON m.rowid = e.msg JOIN channels c ON c.channel_id = m.channel_id
WHERE e.sent_ms IS NOT NULL
UNION ALL
SELECT -4 * e.msg - 1, e.received_ms, 'received', m.channel_id, m.message_id, m.sender_id, c.participant_id,
       m.lamport_timestamp, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM message_events e JOIN messages m ON m.rowid = e.msg JOIN channels c ON c.channel_id = m.channel_id
WHERE e.received_ms IS NOT NULL
UNION ALL
SELECT -4 * e.msg - 2, e.delivered_ms, 'delivered', m.channel_id, m.message_id, m.sender_id, c.participant_id,
       m.lamport_timestamp, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM message_events e JOIN messages m ON m.rowid = e.msg JOIN channels c ON c.channel_id = m.channel_id
WHERE e.delivered_ms IS NOT NULL
UNION ALL
SELECT -4 * e.msg - 3, e.acked_ms, 'acked', m.channel_id, m.message_id, c.participant_id, c.participant_id,
       NULL, CASE WHEN e.flags & 2 THEN '{"by_bloom":true}' ELSE '{"by_bloom":false}' END,
       NULL, CASE WHEN e.flags & 2 THEN 1 ELSE 0 END, NULL, NULL, NULL, NULL, NULL
FROM message_events e JOIN messages m ON m.rowid = e.msg JOIN channels c ON c.channel_id = m.channel_id
WHERE e.acked_ms IS NOT NULL;
