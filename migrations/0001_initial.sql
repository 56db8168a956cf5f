-- sdschat migration 0001: the initial schema of one participant's store.
--
-- One SQLite file per participant. All integers are INTEGER (64-bit in
-- SQLite); times are milliseconds since the Unix epoch; the columns
-- causal_history, ack_senders, unmet, after_lost, config and detail hold JSON
-- text. The migration runner (sdschat/store/migrate.py) applies this file
-- inside one transaction and records it in schema_version.
--
-- SDS engine state (sdschat.sds.state): one table per ChannelState list, the
-- scalars in `channels`. The journal ops keep all of it current except the
-- snapshot-only fields last_activity, sync_counter, next_sync_at (NULL:
-- derive from last_activity) and sds_recent_syncs, written by full saves.
-- Tables whose order matters to the engine (insertion order of its dicts)
-- have `seq INTEGER PRIMARY KEY`: an update of an existing row keeps its seq
-- (INSERT ... ON CONFLICT DO UPDATE), a new row gets a larger one, so
-- ORDER BY seq reproduces the engine's dict order.

CREATE TABLE kv (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

-- the participant's Ed25519 private key (never logged); one row
CREATE TABLE identity (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    private_key   BLOB NOT NULL,
    created_at_ms INTEGER NOT NULL
);

CREATE TABLE channels (
    channel_id        TEXT PRIMARY KEY,
    participant_id    TEXT NOT NULL,
    lamport_timestamp INTEGER NOT NULL,
    last_activity     INTEGER NOT NULL DEFAULT 0,
    sync_counter      INTEGER NOT NULL DEFAULT 0,
    next_sync_at      INTEGER,
    config            TEXT NOT NULL DEFAULT '{}'
) WITHOUT ROWID;

-- the SDS local log (ids only; content lives in `messages`)
CREATE TABLE sds_log (
    channel_id        TEXT NOT NULL REFERENCES channels(channel_id) ON DELETE CASCADE,
    message_id        TEXT NOT NULL,
    lamport_timestamp INTEGER NOT NULL,
    sender_id         TEXT NOT NULL,
    retrieval_hint    BLOB,
    PRIMARY KEY (channel_id, message_id)
) WITHOUT ROWID;
CREATE INDEX sds_log_order ON sds_log (channel_id, lamport_timestamp, message_id);

-- causal_history (JSON): [[message_id, sender_id|null, retrieval_hint_hex|null], ...]
CREATE TABLE sds_outgoing (
    seq                 INTEGER PRIMARY KEY,
    channel_id          TEXT NOT NULL REFERENCES channels(channel_id) ON DELETE CASCADE,
    message_id          TEXT NOT NULL,
    lamport_timestamp   INTEGER NOT NULL,
    causal_history      TEXT NOT NULL,
    content             BLOB NOT NULL,
    sent_at             INTEGER NOT NULL,
    resends             INTEGER NOT NULL,
    next_resend         INTEGER NOT NULL,
    ack_senders         TEXT NOT NULL DEFAULT '[]',
    UNIQUE (channel_id, message_id)
);

CREATE TABLE sds_incoming (
    seq                 INTEGER PRIMARY KEY,
    channel_id          TEXT NOT NULL REFERENCES channels(channel_id) ON DELETE CASCADE,
    message_id          TEXT NOT NULL,
    sender_id           TEXT NOT NULL,
    lamport_timestamp   INTEGER NOT NULL,
    causal_history      TEXT NOT NULL,
    content             BLOB NOT NULL,
    received_at         INTEGER NOT NULL,
    unmet               TEXT NOT NULL,
    repaired            INTEGER NOT NULL DEFAULT 0,
    after_lost          TEXT NOT NULL DEFAULT '[]',
    retrieval_hint      BLOB,
    UNIQUE (channel_id, message_id)
);

-- dependencies known to be missing (MissingRow: HistoryEntry + detected_at)
CREATE TABLE sds_missing (
    seq            INTEGER PRIMARY KEY,
    channel_id     TEXT NOT NULL REFERENCES channels(channel_id) ON DELETE CASCADE,
    message_id     TEXT NOT NULL,
    sender_id      TEXT,
    retrieval_hint BLOB,
    detected_at    INTEGER NOT NULL,
    UNIQUE (channel_id, message_id)
);

-- ids declared irretrievably lost
CREATE TABLE sds_lost (
    seq        INTEGER PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES channels(channel_id) ON DELETE CASCADE,
    message_id TEXT NOT NULL,
    sender_id  TEXT,
    UNIQUE (channel_id, message_id)
);

-- SDS-R: our pending repair requests (RequestRow)
CREATE TABLE sds_repair_requests (
    seq            INTEGER PRIMARY KEY,
    channel_id     TEXT NOT NULL REFERENCES channels(channel_id) ON DELETE CASCADE,
    message_id     TEXT NOT NULL,
    sender_id      TEXT,
    retrieval_hint BLOB,
    t_req          INTEGER NOT NULL,
    attempts       INTEGER NOT NULL DEFAULT 0,
    UNIQUE (channel_id, message_id)
);

-- SDS-R: our pending repair answers
CREATE TABLE sds_repair_responses (
    seq        INTEGER PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES channels(channel_id) ON DELETE CASCADE,
    message_id TEXT NOT NULL,
    t_resp     INTEGER NOT NULL,
    UNIQUE (channel_id, message_id)
);

-- SDS-R cache of messages we may rebroadcast (CacheRow)
CREATE TABLE sds_cache (
    seq                 INTEGER PRIMARY KEY,
    channel_id          TEXT NOT NULL REFERENCES channels(channel_id) ON DELETE CASCADE,
    message_id          TEXT NOT NULL,
    sender_id           TEXT NOT NULL,
    lamport_timestamp   INTEGER NOT NULL,
    causal_history      TEXT NOT NULL,
    content             BLOB NOT NULL,
    UNIQUE (channel_id, message_id)
);

-- ids in the rolling bloom filter, oldest first (seq = insertion order)
CREATE TABLE sds_bloom_ids (
    seq        INTEGER PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES channels(channel_id) ON DELETE CASCADE,
    message_id TEXT NOT NULL
);
CREATE INDEX sds_bloom_ids_channel ON sds_bloom_ids (channel_id, seq);

-- ids of sync frames already processed (dedup), oldest first; snapshot-only
CREATE TABLE sds_recent_syncs (
    seq        INTEGER PRIMARY KEY,
    channel_id TEXT NOT NULL REFERENCES channels(channel_id) ON DELETE CASCADE,
    message_id TEXT NOT NULL
);
CREATE INDEX sds_recent_syncs_channel ON sds_recent_syncs (channel_id, seq);

-- participants seen in any channel
CREATE TABLE participants (
    participant_id TEXT PRIMARY KEY,
    nick           TEXT,
    first_seen_ms  INTEGER NOT NULL,
    last_seen_ms   INTEGER NOT NULL
) WITHOUT ROWID;

-- application messages: content is the app payload the node passes in;
-- state: sent / unacknowledged / possibly_acknowledged / acknowledged /
-- received / missing_deps / delivered / lost (not constrained here)
CREATE TABLE messages (
    channel_id         TEXT NOT NULL REFERENCES channels(channel_id) ON DELETE CASCADE,
    message_id         TEXT NOT NULL,
    sender_id          TEXT NOT NULL,
    lamport_timestamp  INTEGER NOT NULL,
    content            BLOB NOT NULL,
    state              TEXT NOT NULL,
    possible_ack_count INTEGER NOT NULL DEFAULT 0,
    resends            INTEGER NOT NULL DEFAULT 0,
    repaired           INTEGER NOT NULL DEFAULT 0,
    after_lost         TEXT NOT NULL DEFAULT '[]',
    received_at_ms     INTEGER,
    PRIMARY KEY (channel_id, message_id)
);
CREATE INDEX messages_order ON messages (channel_id, lamport_timestamp, message_id);

-- append-only event log, read by the data pipeline (and written alike by the
-- simulator). participant_id = who recorded the event; detail = JSON object.
CREATE TABLE events (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    ts_ms             INTEGER NOT NULL,
    kind              TEXT NOT NULL,
    channel_id        TEXT,
    message_id        TEXT,
    sender_id         TEXT,
    participant_id    TEXT,
    lamport_timestamp INTEGER,
    detail            TEXT
);
CREATE INDEX events_kind_ts ON events (kind, ts_ms);

CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events is append-only');
END;

CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events is append-only');
END;
