"""The wire view (F5) and /gaps on real nodes over the embedded broker, driven through Textual's Pilot."""

from __future__ import annotations

import re

from node_helpers import missed_by
from ui_helpers import (
    cluster,
    fast_config,
    line_with,
    lines_of,
    open_inspector,
    repaired_by_third,
    slash,
    wait_until,
    widget_text,
)

from sdschat.node.inspect import wall_clock
from sdschat.node.wirelog import WireFrame
from sdschat.ui.app import ChatApp
from sdschat.ui.screens.gaps import GapsScreen
from sdschat.ui.screens.members import MembersScreen
from sdschat.ui.screens.wire import WireScreen

SIZE = (140, 36)


def test_the_wire_view_shows_frames_both_ways_with_filters_and_pause(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path, ("alice", "bob", "carol")) as (alice, bob, carol):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await bob.send_text("first from bob")
                await wait_until(pilot, lambda: line_with(lines_of(app), "first from bob"), what="bob's line")
                await pilot.press("f5")
                wire = app.screen
                assert isinstance(wire, WireScreen)
                await wait_until(
                    pilot,
                    lambda: any("← " in r and "bob" in r and "delivered" in r for r in wire.rows),
                    what="bob's frame in",
                )
                await pilot.press("escape")
                await pilot.press(*"hello from alice", "enter")
                await pilot.press("f5")
                wire = app.screen
                await wait_until(
                    pilot,
                    lambda: any("→ content    you" in r and "published" in r for r in wire.rows),
                    what="alice's frame out",
                )
                # the Lamport column is a time (the frame's Lamport time is at least its wall clock in ms)
                mine = next(f for f in reversed(alice.wire.frames) if f.direction == "out" and f.kind == "content")
                row = next(r for r in wire.rows if "→ content    you" in r)
                assert wall_clock(mine.lamport_timestamp, app.tz) in row and str(mine.lamport_timestamp) not in row
                # a peer's absurd Lamport time: the number, no error
                alice.wire.add(
                    WireFrame(
                        mine.ts_ms,
                        "in",
                        "content",
                        bob.participant_id,
                        bob.participant_id,
                        "x" * 64,
                        2**63,
                        0,
                        None,
                        0,
                        100,
                        "delivered",
                    )
                )
                await wait_until(pilot, lambda: any(str(2**63) in r for r in wire.rows), what="the absurd time")
                # a frame bob sends twice: the second copy is a duplicate
                alice.set_impairment(duplicate=1.0)
                await bob.send_text("twice")
                await wait_until(
                    pilot, lambda: any("bob" in r and r.endswith("duplicate") for r in wire.rows), what="the duplicate"
                )
                alice.set_impairment(duplicate=0.0)
                # s: one sender at a time, in the order they were first seen; all of them again after the last
                for _ in range(4):
                    await pilot.press("s")
                    if "sender bob" in wire.header:
                        break
                assert "sender bob" in wire.header and wire.rows
                assert all(f.sender_id == bob.participant_id for f in wire._shown())
                assert all(r[26:46].split()[0] == "bob" for r in wire.rows), wire.rows  # the sender column
                while "sender all" not in wire.header:
                    await pilot.press("s")
                assert any(" you " in r for r in wire.rows)
                alice.receiver.on_frame(b"\x00not an envelope")  # a frame nobody can open
                await wait_until(
                    pilot, lambda: any("rejected: undecryptable" in r for r in wire.rows), what="the rejected frame"
                )
                assert wire.node.wire.totals["rejected"] == 1
                await pilot.press("x")
                await wait_until(pilot, lambda: wire.rows and all("rejected" in r for r in wire.rows), what="x")
                assert "rejected only" in wire.header
                await pilot.press("x", "k")  # kind: content only
                await wait_until(pilot, lambda: wire.rows and all(" content " in r for r in wire.rows), what="k")
                await pilot.press("k", "k", "k", "k")  # sync frames
                await wait_until(
                    pilot, lambda: wire.rows and all(" sync " in r for r in wire.rows), timeout=8, what="sync frames"
                )
                await pilot.press("k", "k", "k", "space")
                assert "PAUSED" in wire.header
                frozen = list(wire.rows)
                await carol.send_text("while paused")
                await wait_until(
                    pilot,
                    lambda: any(
                        f.outcome == "delivered" and f.sender_id == carol.participant_id for f in alice.wire.frames
                    ),
                    what="carol's frame recorded",
                )
                await pilot.pause(0.4)
                assert wire.rows == frozen
                await pilot.press("space")
                await wait_until(pilot, lambda: any("carol" in r for r in wire.rows), what="unpaused")
                assert "frames/s in" in wire.header
                await pilot.press("escape")
                assert not isinstance(app.screen, WireScreen)
                assert app.errors == []

    run(scenario())


