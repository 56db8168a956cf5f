"""The SQL statements of the store: engine-state tables (``sds_*``, ``channels``) and application rows.

Upserts keep a row's ``seq`` (``INSERT ... ON CONFLICT DO UPDATE``), so ``ORDER BY seq``
reproduces the engine's insertion order.
"""

UPSERT_LOG = (
    "INSERT INTO sds_log (channel_id, message_id, lamport_timestamp, sender_id, retrieval_hint) VALUES (?,?,?,?,?) "
    "ON CONFLICT (channel_id, message_id) DO UPDATE SET lamport_timestamp = excluded.lamport_timestamp, "
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
        ("out-", "sds_outgoing"), ("in-", "sds_incoming"), ("missing-", "sds_missing"), ("lost-", "sds_lost"),
        ("req-", "sds_repair_requests"), ("resp-", "sds_repair_responses"), ("cache-", "sds_cache"),
    )
}
SDS_TABLES = (
    "sds_log", "sds_outgoing", "sds_incoming", "sds_missing", "sds_lost", "sds_repair_requests",
    "sds_repair_responses", "sds_cache", "sds_bloom_ids", "sds_recent_syncs",
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
    "received_at_ms = COALESCE(?, received_at_ms) WHERE channel_id = ? AND message_id = ?"
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
