"""``/topic``: set by an admin, shown in the log, the header and on ``/topic``; refused (one line) for anyone else.
Real nodes over the embedded broker, the chat screen driven by the Pilot."""

from __future__ import annotations

from ui_helpers import cluster, line_with, lines_of, wait_until

from sdschat.ui.app import ChatApp
from sdschat.ui.layout import HEADER_TOPIC, header_subtitle

SIZE = (120, 30)


def channel(tmp_path):
    """alice (the channel's admin) and bob, members of #general, on an embedded broker."""
    return cluster(tmp_path, ("alice", "bob"), admin="alice")


async def typed(pilot, text: str) -> None:
    await pilot.press(*text, "enter")


def test_topic_is_set_shown_and_cleared_by_an_admin(tmp_path, run) -> None:
    async def scenario():
        async with channel(tmp_path) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                assert app.sub_title == "#general · alice"  # no topic: as before
                await typed(pilot, "/topic")
                await wait_until(pilot, lambda: line_with(lines_of(app), "#general has no topic"), what="no topic")
                await typed(pilot, "/topic release Friday")
                await wait_until(
                    pilot, lambda: line_with(lines_of(app), "alice set the topic: release Friday"), what="topic line"
                )
                await wait_until(pilot, lambda: app.sub_title == "#general · alice · release Friday", what="header")
                await wait_until(pilot, lambda: bob.topic is not None and bob.topic.text == "release Friday")
                await typed(pilot, "/topic")
                await wait_until(
                    pilot,
                    lambda: line_with(lines_of(app), "topic of #general: release Friday (set by alice, "),
                    what="/topic shows it",
                )
                await typed(pilot, '/topic ""')
                await wait_until(pilot, lambda: line_with(lines_of(app), "alice cleared the topic"), what="cleared")
                await wait_until(pilot, lambda: app.sub_title == "#general · alice", what="header without topic")
                await wait_until(pilot, lambda: bob.topic is not None and bob.topic.text == "")
                assert app.errors == []

    run(scenario())


def test_topic_from_a_non_admin_is_refused_with_one_line_and_the_header_follows_the_admin(tmp_path, run) -> None:
    async def scenario():
        async with channel(tmp_path) as (alice, bob):
            app = ChatApp(bob, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await typed(pilot, "/topic mine now")
                await wait_until(pilot, lambda: line_with(lines_of(app), "only an admin of #general"), what="refusal")
                refusals = [line for line in lines_of(app) if "only an admin" in line]
                assert len(refusals) == 1 and bob.topic is None
                assert not [m for m in bob.messages() if m.kind == "topic"]  # nothing was sent
                long = "ship it " * 20
                await alice.set_topic(long)
                want = header_subtitle("general", "bob", long)
                await wait_until(pilot, lambda: app.sub_title == want, what="bob's header")
                assert len(app.sub_title) <= len("#general · bob · ") + HEADER_TOPIC and app.sub_title.endswith("…")
                assert app.errors == []

    run(scenario())


def test_a_kind_from_a_newer_sdschat_shows_its_fallback_line_marked_as_such(tmp_path, run) -> None:
    import dataclasses

    from sdschat.node import AppPayload

    async def scenario():
        async with channel(tmp_path) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                epoch = bob.roster.membership.current.number
                built = AppPayload.new("msg", "bob", 'started a poll 📊 "lunch?"', bob.now(), epoch=epoch)
                await bob.send_payload(dataclasses.replace(built, kind="poll"))  # a kind no version knows yet
                await bob.send_text("after it")
                await wait_until(pilot, lambda: line_with(lines_of(app), "after it"), what="the next line")
                lines = lines_of(app)
                newer = line_with(lines, 'bob (newer sdschat): started a poll 📊 "lunch?"')
                assert newer is not None and "*" in newer.split("bob")[0]
                assert lines.index(newer) < lines.index(line_with(lines, "after it"))
                assert not line_with(lines, "possibly missing") and app.errors == []

    run(scenario())