def test_gaps_lists_a_gap_and_how_it_closed(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path, ("alice", "bob")) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await bob.send_text("one")
                await wait_until(pilot, lambda: line_with(lines_of(app), "one"), what="first")
                missed = await missed_by(alice, bob, "alice misses this copy", pause=0.1, pilot=pilot)
                await bob.send_text("and this one names it")
                await wait_until(pilot, lambda: missed in alice.channel.log, timeout=10, what="gap closed")
                screen = await slash(pilot, app, "/gaps", GapsScreen)
                await wait_until(pilot, lambda: any(missed[:16] in line for line in screen.lines), what="the gap")
                line = next(line for line in screen.lines if missed[:16] in line)
                assert "from bob: noticed through bob's message" in line
                assert "its author resent it" in line or "a late copy arrived" in line or "repaired" in line
                await pilot.press("escape")
                # the wire view: the frame that named the missed message waited for it
                await pilot.press("f5")
                wire = app.screen
                assert isinstance(wire, WireScreen)
                await wait_until(
                    pilot,
                    lambda: any("← content    bob" in r and r.endswith("buffered: waits for 1") for r in wire.rows),
                    what="the buffered frame",
                )
                await pilot.press("escape")
                members = await slash(pilot, app, "/members", MembersScreen)
                await wait_until(pilot, lambda: members.lines and members.lines[0].startswith("bob "), what="bob")
                row = members.lines[0].split()
                # bob's 3 first copies, 1 or 2 of them not straight from him; none of ours to acknowledge
                assert row[0] == "bob" and row[-2:] in (["~33%", "1/3"], ["~67%", "2/3"]), row
                assert row[4] == "3"  # messages from bob
                await pilot.press("escape")
                assert app.errors == []

    run(scenario())


