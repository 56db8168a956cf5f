-- sdschat migration 0003: a long-running profile stays under 1 KB per chat message.
--
-- Where the bytes went (bench/db_size.py, 3 nodes x 1,000 messages): the SDS-R
-- cache (bounded, 10,000 messages by default), the bloom ids (bounded), the
-- events table (unbounded, ~460 B per message with its index) and, per message
-- for ever, messages + sds_log and their indexes (~1 KB). This migration:
--
-- 1. Stores the SDS log in log order: sds_log becomes a WITHOUT ROWID table
--    keyed (channel_id, lamport_timestamp, message_id), the order the engine
--    reads it in, so the separate sds_log_order index (a second copy of every
--    id) goes. A log entry never changes its Lamport timestamp, so the key is
--    stable; upserts name the new key (sdschat/store/sql.py UPSERT_LOG).
--
-- 2. Makes events compactable: the events table keeps every row in full for a
--    recent window (the node's events_keep, newest rows); older rows of the
--    per-message kinds (sent, received, acked, and delivered without detail)
--    are folded into one small row per message in message_events, keyed by
--    the message's rowid in `messages` (the same rowid the search index uses),
--    then deleted. The rare rows that explain a repair (missing,
--    repair_requested, repair_served, lost, rejected, and a delivery through
--    repair or after a loss, which carries detail) are never folded. The high-volume kinds
--    whose per-message total `messages` already keeps (resent: resends,
--    possibly_acked: possible_ack_count) and the sync frames (sync_sent,
--    sync_received: not about a chat message) are deleted with the window.
--    Rows are only ever deleted by compaction: updates stay refused.
--
-- 3. event_history: the events as the report and `export --events` read them,
--    the full rows plus one row per folded first sent/received/delivered/acked
--    time, with a negative seq (-(4 * msg + k)) so compacted history sorts
--    before the window.
--
-- (Not a schema change, said here for whoever reads the file: from this
-- version on, the causal_history columns of sds_outgoing, sds_incoming and
-- sds_cache are written in a compact binary form, sdschat/store/rows.py
-- history_to_db, less than half the JSON text; rows written before stay JSON
-- and are read as such. The SDS-R cache turns over, so it shrinks as it goes.)
--
-- The events older than the default window (the newest 10,000 rows) of an
-- existing database are folded here; the node folds the rest as it runs.

CREATE TABLE sds_log_v3 (
    channel_id        TEXT NOT NULL REFERENCES channels(channel_id) ON DELETE CASCADE,
    lamport_timestamp INTEGER NOT NULL,
    message_id        TEXT NOT NULL,
    sender_id         TEXT NOT NULL,
    retrieval_hint    BLOB,
    PRIMARY KEY (channel_id, lamport_timestamp, message_id)
) WITHOUT ROWID;

INSERT INTO sds_log_v3 (channel_id, lamport_timestamp, message_id, sender_id, retrieval_hint)
SELECT channel_id, lamport_timestamp, message_id, sender_id, retrieval_hint FROM sds_log;

DROP INDEX sds_log_order;
DROP TABLE sds_log;
ALTER TABLE sds_log_v3 RENAME TO sds_log;

-- msg = rowid of the message in `messages`; each time is the first of its kind;
-- flags: 2 = acknowledged through a bloom filter
CREATE TABLE message_events (
    msg          INTEGER PRIMARY KEY,
    sent_ms      INTEGER,
    received_ms  INTEGER,
    delivered_ms INTEGER,
    acked_ms     INTEGER,
    flags        INTEGER NOT NULL DEFAULT 0
);

CREATE TRIGGER messages_events_forget AFTER DELETE ON messages
BEGIN
    DELETE FROM message_events WHERE msg = old.rowid;
END;

DROP TRIGGER events_no_delete;

CREATE VIEW event_history (seq, ts_ms, kind, channel_id, message_id, sender_id, participant_id,
                           lamport_timestamp, detail) AS
SELECT seq, ts_ms, kind, channel_id, message_id, sender_id, participant_id, lamport_timestamp, detail
FROM events
UNION ALL
SELECT -4 * e.msg, e.sent_ms, 'sent', m.channel_id, m.message_id, m.sender_id, c.participant_id,
       m.lamport_timestamp, NULL
FROM message_events e JOIN messages m ON m.rowid = e.msg JOIN channels c ON c.channel_id = m.channel_id
WHERE e.sent_ms IS NOT NULL
UNION ALL
SELECT -4 * e.msg - 1, e.received_ms, 'received', m.channel_id, m.message_id, m.sender_id, c.participant_id,
       m.lamport_timestamp, NULL
FROM message_events e JOIN messages m ON m.rowid = e.msg JOIN channels c ON c.channel_id = m.channel_id
WHERE e.received_ms IS NOT NULL
UNION ALL
SELECT -4 * e.msg - 2, e.delivered_ms, 'delivered', m.channel_id, m.message_id, m.sender_id, c.participant_id,
       m.lamport_timestamp, NULL
FROM message_events e JOIN messages m ON m.rowid = e.msg JOIN channels c ON c.channel_id = m.channel_id
WHERE e.delivered_ms IS NOT NULL
UNION ALL
SELECT -4 * e.msg - 3, e.acked_ms, 'acked', m.channel_id, m.message_id, c.participant_id, c.participant_id,
       NULL, CASE WHEN e.flags & 2 THEN '{"by_bloom":true}' ELSE '{"by_bloom":false}' END
FROM message_events e JOIN messages m ON m.rowid = e.msg JOIN channels c ON c.channel_id = m.channel_id
WHERE e.acked_ms IS NOT NULL;

-- fold the events of an existing database older than the default window
-- (the same statements as sdschat/store/sql.py FOLD_EVENTS and DROP_FOLDED,
-- with the bound read from kv)
INSERT INTO kv (key, value)
SELECT 'events_compacted_through', CAST(max(0, coalesce(max(seq), 0) - 10000) AS TEXT) FROM events;

INSERT INTO message_events (msg, sent_ms, received_ms, delivered_ms, acked_ms, flags)
SELECT m.rowid,
       min(CASE WHEN ev.kind = 'sent' THEN ev.ts_ms END),
       min(CASE WHEN ev.kind = 'received' THEN ev.ts_ms END),
       min(CASE WHEN ev.kind = 'delivered' THEN ev.ts_ms END),
       min(CASE WHEN ev.kind = 'acked' THEN ev.ts_ms END),
       max(CASE WHEN ev.kind = 'acked' AND json_valid(ev.detail)
                     AND json_extract(ev.detail, '$.by_bloom') = 1 THEN 2 ELSE 0 END)
FROM events ev
JOIN channels c ON c.channel_id = ev.channel_id AND c.participant_id = ev.participant_id
JOIN messages m ON m.channel_id = ev.channel_id AND m.message_id = ev.message_id
WHERE ev.seq <= (SELECT CAST(value AS INTEGER) FROM kv WHERE key = 'events_compacted_through')
  AND (ev.kind IN ('sent', 'received', 'acked') OR (ev.kind = 'delivered' AND ev.detail IS NULL))
GROUP BY m.rowid;

DELETE FROM events
WHERE seq <= (SELECT CAST(value AS INTEGER) FROM kv WHERE key = 'events_compacted_through')
  AND (kind IN ('resent', 'possibly_acked', 'sync_sent', 'sync_received')
       OR ((kind IN ('sent', 'received', 'acked') OR (kind = 'delivered' AND detail IS NULL))
           AND participant_id = (SELECT c.participant_id FROM channels c WHERE c.channel_id = events.channel_id)
           AND EXISTS (SELECT 1 FROM messages m
                       WHERE m.channel_id = events.channel_id AND m.message_id = events.message_id)));
