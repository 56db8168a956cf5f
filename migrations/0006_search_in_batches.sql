-- sdschat migration 0006: the search index takes new messages in batches.
--
-- Until now a trigger indexed each message as it was stored. Every commit of
-- the node's writer (about one every 100 ms in a busy channel, a few rows
-- each) then wrote a new small FTS5 segment and its merges: the index cost a
-- node 30-150 us of its database thread per message, most of it per commit,
-- not per word. Indexing a few hundred rows in one statement costs a few us a
-- message (bench/receive_path.py shows the database thread's share).
--
-- kv 'search_indexed_through' holds the highest rowid of `messages` the index
-- has taken in. The store (sdschat/store/search.py index_pending) indexes the
-- rows above it, in one INSERT ... SELECT, when enough have gathered and
-- always before a search runs, so a search still finds the line sent a moment
-- ago. Rows above the mark are not in the index, so the triggers below only
-- touch the index for rows at or below it: removing an entry that was never
-- added would damage a contentless index. A row above the mark that changes
-- is indexed later with the content it has then; a deleted one never is.
--
-- A deletion can lower the highest rowid (a channel's messages go with it),
-- and SQLite gives the next row the highest rowid + 1: that row must not fall
-- at or below the mark, or it would never be indexed. So the delete trigger
-- brings the mark down to the highest rowid left.

DROP TRIGGER messages_search_insert;
DROP TRIGGER messages_search_unindex;
DROP TRIGGER messages_search_update_old;
DROP TRIGGER messages_search_update_new;

-- every message stored so far was indexed by 0002's triggers
INSERT INTO kv (key, value)
SELECT 'search_indexed_through', CAST(coalesce(max(rowid), 0) AS TEXT) FROM messages;

-- one trigger, so the entry leaves the index before the mark can come down
CREATE TRIGGER messages_search_unindex AFTER DELETE ON messages
WHEN old.rowid <= (SELECT CAST(value AS INTEGER) FROM kv WHERE key = 'search_indexed_through')
BEGIN
    INSERT INTO message_search (message_search, rowid, text)
    SELECT 'delete', old.rowid, json_extract(CAST(old.content AS TEXT), '$.text')
    WHERE (CASE WHEN json_valid(CAST(old.content AS TEXT))
                THEN json_type(CAST(old.content AS TEXT), '$.text') END) = 'text';
    UPDATE kv SET value = CAST((SELECT coalesce(max(rowid), 0) FROM messages) AS TEXT)
    WHERE key = 'search_indexed_through'
      AND CAST(value AS INTEGER) > (SELECT coalesce(max(rowid), 0) FROM messages);
END;

CREATE TRIGGER messages_search_update_old AFTER UPDATE OF content ON messages
WHEN old.content IS NOT new.content
 AND old.rowid <= (SELECT CAST(value AS INTEGER) FROM kv WHERE key = 'search_indexed_through')
 AND (CASE WHEN json_valid(CAST(old.content AS TEXT))
           THEN json_type(CAST(old.content AS TEXT), '$.text') END) = 'text'
BEGIN
    INSERT INTO message_search (message_search, rowid, text)
    VALUES ('delete', old.rowid, json_extract(CAST(old.content AS TEXT), '$.text'));
END;

CREATE TRIGGER messages_search_update_new AFTER UPDATE OF content ON messages
WHEN old.content IS NOT new.content
 AND new.rowid <= (SELECT CAST(value AS INTEGER) FROM kv WHERE key = 'search_indexed_through')
 AND (CASE WHEN json_valid(CAST(new.content AS TEXT))
           THEN json_type(CAST(new.content AS TEXT), '$.text') END) = 'text'
BEGIN
    INSERT INTO message_search (rowid, text)
    VALUES (new.rowid, json_extract(CAST(new.content AS TEXT), '$.text'));
END;
