"""Edits, deletions and reactions between real nodes over mosquitto, with real database files: seen by the other
members, refused (at the sender and at every receiver) when against the rules, waiting for a message that has not
arrived and applied once a repair brings it, kept waiting across a restart, lost with a lost message, and a
deletion that leaves no trace of the text in any member's database."""

from __future__ import annotations

import sqlite3

import pytest
from membership_helpers import all_joined, member, stop_all
from node_helpers import missed_by, run, start, until

from sdschat.crypto import ChannelKey, Identity
from sdschat.export import export
from sdschat.node import AppPayload, Node, NotAllowed, PayloadError
from sdschat.node import events as ev
from sdschat.node.actions import fallback_text
from sdschat.node.errors import MessageNotFound

pytestmark = pytest.mark.timeout(120)

#: timers slow enough that a message one member missed stays missing for a while (no quick resend, no quick repair)
SLOW = dict(
    resend_unacknowledged_ms=3_000,
    resend_possibly_acknowledged_ms=4_000,
    repair_t_min_ms=1_500,
    repair_t_max_ms=3_000,
)


def shown(node: Node, mid: str) -> ev.ChatMessage | None:
    return node.book.messages.get(mid)


async def slow_pair(key: ChannelKey, folder, url: str) -> tuple[Node, Node]:
    """Alice and bob on SLOW timers, connected (bob has alice's first line)."""
    a = await start("alice", key, folder, url, **SLOW)
    b = await start("bob", key, folder, url, **SLOW)
    first = await a.send_text("warm up")
    await until(lambda: shown(b, first) is not None, what="bob connected")
    return a, b


def changes(node: Node) -> list[ev.ChatMessage]:
    """A list that fills with every message a MessageChanged event tells of."""
    out: list[ev.ChatMessage] = []
    node.add_listener(lambda e: out.append(e.message) if isinstance(e, ev.MessageChanged) else None)
    return out


def refusals(node: Node) -> list[str]:
    out: list[str] = []
    node.add_listener(
        lambda e: out.append(e.detail) if isinstance(e, ev.FrameRejected) and e.reason == "bad_action" else None
    )
    return out


async def forged(node: Node, kind: str, data: dict) -> str:
    """An action ``node`` writes without the sender's checks: built with the payload API, signed and published."""
    value = data.get("text", data.get("e", ""))
    app = AppPayload.new(kind, node.nick, fallback_text(kind, value), node.now(), data=data, epoch=node.current_epoch())
    return await node.send_payload(app)


def test_an_edit_a_deletion_and_reactions_are_seen_by_another_member(node_mosquitto, tmp_path):
    async def main():
        key = ChannelKey.generate("actions")
        a = await start("alice", key, tmp_path, node_mosquitto.url)
        b = await start("bob", key, tmp_path, node_mosquitto.url)
        told = changes(b)
        try:
            mid = await a.send_text("hello there")
            await until(lambda: shown(b, mid) is not None, what="bob has the message")
            edit = await a.edit(mid, "hello world")
            await until(lambda: shown(b, mid).text == "hello world", what="bob shows the edit")
            on_b = shown(b, mid)
            assert on_b.edited and on_b.edited_at_ms > 0 and shown(a, mid).text == "hello world"
            assert any(m.message_id == mid and m.text == "hello world" for m in told)  # a view repaints the line
            assert shown(b, edit).action_state == ev.APPLIED and shown(b, edit).hidden
            assert [text for _, text in await b.edit_history(mid)] == ["hello there", "hello world"]
            assert [m.text for m in await b.history() if not m.hidden] == ["hello world"]

            await b.react(mid, "👍")
            # alice reacts once bob's reaction reached her: hers then comes after it in the log (sent in the
            # same millisecond, the two would be ordered by their ids, and the 👍 list either way round)
            await until(lambda: shown(a, mid).reactions == (("👍", (b.participant_id,)),), what="bob's 👍 at alice")
            await a.react(mid, "👍")
            await a.react(mid, "🎉")
            both = (("👍", (b.participant_id, a.participant_id)), ("🎉", (a.participant_id,)))
            await until(lambda: shown(a, mid).reactions == shown(b, mid).reactions == both, what="three reactions")
            await b.react(mid, "👍")  # a second one takes it back
            back = (("👍", (a.participant_id,)), ("🎉", (a.participant_id,)))
            await until(lambda: shown(a, mid).reactions == shown(b, mid).reactions == back, what="bob's taken back")
            await b.stop()  # what the actions made of the message is read back after a restart
            b = await start("bob", key, tmp_path, node_mosquitto.url)
            told = changes(b)
            again = shown(b, mid)
            assert (again.text, again.edited, again.reactions) == ("hello world", True, back)
            assert shown(b, edit).hidden

            gone = await a.delete(mid)
            await until(lambda: shown(b, mid).deleted, what="bob shows it deleted")
            on_b = shown(b, mid)
            assert (on_b.deleted_by, on_b.text, on_b.reactions) == (a.participant_id, "(message deleted)", ())
            assert on_b.line == "<alice> (message deleted)" and shown(b, gone).hidden
            assert await b.edit_history(mid) == []
            with pytest.raises(NotAllowed, match="deleted"):
                await a.edit(mid, "again")
            with pytest.raises(NotAllowed, match="deleted"):
                await b.react(mid, "👍")
            assert b.counters["rejected"] == 0
        finally:
            await a.stop()
            await b.stop()

    run(main())


