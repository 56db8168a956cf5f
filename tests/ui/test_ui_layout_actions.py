"""Edits, deletions and reactions in the layout and the timeline: heights match what is painted, an applied action
is no line, a waiting one says why (issue 47)."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC

import pytest

from sdschat.node import events as ev
from sdschat.ui.layout import ACTION_NOTE_STYLES, Layout, clean_text
from sdschat.ui.timeline import QUOTE_TEXT, MsgItem, Timeline

T0 = 1_763_805_600_000
ALICE, BOB, CAROL = "a" * 64, "b" * 64, "c" * 64
NICKS = {ALICE: "alice", BOB: "bob", CAROL: "carol"}


def nick_of(pid: str | None) -> str:
    return NICKS.get(pid or "", "?")


def chat(mid: str, text: str, *, sender: str = BOB, kind: str = "msg", lamport: int = 1, **more) -> ev.ChatMessage:
    return ev.ChatMessage(mid, sender, nick_of(sender), text, kind, T0 + lamport, lamport, sender == ALICE,
                          ev.RECEIVED, **more)  # fmt: skip


def painted(layout: Layout, m: ev.ChatMessage) -> list[str]:
    item = MsgItem(m)
    strips = layout.paint(item, None, nick_of)
    assert layout.height(item, None, nick_of) == len(strips)
    for strip in strips:
        assert strip.cell_length == layout.width
    return [strip.text.rstrip() for strip in strips]


@pytest.mark.parametrize("width", [30, 55, 80, 140])
def test_heights_count_edits_deletions_and_reactions(width: int) -> None:
    """Whatever an edit, a deletion or reactions make of a message, its height is the lines painted (the fast
    path of one-line ASCII messages included)."""
    rng = random.Random(width)
    layout = Layout(width, UTC)
    emoji = ["👍", "❤️", "😂", "🎉", "👨‍👩‍👧", "✅", "x"]
    for i in range(400):
        text = rng.choice(["short", "ok " * rng.randint(1, 40), "漢字" * rng.randint(1, 30), "two\nlines"])
        reactions = tuple(
            (e, tuple(rng.sample([ALICE, BOB, CAROL], rng.randint(1, 3)))) for e in rng.sample(emoji, rng.randint(0, 4))
        )
        deleted = rng.choice([None, None, BOB, ALICE])
        m = chat(
            f"{i:064x}",
            "(message deleted)" if deleted else text,
            kind=rng.choice(["msg", "msg", "me"]),
            edited=deleted is None and rng.random() < 0.5,
            edited_at_ms=T0,
            deleted_by=deleted,
            reactions=() if deleted else reactions,
        )
        lines = painted(layout, m)
        if m.reactions:  # the last line is theirs: the first emoji, or (no room) its cut
            assert clean_text(m.reactions[0][0]) in lines[-1] or lines[-1].endswith("…")


def test_an_edited_message_ends_in_edited_and_a_deleted_one_says_by_whom() -> None:
    layout = Layout(100, UTC)
    [line] = painted(layout, chat("1" * 64, "hello again", edited=True, edited_at_ms=T0 + 5))
    assert line.endswith("bob hello again (edited)")
    [line] = painted(layout, chat("2" * 64, "(message deleted)", deleted_by=BOB))
    assert line.endswith("bob message deleted")
    [line] = painted(layout, chat("3" * 64, "(message deleted by alice, an admin)", deleted_by=ALICE))
    assert line.endswith("bob message deleted by alice (admin)")
    [line] = painted(layout, chat("4" * 64, "(message deleted)", kind="me", deleted_by=BOB))
    assert line.endswith("bob message deleted") and "*" not in line  # a deleted /me: by its author's nick
    narrow = Layout(40, UTC)
    assert painted(narrow, chat("5" * 64, "(message deleted)", deleted_by=BOB))[0].endswith("bob: message deleted")


def test_the_reactions_line_counts_names_and_is_cut_to_the_width() -> None:
    reactions = (("👍", (ALICE, BOB)), ("❤️", (CAROL,)))
    wide = Layout(80, UTC)
    first, under = painted(wide, chat("1" * 64, "ship it", reactions=reactions))
    assert under == " " * 20 + "👍 2 alice, bob  ❤ 1 carol"  # under the text; no width-unstable selector
    assert first.endswith("ship it")
    narrow = Layout(30, UTC)
    lines = painted(narrow, chat("1" * 64, "ship it", reactions=reactions))
    assert lines[-1].startswith(" " * 9 + "👍 2 alice, bob") and lines[-1].endswith("…")


def test_an_action_waiting_for_its_message_is_a_line_that_says_so() -> None:
    layout = Layout(120, UTC)
    for state, note in (
        (ev.PENDING, "(its message possibly missing: waiting for it)"),
        (ev.LOST, "(its message was lost)"),
        (ev.REFUSED, "(refused: against the channel's rules)"),
    ):
        m = chat("e" * 64, 'edited a message: "hi"', kind="edit", target="1" * 64, action_state=state)
        [line] = painted(layout, m)
        assert line.endswith(f'* bob edited a message: "hi" {note}')
        strip = layout.paint(MsgItem(m), None, nick_of)[0]
        styles = {seg.style for seg in strip if "its message" in seg.text or "refused" in seg.text}
        assert styles == {ACTION_NOTE_STYLES[state]}


def test_the_timeline_leaves_applied_actions_out() -> None:
    target = chat("1" * 64, "lunch at 1", lamport=1)
    applied = chat("2" * 64, "reacted 👍", kind="react", lamport=2, target=target.message_id, action_state=ev.APPLIED)
    waiting = chat("3" * 64, "deleted a message", kind="delete", lamport=3, target="9" * 64, action_state=ev.PENDING)
    reply = chat("4" * 64, "fine", sender=CAROL, lamport=4, reply_to=target.message_id)
    tl = Timeline()
    tl.load([target, applied, waiting, reply])
    assert [it.msg.message_id for it in tl.items] == [target.message_id, waiting.message_id, reply.message_id]
    assert tl.add_message(applied) is None and applied.message_id not in tl.by_mid
    assert tl.prepend([applied]) == 0
    # its message arrives: the waiting deletion is applied, so it leaves the view; the quote of a reply follows an edit
    tl.take_changes()
    tl.changed(dataclasses.replace(waiting, action_state=ev.APPLIED))
    assert waiting.message_id not in tl.by_mid and tl.first_moved is not None
    edited = dataclasses.replace(target, text="lunch at 2", edited=True, edited_at_ms=T0 + 9)
    tl.set_state(target.message_id, ev.ACKNOWLEDGED)
    item = tl.changed(edited)
    assert item is not None and item.msg.text == "lunch at 2" and item.msg.state == ev.ACKNOWLEDGED
    assert tl.by_mid[reply.message_id].quote == (QUOTE_TEXT, "bob", BOB, "lunch at 2")
    tl.changed(dataclasses.replace(edited, text="(message deleted)", edited=False, deleted_by=BOB))
    assert tl.by_mid[reply.message_id].quote == (QUOTE_TEXT, "bob", BOB, "message deleted")
    # an acknowledgement keeps what the actions made of the message
    tl.set_state(target.message_id, ev.RECEIVED)
    assert tl.by_mid[target.message_id].msg.deleted_by == BOB
    # a change of a message not loaded (older than the page) adds nothing
    assert tl.changed(chat("8" * 64, "old", lamport=0, edited=True)) is None and "8" * 64 not in tl.by_mid
