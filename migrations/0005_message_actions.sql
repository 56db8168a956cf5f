-- sdschat migration 0005: edits, deletions and reactions of chat messages.
--
-- An edit, a delete or a react is a message of its own in the SDS log (its
-- row in `messages` holds its payload, sdschat/node/payload.py), naming the
-- message it acts on. This table is what the node decided about each one, so
-- a restart shows the same state without reading every action again:
--
--   action_id          the action's message id
--   target_id          the message it acts on
--   kind               edit, delete or react
--   sender_id          who wrote the action
--   lamport_timestamp  the action's Lamport time (log order: lamport, id)
--   at_ms              its author's wall clock at send time (display only)
--   value              edit: the new text (NULL once the target is deleted);
--                      react: the emoji; delete: NULL
--   state              pending (the target has not arrived), applied,
--                      refused (against the channel's rules) or lost (the
--                      target was declared irretrievably lost)
--
-- A deletion removes the text: the target's content and every edit's are
-- rewritten without it (the search triggers of migration 0002 unindex the
-- old text), and `value` of its edits is cleared here.

CREATE TABLE message_actions (
    channel_id        TEXT NOT NULL REFERENCES channels(channel_id) ON DELETE CASCADE,
    action_id         TEXT NOT NULL,
    target_id         TEXT NOT NULL,
    kind              TEXT NOT NULL,
    sender_id         TEXT NOT NULL,
    lamport_timestamp INTEGER NOT NULL,
    at_ms             INTEGER NOT NULL,
    value             TEXT,
    state             TEXT NOT NULL,
    PRIMARY KEY (channel_id, action_id)
) WITHOUT ROWID;
CREATE INDEX message_actions_target ON message_actions (channel_id, target_id);
CREATE INDEX message_actions_waiting ON message_actions (channel_id, state) WHERE state IN ('pending', 'lost');