def test_actions_against_the_rules_are_refused_by_the_sender_and_by_every_receiver(node_mosquitto, tmp_path):
    async def main():
        url, key, admin = node_mosquitto.url, ChannelKey.generate("rules"), Identity.generate()
        a = await member("alice", key, tmp_path, url, admin)  # the admin
        b = await member("bob", key, tmp_path, url, admin)
        c = await member("carol", key, tmp_path, url, admin)
        nodes = [a, b, c]
        refused = {n.nick: refusals(n) for n in nodes}
        try:
            await all_joined(nodes)
            of_alice = await a.send_text("alice says")
            of_carol = await c.send_text("carol says")
            await until(lambda: all(shown(n, m) for n in nodes for m in (of_alice, of_carol)), what="both lines")
            # the sender's own checks: one line each
            with pytest.raises(NotAllowed, match="only its author can edit"):
                await b.edit(of_alice, "not mine")
            with pytest.raises(NotAllowed, match="author or an admin"):
                await b.delete(of_carol)
            for bad in ("not an emoji", "", "\x07"):
                with pytest.raises(PayloadError):
                    await b.react(of_alice, bad)
            with pytest.raises(MessageNotFound):
                await b.edit("f" * 64, "nothing there")
            join = next(m for m in b.messages() if m.kind == "join")
            with pytest.raises(NotAllowed, match="chat line"):
                await b.react(join.message_id, "👍")
            # forged: built with the payload API and published anyway; every receiver refuses them itself
            edit = await forged(b, "edit", {"t": of_alice, "text": "forged words"})
            delete = await forged(b, "delete", {"t": of_carol})
            for n in (a, c):
                await until(
                    lambda n=n: all(shown(n, x) and shown(n, x).action_state == ev.REFUSED for x in (edit, delete)),
                    what=f"{n.nick} refuses both",
                )
                assert shown(n, of_alice).text == "alice says" and not shown(n, of_alice).edited
                assert not shown(n, of_carol).deleted
                assert n.counters["rejected"] >= 2 and len(refused[n.nick]) == 2
                assert "other than the message's author" in refused[n.nick][0]
                assert shown(n, edit).line.endswith("(refused: against the channel's rules)")
            # (the forger's own node refuses them too: the rules are every member's)
            assert shown(b, edit).action_state == ev.REFUSED and not shown(b, of_alice).edited
            # an admin deletes anyone's line: shown as deleted by the admin, naming them
            await a.delete(of_carol)
            await until(lambda: all(shown(n, of_carol).deleted for n in nodes), what="deleted by the admin")
            assert shown(c, of_carol).deleted_by == a.participant_id
            assert shown(b, of_carol).text == "(message deleted by alice, an admin)"
        finally:
            await stop_all(nodes)

    run(main())


