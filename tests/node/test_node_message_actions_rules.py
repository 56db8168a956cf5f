"""The rules of edits, deletions and reactions, pure (sdschat.node.actions) and their payloads
(sdschat.node.payload): who may do what, what a message shows whatever order its actions arrived in, which emoji
a reaction may be."""

from __future__ import annotations

import itertools

import pytest

from sdschat.node import AppPayload, PayloadError
from sdschat.node import events as ev
from sdschat.node.actions import action_row, erased_body, fallback_text, fold, refusal, target_of
from sdschat.node.payload import emoji_problem
from sdschat.store import ActionRow

ALICE, BOB, CAROL = "a" * 64, "b" * 64, "c" * 64
TARGET = "d" * 64


def row(aid: int, kind: str, sender: str, lamport: int, value: str | None = None, state: str = ev.APPLIED):
    return ActionRow(f"{aid:064x}", TARGET, kind, sender, lamport, 1000 + lamport, value, state)


def chat(sender: str = ALICE, kind: str = "msg") -> ev.ChatMessage:
    return ev.ChatMessage(TARGET, sender, "alice", "hello", kind, 1, 1, False, ev.RECEIVED)


def test_only_the_author_edits_and_the_author_or_an_admin_deletes():
    assert refusal(row(1, "edit", ALICE, 2), chat(), admin=False) is None
    assert "other than the message's author" in refusal(row(1, "edit", BOB, 2), chat(), admin=True)
    assert refusal(row(1, "delete", ALICE, 2), chat(), admin=False) is None
    assert refusal(row(1, "delete", BOB, 2), chat(), admin=True) is None
    assert "neither the message's author nor an admin" in refusal(row(1, "delete", BOB, 2), chat(), admin=False)
    assert refusal(row(1, "react", CAROL, 2, "👍"), chat(), admin=False) is None
    assert "no chat line" in refusal(row(1, "react", CAROL, 2, "👍"), chat(kind="join"), admin=True)


def test_the_latest_edit_in_log_order_wins_whatever_order_the_edits_arrived_in():
    edits = [row(3, "edit", ALICE, 5, "second"), row(1, "edit", ALICE, 2, "first"), row(2, "edit", ALICE, 7, "third")]
    for order in itertools.permutations(edits):
        folded = fold(order)
        assert (folded.text, folded.edited_at_ms, folded.deleted_by) == ("third", 1007, None)
    # a refused or pending edit counts for nothing
    assert fold([row(1, "edit", BOB, 9, "forged", ev.REFUSED), row(2, "edit", ALICE, 3, "mine")]).text == "mine"
    assert fold([row(1, "edit", ALICE, 9, "later", ev.PENDING)]).text is None


def test_a_deletion_wins_over_every_edit_and_reaction_and_keeps_no_text():
    rows = [row(1, "edit", ALICE, 2, "edited"), row(2, "react", BOB, 3, "👍"), row(3, "delete", CAROL, 4)]
    for order in itertools.permutations(rows):
        folded = fold(order)
        assert (folded.text, folded.deleted_by, folded.reactions) == (None, CAROL, ())
    # the first deletion in log order names who deleted it
    assert fold([row(5, "delete", ALICE, 9), row(6, "delete", BOB, 4)]).deleted_by == BOB


def test_reactions_toggle_per_member_and_emoji_in_log_order():
    rows = [
        row(1, "react", BOB, 2, "👍"),
        row(2, "react", CAROL, 3, "🎉"),
        row(3, "react", CAROL, 4, "👍"),
        row(4, "react", BOB, 5, "👍"),  # bob takes his back
        row(5, "react", CAROL, 6, "🎉"),  # carol takes hers back: the emoji goes
        row(6, "react", ALICE, 7, "🎉"),  # and comes back, after 👍
    ]
    for order in (rows, list(reversed(rows))):
        assert fold(order).reactions == (("👍", (CAROL,)), ("🎉", (ALICE,)))


def test_a_reaction_is_a_short_symbol():
    for good in ("👍", "🎉", "👍🏽", "❤️", "+1", "👩‍💻", "ok"):
        assert emoji_problem(good) is None, good
    for bad in ("", "👍 👍", "a\nb", "\x00", "\u202e", "x" * 9, "👨‍👩‍👧‍👦", "\ud800", "\t"):
        assert emoji_problem(bad) is not None, repr(bad)