def test_the_inspector_and_gaps_tell_a_repair_by_a_third_member(tmp_path, run) -> None:
    """Pilot, three real nodes: alice misses one of bob's messages, bob goes away, carol's copy repairs it. The
    panel on that message and /gaps say so, in order."""

    async def scenario():
        async with cluster(tmp_path, ("alice", "bob", "carol")) as (alice, bob, carol):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await bob.send_text("first")
                await wait_until(pilot, lambda: line_with(lines_of(app), "first"), what="first")
                missed = await repaired_by_third(pilot, alice, bob, carol, "alice misses this")
                panel = await open_inspector(pilot, app, missed)
                await wait_until(pilot, lambda: any("delivered" in line for line in panel.lines), what="the panel")
                steps = [line.split(" s  ", 1)[-1] for line in panel.lines if " s  " in line]
                assert steps[0] == "noticed missing: named by carol's message " + steps[0].rsplit(" ", 1)[-1]
                assert any(s.startswith("you asked for a repair") for s in steps)
                # alice asked the store node too (there is none here): its "no answer" comes when her question
                # times out, before or after carol's answer, as the machine's load has it
                store = [s for s in steps if "store node" in s]
                assert all(
                    s.startswith("asked the store node for it") or s == "no answer from the store node" for s in store
                ), store
                assert [s for s in steps if s not in store][-2:] == [
                    "first copy rebroadcast by carol (SDS-R answer)",
                    "delivered in causal order, repaired through SDS-R repair by carol",
                ]
                await pilot.press("escape", "escape")  # the panel, then the cursor: back to typing
                gaps = await slash(pilot, app, "/gaps", GapsScreen)
                await wait_until(pilot, lambda: any(missed[:16] in line for line in gaps.lines), what="the gap")
                assert "repaired (SDS-R) by carol after" in next(line for line in gaps.lines if missed[:16] in line)
                await pilot.press("escape", "f5")
                wire = app.screen
                assert isinstance(wire, WireScreen)
                await pilot.press("k", "k", "k")  # all, content, resend: repair requests
                assert "kind repair req" in wire.header
                await wait_until(pilot, lambda: any("→ repair req you" in r for r in wire.rows), what="our request")
                assert all(" repair req " in r for r in wire.rows)
                # the rep column (after the bloom fill, before the bytes) counts at least one request
                assert all(int(re.search(r"(?:%|-)\s+(\d+)\s+[\d,]+  ", r).group(1)) >= 1 for r in wire.rows)
                await pilot.press("k")  # repair answers: carol's rebroadcast of bob's message
                assert "kind repair ans" in wire.header
                await wait_until(
                    pilot,
                    lambda: any("← repair ans bob via carol" in r and "delivered" in r for r in wire.rows),
                    what="carol's answer",
                )
                await pilot.press("escape")
                assert app.errors == []

    run(scenario())