def test_actions_whose_message_is_missing_wait_visibly_and_apply_once_a_repair_brings_it(node_mosquitto, tmp_path):
    async def main():
        a, b = await slow_pair(ChannelKey.generate("pending"), tmp_path, node_mosquitto.url)
        try:
            edited = await missed_by(b, a, "to be edited")
            deleted = await missed_by(b, a, "to be deleted: pomegranatequasar")
            reacted = await missed_by(b, a, "to be reacted to")
            assert not any(shown(b, m) for m in (edited, deleted, reacted))
            edit = await a.edit(edited, "edited while bob missed it")
            delete = await a.delete(deleted)
            react = await a.react(reacted, "🎉")
            actions = (edit, delete, react)
            await until(lambda: all(shown(b, x) for x in actions), what="bob has the actions")
            for x in actions:  # each its own line, waiting for its message
                assert shown(b, x).action_state == ev.PENDING and not shown(b, x).hidden
                assert "possibly missing" in shown(b, x).line
            assert shown(b, edit).line.startswith('* alice edited a message: "edited while bob missed it"')
            # the repair (or the author's resend) brings the messages: the pending lines turn into applied ones
            await until(
                lambda: all(shown(b, m) for m in (edited, deleted, reacted)), timeout=30, what="targets repaired"
            )
            await until(lambda: all(shown(b, x).action_state == ev.APPLIED for x in actions), what="applied")
            assert shown(b, edited).text == "edited while bob missed it" and shown(b, edited).edited
            assert shown(b, deleted).deleted and shown(b, deleted).text == "(message deleted)"
            assert shown(b, reacted).reactions == (("🎉", (a.participant_id,)),)
            assert await b.search("pomegranatequasar") == []
        finally:
            await a.stop()
            await b.stop()
        # the deleted message reached bob after its deletion: its text was never stored there
        assert not _holders(tmp_path / "bob.db", "pomegranatequasar")

    run(main())


def test_a_pending_action_survives_a_restart_and_is_lost_with_its_message(node_mosquitto, tmp_path):
    async def main():
        key = ChannelKey.generate("restart")
        url = node_mosquitto.url
        a, b = await slow_pair(key, tmp_path, url)
        target = await missed_by(b, a, "never seen by bob")
        edit = await a.edit(target, "an edit of it")
        react = await a.react(target, "👍")
        await until(lambda: all(shown(b, x) for x in (edit, react)), what="bob has the actions")
        await a.stop()  # nothing more comes from alice: no resend, no repair answer
        await b.stop()
        b = await start("bob", key, tmp_path, url, **SLOW)
        told = changes(b)
        try:
            for x in (edit, react):
                assert shown(b, x).action_state == ev.PENDING, "kept across the restart"
            now = b.now()
            b.take_events(b.channel.give_up(target, now), now)  # declared lost (as lost_after_ms would)
            await until(lambda: all(shown(b, x).action_state == ev.LOST for x in (edit, react)), what="lost")
            assert {m.message_id for m in told if m.action_state == ev.LOST} == {edit, react}
            assert shown(b, edit).line.endswith("(its message was lost)")
        finally:
            await b.stop()
        b = await start("bob", key, tmp_path, url, **SLOW)
        try:
            assert shown(b, edit).action_state == ev.LOST  # the state is kept too
        finally:
            await b.stop()

    run(main())


