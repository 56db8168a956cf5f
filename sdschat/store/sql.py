"""The SQL statements of the store: engine-state tables (``sds_*``, ``channels``) and application rows.

Upserts keep a row's ``seq`` (``INSERT ... ON CONFLICT DO UPDATE``), so ``ORDER BY seq``
reproduces the engine's insertion order.
"""

UPSERT_LOG = (
    "INSERT INTO sds_log (channel_id, message_id, lamport_timestamp, sender_id, retrieval_hint) VALUES (?,?,?,?,?) "
    "ON CONFLICT (channel_id, lamport_timestamp, message_id) DO UPDATE SET "
    "sender_id = excluded.sender_id, retrieval_hint = excluded.retrieval_hint"
)
UPSERT_OUT = (
    "INSERT INTO sds_outgoing (channel_id, message_id, lamport_timestamp, causal_history, content, sent_at, "
    "resends, next_resend, ack_senders) VALUES (?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT (channel_id, message_id) DO UPDATE SET lamport_timestamp = excluded.lamport_timestamp, "
    "causal_history = excluded.causal_history, content = excluded.content, sent_at = excluded.sent_at, "
    "resends = excluded.resends, next_resend = excluded.next_resend, ack_senders = excluded.ack_senders"
)
UPSERT_IN = (
    "INSERT INTO sds_incoming (channel_id, message_id, sender_id, lamport_timestamp, causal_history, content, "
    "received_at, unmet, repaired, after_lost, retrieval_hint) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT (channel_id, message_id) DO UPDATE SET sender_id = excluded.sender_id, "
    "lamport_timestamp = excluded.lamport_timestamp, causal_history = excluded.causal_history, "
    "content = excluded.content, received_at = excluded.received_at, unmet = excluded.unmet, "
    "repaired = excluded.repaired, after_lost = excluded.after_lost, retrieval_hint = excluded.retrieval_hint"
)
UPSERT_MISSING = (
    "INSERT INTO sds_missing (channel_id, message_id, sender_id, retrieval_hint, detected_at) VALUES (?,?,?,?,?) "
    "ON CONFLICT (channel_id, message_id) DO UPDATE SET sender_id = excluded.sender_id, "
    "retrieval_hint = excluded.retrieval_hint, detected_at = excluded.detected_at"
)
UPSERT_LOST = (
    "INSERT INTO sds_lost (channel_id, message_id, sender_id) VALUES (?,?,?) "
    "ON CONFLICT (channel_id, message_id) DO UPDATE SET sender_id = excluded.sender_id"
)
UPSERT_REQ = (
    "INSERT INTO sds_repair_requests (channel_id, message_id, sender_id, retrieval_hint, t_req, attempts) "
    "VALUES (?,?,?,?,?,?) ON CONFLICT (channel_id, message_id) DO UPDATE SET sender_id = excluded.sender_id, "
    "retrieval_hint = excluded.retrieval_hint, t_req = excluded.t_req, attempts = excluded.attempts"
)
UPSERT_RESP = (
    "INSERT INTO sds_repair_responses (channel_id, message_id, t_resp) VALUES (?,?,?) "
    "ON CONFLICT (channel_id, message_id) DO UPDATE SET t_resp = excluded.t_resp"
)
UPSERT_CACHE = (
    "INSERT INTO sds_cache (channel_id, message_id, sender_id, lamport_timestamp, causal_history, content) "
    "VALUES (?,?,?,?,?,?) ON CONFLICT (channel_id, message_id) DO UPDATE SET sender_id = excluded.sender_id, "
    "lamport_timestamp = excluded.lamport_timestamp, causal_history = excluded.causal_history, "
    "content = excluded.content"
)
INSERT_BLOOM = "INSERT INTO sds_bloom_ids (channel_id, message_id) VALUES (?,?)"
ROLL_BLOOM = (
    "DELETE FROM sds_bloom_ids WHERE channel_id = ?1 AND seq < (SELECT COALESCE(MIN(seq), 0) FROM "
    "(SELECT seq FROM sds_bloom_ids WHERE channel_id = ?1 ORDER BY seq DESC LIMIT ?2))"
)
DELETE = {
    name: f"DELETE FROM {table} WHERE channel_id = ? AND message_id = ?"
    for name, table in (
        ("out-", "sds_outgoing"),
        ("in-", "sds_incoming"),
        ("missing-", "sds_missing"),
        ("lost-", "sds_lost"),
        ("req-", "sds_repair_requests"),
        ("resp-", "sds_repair_responses"),
        ("cache-", "sds_cache"),
    )
}
SDS_TABLES = (
    "sds_log",
    "sds_outgoing",
    "sds_incoming",
    "sds_missing",
    "sds_lost",
    "sds_repair_requests",
    "sds_repair_responses",
    "sds_cache",
    "sds_bloom_ids",
    "sds_recent_syncs",
)
UPSERT_CHANNEL = (
    "INSERT INTO channels (channel_id, participant_id, lamport_timestamp, last_activity, sync_counter, "
    "next_sync_at, config) VALUES (?,?,?,?,?,?,?) ON CONFLICT (channel_id) DO UPDATE SET "
    "participant_id = excluded.participant_id, lamport_timestamp = excluded.lamport_timestamp, "
    "last_activity = excluded.last_activity, sync_counter = excluded.sync_counter, "
    "next_sync_at = excluded.next_sync_at, config = excluded.config"
)
UPSERT_MESSAGE = (
    "INSERT INTO messages (channel_id, message_id, sender_id, lamport_timestamp, content, state, "
    "possible_ack_count, resends, repaired, after_lost, received_at_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT (channel_id, message_id) DO UPDATE SET sender_id = excluded.sender_id, "
    "lamport_timestamp = excluded.lamport_timestamp, content = excluded.content, state = excluded.state, "
    "possible_ack_count = excluded.possible_ack_count, resends = excluded.resends, repaired = excluded.repaired, "
    "after_lost = excluded.after_lost, received_at_ms = excluded.received_at_ms"
)
UPDATE_MESSAGE = (
    "UPDATE messages SET state = COALESCE(?, state), possible_ack_count = COALESCE(?, possible_ack_count), "
    "resends = COALESCE(?, resends), repaired = COALESCE(?, repaired), after_lost = COALESCE(?, after_lost), "
    "received_at_ms = COALESCE(?, received_at_ms), content = COALESCE(?, content) "
    "WHERE channel_id = ? AND message_id = ?"
)
INSERT_EVENT = (
    "INSERT INTO events (ts_ms, kind, channel_id, message_id, sender_id, participant_id, lamport_timestamp, detail) "
    "VALUES (?,?,?,?,?,?,?,?)"
)
UPSERT_PARTICIPANT = (
    "INSERT INTO participants (participant_id, nick, first_seen_ms, last_seen_ms) VALUES (?,?,?,?) "
    "ON CONFLICT (participant_id) DO UPDATE SET nick = COALESCE(excluded.nick, nick), "
    "first_seen_ms = MIN(first_seen_ms, excluded.first_seen_ms), "
    "last_seen_ms = MAX(last_seen_ms, excluded.last_seen_ms)"
)
MESSAGE_COLS = (
    "message_id, sender_id, lamport_timestamp, content, state, possible_ack_count, resends, repaired, "
    "after_lost, received_at_ms"
)
EVENT_COLS = "seq, ts_ms, kind, channel_id, message_id, sender_id, participant_id, lamport_timestamp, detail"