def test_the_inspector_and_gaps_tell_a_gap_filled_from_the_store(tmp_path, run) -> None:
    """Pilot, two real nodes and a store node: alice misses one of bob's messages; the store node has it (by its
    retrieval hint) before SDS-R is due. The panel and /gaps tell the query and its answer, in order; `sdschat
    inspect --json` reads the same from alice's database."""
    import json
    import subprocess
    import sys

    from sdschat.storenode import StoreNode

    slow = fast_config(
        repair_t_min_ms=2_000,
        repair_t_max_ms=10_000,
        resend_unacknowledged_ms=60_000,
        resend_possibly_acknowledged_ms=60_000,
    )

    async def scenario():
        async with cluster(tmp_path, configs={"alice": slow, "bob": slow}) as (alice, bob):
            store = await StoreNode.start(alice.broker_url, tmp_path / "store.db")
            try:
                app = ChatApp(alice, blink=False)
                async with app.run_test(size=SIZE) as pilot:
                    await bob.send_text("first")
                    await wait_until(pilot, lambda: line_with(lines_of(app), "first"), what="first")
                    alice.set_impairment(loss_in=1.0)
                    missed = await bob.send_text("the store keeps this")
                    await wait_until(pilot, lambda: store.counters["stored"] >= 2, what="stored")
                    alice.set_impairment(loss_in=0.0)
                    await bob.send_text("names it")
                    await wait_until(pilot, lambda: missed in alice.channel.log, timeout=6, what="the store's copy")
                    panel = await open_inspector(pilot, app, missed)
                    await wait_until(
                        pilot, lambda: any("the store node had it" in line for line in panel.lines), what="the panel"
                    )
                    steps = [line.split(" s  ", 1)[-1] for line in panel.lines if " s  " in line]
                    assert steps[0].startswith("noticed missing: named by bob's message")
                    assert steps[1].startswith("asked the store node for it (retrieval hint ")
                    assert steps[-3:] == [
                        "first copy from the store node",
                        "delivered in causal order, repaired through the store node",
                        "the store node had it",
                    ]
                    await pilot.press("escape", "escape")
                    gaps = await slash(pilot, app, "/gaps", GapsScreen)
                    await wait_until(pilot, lambda: any(missed[:16] in line for line in gaps.lines), what="the gap")
                    at = next(i for i, line in enumerate(gaps.lines) if missed[:16] in line)
                    assert "filled from the store node after" in gaps.lines[at]
                    block = [line.split(" s  ", 1)[-1] for line in gaps.lines[at + 1 : at + 5]]
                    assert block[0].strip().startswith("retrieval hint ")
                    assert block[1].startswith("asked the store node for it (retrieval hint ")
                    assert block[2:] == [
                        "your repair request was called off: it came (from the store node)",
                        "the store node had it",
                    ]
                    assert app.errors == []
            finally:
                await store.stop()
        return missed

    missed = run(scenario())
    out = subprocess.run(
        [sys.executable, "-m", "sdschat", "inspect", "--db", str(tmp_path / "alice.db"), missed, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    kinds = [s["kind"] for s in json.loads(out.stdout)["steps"]]
    assert kinds[:2] == ["missing", "store_query"] and kinds[-3:] == ["received", "delivered", "store_answer"]


def test_the_gap_list_and_the_inspector_tell_a_message_declared_lost(tmp_path, run) -> None:
    """Pilot: bob's message never reaches alice and bob goes away; nobody else has it. /gaps shows the gap
    open with its repair request counting down, then declared lost after lost_after_ms; the message that
    named it says so in its panel."""

    quiet = fast_config(lost_after_ms=2_000, resend_unacknowledged_ms=60_000, resend_possibly_acknowledged_ms=60_000)

    async def scenario():
        async with cluster(tmp_path, configs={"alice": quiet, "bob": quiet}) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await bob.send_text("first")
                await wait_until(pilot, lambda: line_with(lines_of(app), "first"), what="first")
                gone = await missed_by(alice, bob, "alice never gets this", pilot=pilot)
                naming = await bob.send_text("names it")
                await wait_until(pilot, lambda: naming in alice.channel.incoming_ids, what="the naming message")
                bob.set_impairment(offline=True)  # the only copy is gone for good
                await wait_until(pilot, lambda: line_with(lines_of(app), "possibly missing"), what="the marker")
                gaps = await slash(pilot, app, "/gaps", GapsScreen)
                await wait_until(
                    pilot,
                    lambda: any(gone[:16] in line and "still open" in line for line in gaps.lines),
                    what="the open gap",
                )
                await wait_until(
                    pilot,
                    lambda: any("declared lost after" in line for line in gaps.lines),
                    timeout=10,
                    what="declared lost",
                )
                at = next(i for i, line in enumerate(gaps.lines) if gone[:16] in line)
                assert "declared lost after" in gaps.lines[at]
                assert any("you asked for a repair" in line for line in gaps.lines[at + 1 : at + 6])
                await pilot.press("escape")
                await wait_until(pilot, lambda: line_with(lines_of(app), "names it"), what="released after the loss")
                panel = await open_inspector(pilot, app, naming)
                await wait_until(pilot, lambda: "the gap it waited for:" in panel.lines, what="panel")
                timeline = panel.lines[: panel.lines.index("the gap it waited for:")]
                steps = [line.split(" s  ", 1)[-1] for line in timeline if " s  " in line]
                assert steps[0].startswith("first copy straight from bob")
                assert steps[1].startswith("arrived before 1 earlier message(s) it names: waits for " + gone[:8])
                assert steps[-2:] == [
                    f"{gone[:8]}, which it waited for, was declared lost",
                    "delivered in causal order, after 1 earlier message(s) were declared lost",
                ]
                # under its marker: the gap inspector for the message it waited for
                at = panel.lines.index("the gap it waited for:")
                assert gone[:16] in panel.lines[at + 1] and "declared lost after" in panel.lines[at + 1]
                assert any("you asked for a repair" in line for line in panel.lines[at + 2 :])
                assert app.errors == []

    run(scenario())


def test_i_on_a_gap_marker_raised_by_a_sync_frame_opens_that_gap(tmp_path, run) -> None:
    """Pilot: alice misses bob's message and learns of it from bob's sync frame (no message of hers waits on it:
    the marker floats at the bottom). The message cursor rests on the marker; ``i`` there opens the gap
    inspector on that gap's ids only."""
    from textual.strip import Strip

    from sdschat.ui.theme import S

    quiet = fast_config(resend_unacknowledged_ms=60_000, resend_possibly_acknowledged_ms=60_000)

    async def scenario():
        async with cluster(tmp_path, configs={"alice": quiet, "bob": quiet}) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await bob.send_text("first")
                await wait_until(pilot, lambda: line_with(lines_of(app), "first"), what="first")
                await bob.send_text("second")
                await wait_until(pilot, lambda: line_with(lines_of(app), "second"), what="second")
                gone = await missed_by(alice, bob, "alice never gets this", pilot=pilot)
                await wait_until(pilot, lambda: line_with(lines_of(app), "possibly missing"), what="the marker")
                bob.set_impairment(offline=True)  # nobody can answer: the gap stays open
                view = app.pane.view
                assert lines_of(app)[-1].strip().startswith("┈┈ 1 message possibly missing")  # below every message
                await pilot.press("up")  # the message cursor, on the last message
                assert view.cursor is not None and view.cursor.msg.text == "second"
                await pilot.press("down")  # then the marker under it
                marker = view.marker_cursor
                assert marker is not None and view.cursor is None and marker.pending == {gone}
                y = view.line_of(marker) - int(view.scroll_y)
                line: Strip = view.render_line(y)
                assert "possibly missing" in line.text and all(
                    seg.style is not None and seg.style.bgcolor == S.cursor_bg.bgcolor for seg in line
                )
                await pilot.press("up")  # and back to the message above
                assert view.marker_cursor is None and view.cursor.msg.text == "second"
                await pilot.press("down", "i")
                screen = app.screen
                assert isinstance(screen, GapsScreen) and screen.ids == (gone,)
                await wait_until(pilot, lambda: any(gone[:16] in line for line in screen.lines), what="the gap")
                heads = [line for line in screen.lines if not line.startswith(" ")]
                assert len(heads) == 1 and gone[:16] in heads[0] and "still open" in heads[0], screen.lines
                assert "from bob: noticed through" in heads[0]
                await pilot.press("escape")
                assert not isinstance(app.screen, GapsScreen)
                assert app.errors == []

    run(scenario())


def test_at_80_columns_each_frame_keeps_one_line_with_what_the_node_did(tmp_path, run) -> None:
    """Narrower than WIDE_FROM the rows drop hist, bloom and rep and shorten the sender, so a frame is one line
    that still ends in what the node did; wide again, every column is back."""
    from sdschat.ui.screens.wire import WIDE_FROM

    async def scenario():
        async with cluster(tmp_path, ("alice", "bob")) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=(80, 24)) as pilot:
                await bob.send_text("from bob")
                await wait_until(pilot, lambda: line_with(lines_of(app), "from bob"), what="bob's line")
                await pilot.press("f5")
                wire = app.screen
                assert isinstance(wire, WireScreen)
                await wait_until(pilot, lambda: any("delivered" in r for r in wire.rows), what="bob's frame in")
                body = wire.query_one("#wire-body")
                assert body.size.width < WIDE_FROM
                row = next(r for r in wire.rows if "delivered" in r)
                assert len(row) <= body.size.width and "bob" in row
                painted = [line for line in widget_text(body).splitlines() if line.strip()]
                assert painted[0].startswith("time") and painted[0].endswith("outcome") and "hist" not in painted[0]
                # one line a frame, never folded onto a second one
                assert len(painted) == 1 + len(wire.rows) and all(" ← " in ln or " → " in ln for ln in painted[1:])
                await pilot.resize_terminal(140, 36)
                await wait_until(pilot, lambda: body.size.width >= WIDE_FROM, what="wide")
                await wait_until(
                    pilot, lambda: any(len(r) > 80 and "delivered" in r for r in wire.rows), what="every column"
                )

    run(scenario())
