-- sdschat migration 0002: full-text search over the locally stored message text.
--
-- message_search is a contentless FTS5 index (content=''): it stores only the
-- index, not a second copy of the text, and its rowid is the rowid of the row
-- in `messages`. The text is the "text" field of the application payload
-- (messages.content is the payload's JSON, sdschat/node/payload.py); a row
-- whose content is not such JSON is simply not indexed. The triggers keep the
-- index current for every way a message arrives (sent, received, repaired,
-- caught up from a store node), and the INSERT ... SELECT below indexes the
-- messages of a database made before this migration. Nothing here leaves the
-- machine: search runs on this file only.
--
-- A contentless table forgets the text, so removing an entry must name the
-- text it was indexed with: the update and delete triggers recompute it from
-- the old content.

CREATE VIRTUAL TABLE message_search USING fts5(
    text,
    content = '',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER messages_search_insert AFTER INSERT ON messages
WHEN (CASE WHEN json_valid(CAST(new.content AS TEXT))
           THEN json_type(CAST(new.content AS TEXT), '$.text') END) = 'text'
BEGIN
    INSERT INTO message_search (rowid, text)
    VALUES (new.rowid, json_extract(CAST(new.content AS TEXT), '$.text'));
END;

CREATE TRIGGER messages_search_unindex AFTER DELETE ON messages
WHEN (CASE WHEN json_valid(CAST(old.content AS TEXT))
           THEN json_type(CAST(old.content AS TEXT), '$.text') END) = 'text'
BEGIN
    INSERT INTO message_search (message_search, rowid, text)
    VALUES ('delete', old.rowid, json_extract(CAST(old.content AS TEXT), '$.text'));
END;

CREATE TRIGGER messages_search_update_old AFTER UPDATE OF content ON messages
WHEN old.content IS NOT new.content
 AND (CASE WHEN json_valid(CAST(old.content AS TEXT))
           THEN json_type(CAST(old.content AS TEXT), '$.text') END) = 'text'
BEGIN
    INSERT INTO message_search (message_search, rowid, text)
    VALUES ('delete', old.rowid, json_extract(CAST(old.content AS TEXT), '$.text'));
END;

CREATE TRIGGER messages_search_update_new AFTER UPDATE OF content ON messages
WHEN old.content IS NOT new.content
 AND (CASE WHEN json_valid(CAST(new.content AS TEXT))
           THEN json_type(CAST(new.content AS TEXT), '$.text') END) = 'text'
BEGIN
    INSERT INTO message_search (rowid, text)
    VALUES (new.rowid, json_extract(CAST(new.content AS TEXT), '$.text'));
END;

INSERT INTO message_search (rowid, text)
SELECT rowid, json_extract(CAST(content AS TEXT), '$.text')
FROM messages
WHERE (CASE WHEN json_valid(CAST(content AS TEXT))
            THEN json_type(CAST(content AS TEXT), '$.text') END) = 'text';