# ----------------------------------------------------------- events compaction (migrations/0003)

#: the per-message kinds folded into ``message_events`` (a delivery with detail -- through repair or after a
#: loss -- stays in full, as do missing, repair_requested, repair_served, lost and rejected)
_FOLDED = "(ev.kind IN ('sent', 'received', 'acked') OR (ev.kind = 'delivered' AND ev.detail IS NULL))"
#: the kinds dropped with the window: the per-message total lives in ``messages`` (possible_ack_count), they are
#: not about a chat message (sync frames), or they are the inspector's detail (ack_seen, duplicate copies).
#: Resends stay: the report counts them from the events (and a duplicate row, written after the resend it echoes,
#: must not push its resend out of the window)
_DROPPED = "('possibly_acked', 'sync_sent', 'sync_received', 'ack_seen', 'duplicate')"

#: fold the events with ``? < seq <= ?`` into message_events (first time of each kind per message)
FOLD_EVENTS = f"""
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
WHERE ev.seq > ? AND ev.seq <= ? AND {_FOLDED}
GROUP BY m.rowid
ON CONFLICT (msg) DO UPDATE SET
    sent_ms = min(coalesce(sent_ms, excluded.sent_ms), coalesce(excluded.sent_ms, sent_ms)),
    received_ms = min(coalesce(received_ms, excluded.received_ms), coalesce(excluded.received_ms, received_ms)),
    delivered_ms = min(coalesce(delivered_ms, excluded.delivered_ms), coalesce(excluded.delivered_ms, delivered_ms)),
    acked_ms = min(coalesce(acked_ms, excluded.acked_ms), coalesce(excluded.acked_ms, acked_ms)),
    flags = flags | excluded.flags
"""
#: then delete what was folded (and the kinds dropped with the window), same ``? < seq <= ?``
DROP_FOLDED = f"""
DELETE FROM events AS ev
WHERE ev.seq > ? AND ev.seq <= ?
  AND (ev.kind IN {_DROPPED}
       OR ({_FOLDED}
           AND ev.participant_id = (SELECT c.participant_id FROM channels c WHERE c.channel_id = ev.channel_id)
           AND EXISTS (SELECT 1 FROM messages m WHERE m.channel_id = ev.channel_id AND m.message_id = ev.message_id)))
"""
#: the kv key holding the highest seq compaction has looked at
COMPACTED_THROUGH = "events_compacted_through"

ACTION_COLS = "action_id, target_id, kind, sender_id, lamport_timestamp, at_ms, value, state"
UPSERT_ACTION = (
    f"INSERT INTO message_actions (channel_id, {ACTION_COLS}) VALUES (?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT (channel_id, action_id) DO UPDATE SET value = excluded.value, state = excluded.state"
)