def test_action_payloads_name_their_target_and_a_malformed_one_is_refused():
    for kind, data in (
        ("edit", {"t": TARGET, "text": "new"}),
        ("delete", {"t": TARGET}),
        ("react", {"t": TARGET, "e": "👍"}),
    ):
        app = AppPayload.new(kind, "bob", fallback_text(kind, data.get("text", data.get("e", ""))), 5, data=data)
        back = AppPayload.decode(app.encode())
        assert (back.kind, back.data, target_of(back), back.known) == (kind, data, TARGET, True)
    assert fallback_text("edit", "new") == 'edited a message: "new"' and fallback_text("react", "👍") == "reacted 👍"
    assert len(fallback_text("edit", "x" * 1000)) < 300  # the whole text is in the data
    good = AppPayload.new("react", "bob", "reacted 👍", 5, data={"t": TARGET, "e": "👍"})
    for data in ({"t": "nope", "e": "👍"}, {"e": "👍"}, {"t": TARGET, "e": "too long to be an emoji"}, {"t": TARGET}):
        forged = good.encode().replace(b'"d":{"t":"' + TARGET.encode() + b'","e":"\xf0\x9f\x91\x8d"}', _json(data))
        with pytest.raises(PayloadError):
            AppPayload.decode(forged)
    with pytest.raises(PayloadError):
        AppPayload.new("edit", "bob", "x", 5, data={"t": TARGET, "text": "  "})


def test_an_erased_payload_still_reads_and_holds_no_text():
    app = AppPayload.new("msg", "alice", "a secret word", 5)
    gone = AppPayload.decode(erased_body(app))
    assert (gone.kind, gone.text, gone.nick) == ("msg", "", "alice")
    edit = AppPayload.new(
        "edit", "alice", fallback_text("edit", "secret edit"), 6, data={"t": TARGET, "text": "secret edit"}
    )
    body = erased_body(edit)
    assert b"secret" not in body and target_of(AppPayload.decode(body)) == TARGET


def _json(data: dict) -> bytes:
    import json

    return b'"d":' + json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def test_the_actions_migration_keeps_a_database_made_before_it_and_a_rewrite_unindexes_the_old_words(tmp_path):
    import sqlite3

    from sdschat.store import MessageRow, MessageUpdate
    from sdschat.store import migrate as M
    from sdschat.store.journal import apply_batches
    from sdschat.store.queries import History

    db = tmp_path / "v4.db"
    conn = sqlite3.connect(db, isolation_level=None)
    M.migrate(conn, [m for m in M.load_migrations() if m.version <= 4])
    cid = "c" * 32
    conn.execute("INSERT INTO channels (channel_id, participant_id, lamport_timestamp) VALUES (?, ?, 0)", (cid, ALICE))
    body = AppPayload.new("msg", "alice", "the word wombatquince", 5).encode()
    apply_batches(conn, [(cid, [], [MessageRow(TARGET, ALICE, 1, body, ev.RECEIVED)], [], [], [], None)])
    assert M.migrate(conn, [m for m in M.load_migrations() if m.version <= 5]) == [5]  # (0006: tests/store)
    match = "SELECT count(*) FROM message_search WHERE message_search MATCH ?"
    assert conn.execute(match, ("wombatquince",)).fetchone() == (1,)
    pending = row(1, "react", BOB, 2, "👍", ev.PENDING)
    applied = row(2, "delete", ALICE, 3, None, ev.APPLIED)
    erased = erased_body(AppPayload.decode(body))
    ops = [("action", pending.action_id, pending), ("action", applied.action_id, applied)]
    apply_batches(conn, [(cid, ops, [], [MessageUpdate(TARGET, content=erased)], [], [], None)])
    assert conn.execute(match, ("wombatquince",)).fetchone() == (0,)
    assert conn.execute("SELECT content FROM messages").fetchone() == (erased,)

    async def fetch(sql, params=()):
        return conn.execute(sql, params).fetchall()

    import asyncio

    history = History(fetch, db)
    assert asyncio.run(history.pending_actions(cid)) == [pending]
    assert asyncio.run(history.actions_on(cid, [TARGET])) == [pending, applied]
    assert asyncio.run(history.actions_on(cid, [applied.action_id])) == [applied]  # (by its own id too)
    conn.close()


def test_edits_deletions_and_reactions_are_no_news_for_unread_counts():
    from sdschat.node.payload import CONTROL_PREFIXES, QUIET_PREFIXES

    for kind, data in (
        ("edit", {"t": TARGET, "text": "x"}),
        ("delete", {"t": TARGET}),
        ("react", {"t": TARGET, "e": "👍"}),
    ):
        encoded = AppPayload.new(kind, "alice", fallback_text(kind, "x"), 1, data=data).encode()
        assert encoded.startswith(QUIET_PREFIXES) and not encoded.startswith(CONTROL_PREFIXES), kind
    assert not AppPayload.new("msg", "alice", "hi", 1).encode().startswith(QUIET_PREFIXES)
    assert set(CONTROL_PREFIXES) < set(QUIET_PREFIXES)


def test_a_heart_with_or_without_its_presentation_selector_is_one_reaction():
    from sdschat.node.payload import plain_emoji

    assert plain_emoji("❤️") == plain_emoji("❤") == "❤"
    assert plain_emoji(" 👍 ") == "👍" and plain_emoji("\ufe0f") == "\ufe0f"
    red, plain = (
        action_row(
            "r" + str(i),
            "bob",
            AppPayload.new("react", "bob", "reacted", 1, data={"t": "ab" * 32, "e": e}),
            i,
            "applied",
        )
        for i, e in enumerate(("❤️", "❤"))
    )
    assert red.value == plain.value == "❤"  # a peer that kept the selector: the same reaction, toggled