def test_a_deletion_leaves_no_trace_of_the_text_in_any_members_database(node_mosquitto, tmp_path):
    async def main():
        key = ChannelKey.generate("erase")
        url = node_mosquitto.url
        nodes = [await start(n, key, tmp_path, url) for n in ("alice", "bob", "carol")]
        a, b, c = nodes
        try:
            mid = await a.send_text("a secret: zanzibarquux and more words")
            await until(lambda: all(shown(n, mid) for n in nodes), what="all have it")
            await a.edit(mid, "edited secret: xylophonequark")
            await b.react(mid, "👍")
            await until(lambda: all(shown(n, mid).text.startswith("edited") for n in nodes), what="edited")
            await until(lambda: all(not n.pending() for n in nodes), timeout=30, what="settled")
            for n in nodes:  # (a search indexes what is stored: the words are in every member's index now)
                assert [h.message.message_id for h in await n.search("xylophonequark")] == [mid]  # shown: edited
            await a.delete(mid)
            await until(lambda: all(shown(n, mid).deleted for n in nodes), what="deleted everywhere")
            await until(lambda: all(not n.pending() for n in nodes), timeout=30, what="settled")
            for n in nodes:
                assert await n.search("zanzibarquux") == [] and await n.search("xylophonequark") == []
                assert [m.text for m in await n.history() if m.message_id == mid] == ["(message deleted)"]
        finally:
            await stop_all(nodes)
        for n in ("alice", "bob", "carol"):
            db = tmp_path / f"{n}.db"
            out = tmp_path / f"{n}.jsonl"
            await export(db, out=out)
            for word in ("zanzibarquux", "xylophonequark"):
                assert word not in out.read_text(), f"{n}'s export"
                assert not _holders(db, word), f"{n}'s database holds {word}: {_holders(db, word)}"
                for path in db.parent.glob(f"{db.name}*"):  # the file itself, and any log beside it
                    assert word.encode() not in path.read_bytes(), f"{path.name} holds {word} in its bytes"

    run(main())


def _holders(db, word: str) -> list[str]:
    """Every table and column of the database file holding ``word``, and the search index if it matches it."""
    conn = sqlite3.connect(db)
    try:
        found = []
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            try:
                rows = conn.execute(f'SELECT * FROM "{table}"')
            except sqlite3.OperationalError:  # (a virtual table's own module is not needed for its shadow tables)
                continue
            columns = [d[0] for d in rows.description]
            for values in rows:
                for column, value in zip(columns, values, strict=True):
                    data = value.encode() if isinstance(value, str) else value if isinstance(value, bytes) else b""
                    if word.encode() in data:
                        found.append(f"{table}.{column}")
        if conn.execute("SELECT count(*) FROM message_search WHERE message_search MATCH ?", (word,)).fetchone()[0]:
            found.append("message_search MATCH")
        return found
    finally:
        conn.close()


def test_holders_finds_a_word_that_is_there(node_mosquitto, tmp_path):
    """The check above can fail: a message's word is found in its table, its raw bytes and the search index."""

    async def main():
        key = ChannelKey.generate("probe")
        a = await start("alice", key, tmp_path, node_mosquitto.url)
        try:
            mid = await a.send_text("a word: quokkaparadox")
            assert [h.message.message_id for h in await a.search("quokkaparadox")] == [mid]  # indexed now
        finally:
            await a.stop()

    run(main())
    found = _holders(tmp_path / "alice.db", "quokkaparadox")
    assert "messages.content" in found and "message_search MATCH" in found
    assert b"quokkaparadox" in (tmp_path / "alice.db").read_bytes()


def test_an_action_on_a_message_no_longer_held_in_memory_is_judged_against_the_database(node_mosquitto, tmp_path):
    async def main():
        from node_helpers import FAST

        from sdschat.node import NodeConfig, node_channel_config

        key = ChannelKey.generate("old")
        url = node_mosquitto.url

        async def node(name: str) -> Node:
            config = NodeConfig(name, key, tmp_path / f"{name}.db", url, channel_config=node_channel_config(**FAST))
            config.memory_messages = 10
            return await Node.start(config)

        a, b = await node("alice"), await node("bob")
        told = changes(b)
        try:
            old = await a.send_text("an old line")
            for i in range(90):
                await a.send_text(f"line {i}")
            await until(lambda: len(b.channel.log) == 91 and old not in b.book.messages, what="the old line trimmed")
            await a.react(old, "👀")
            edit = await a.edit(old, "an old line, edited")
            await until(lambda: any(m.message_id == old and m.edited for m in told), what="told of the edit")
            got = await b.message(old)
            assert (got.text, got.reactions) == ("an old line, edited", (("👀", (a.participant_id,)),))
            assert shown(b, edit).action_state == ev.APPLIED
            forged_edit = await forged(b, "edit", {"t": old, "text": "not bob's"})
            await until(lambda: shown(b, forged_edit).action_state == ev.REFUSED, what="refused from the database")
            assert (await b.message(old)).text == "an old line, edited"
        finally:
            await a.stop()
            await b.stop()

    run(main())


def test_not_protected_a_member_away_during_a_deletion_holds_the_text_until_it_is_back(node_mosquitto, tmp_path):
    """A deletion is not a recall: carol, offline while alice deletes her line, still has it in her database; once
    she is back the deletion reaches her and the text is gone from her file too."""

    async def main():
        key = ChannelKey.generate("not-a-recall")
        url = node_mosquitto.url
        a = await start("alice", key, tmp_path, url)
        c = await start("carol", key, tmp_path, url)
        try:
            mid = await a.send_text("a line with marmaladeoctopus in it")
            await until(lambda: shown(c, mid) is not None, what="carol has it")
            await until(lambda: not a.pending() and not c.pending(), timeout=30, what="settled")
            c.set_impairment(offline=True)
            await a.delete(mid)
            await until(lambda: shown(a, mid).deleted, what="deleted at alice")
            assert not shown(c, mid).deleted
            assert "messages.content" in _holders(tmp_path / "carol.db", "marmaladeoctopus")  # still readable there
            c.set_impairment(offline=False)
            await until(lambda: shown(c, mid).deleted, timeout=30, what="the deletion reaches carol")
            await until(lambda: not a.pending() and not c.pending(), timeout=30, what="settled")
        finally:
            await stop_all([a, c])
        assert not _holders(tmp_path / "carol.db", "marmaladeoctopus")

    run(main())


def test_an_action_that_arrives_after_its_message_was_given_up_on_is_lost_at_once(node_mosquitto, tmp_path):
    async def main():
        a, b = await slow_pair(ChannelKey.generate("lost-first"), tmp_path, node_mosquitto.url)
        try:
            target = await missed_by(b, a, "bob never sees this")
            later = await a.send_text("a line that names it")
            await until(lambda: shown(b, later) is not None, what="bob has the later line")
            now = b.now()
            b.take_events(b.channel.give_up(target, now), now)  # declared lost (as lost_after_ms would)
            assert b.channel.was_lost(target)
            react = await a.react(target, "👀")
            await until(lambda: shown(b, react) is not None, what="bob has the reaction")
            assert shown(b, react).action_state == ev.LOST  # not left waiting for what will not come
            assert shown(b, react).line.endswith("(its message was lost)")
        finally:
            await a.stop()
            await b.stop()

    run(main())


def test_search_finds_a_message_as_it_is_shown_edited_once_and_never_deleted(node_mosquitto, tmp_path):
    async def main():
        key = ChannelKey.generate("search-edits")
        a = await start("alice", key, tmp_path, node_mosquitto.url)
        b = await start("bob", key, tmp_path, node_mosquitto.url)
        try:
            mid = await a.send_text("the meeting is on tuesday")
            await until(lambda: shown(b, mid) is not None, what="bob has it")
            await a.edit(mid, "the meeting is on wednesday")
            await b.react(mid, "👍")
            await until(lambda: shown(b, mid).edited and shown(a, mid).reactions, what="edited and reacted")
            for n in (a, b):
                assert await n.search("tuesday") == []  # a word the edit took away
                (hit,) = await n.search("wednesday")  # the edit's words find the message itself
                assert hit.message.message_id == mid and hit.message.edited
                assert hit.message.text[hit.spans[0][0] : hit.spans[0][1]] == "wednesday"
                assert [h.message.message_id for h in await n.search("meeting")] == [mid]  # once, not twice
                assert await n.search("reacted") == []  # a reaction's own line is no hit
            await a.delete(mid)
            await until(lambda: shown(b, mid).deleted, what="deleted")
            assert await b.search("meeting") == [] and await b.search("wednesday") == []
        finally:
            await a.stop()
            await b.stop()

    run(main())
