"""The view model: Lamport order, gap markers that count each missing id once, repairs, losses."""

from __future__ import annotations

from sdschat.node import events as ev
from sdschat.ui.timeline import MarkerItem, MsgItem, NoticeItem, Timeline

B = "b" * 32


def msg(mid: str, lamport: int, state: str = ev.RECEIVED, sender: str = B, text: str = "") -> ev.ChatMessage:
    return ev.ChatMessage(mid, sender, "bob", text or mid, "msg", 1_000, lamport, False, state)


def order(tl: Timeline) -> list[str]:
    out = []
    for it in tl.items:
        if isinstance(it, MsgItem):
            out.append(it.msg.message_id)
        elif isinstance(it, MarkerItem):
            out.append(f"[{it.kind}:{len(it.pending) or len(it.lost)}]")
        else:
            out.append("notice")
    return out


def test_messages_are_ordered_by_lamport_then_id() -> None:
    tl = Timeline()
    tl.add_message(msg("c", 3))
    tl.add_message(msg("a", 1))
    tl.add_message(msg("b2", 2))
    tl.add_message(msg("b1", 2))
    assert order(tl) == ["a", "b1", "b2", "c"]


def test_gap_marker_sits_above_its_message_and_goes_when_repaired() -> None:
    tl = Timeline()
    tl.add_message(msg("m1", 1))
    tl.add_message(msg("m4", 4, ev.WAITING))
    tl.gap_opened("m4", ("m2", "m3"), (B,))
    assert order(tl) == ["m1", "[missing:2]", "m4"]
    tl.add_message(msg("m3", 3))
    assert order(tl) == ["m1", "m3", "[missing:1]", "m4"]  # the repaired one slides into its place
    tl.add_message(msg("m2", 2))
    tl.gap_closed("m4")
    assert order(tl) == ["m1", "m2", "m3", "m4"]
    assert tl.by_mid["m4"].msg.state == ev.RECEIVED


def test_each_missing_id_is_counted_by_one_marker() -> None:
    tl = Timeline()
    tl.add_message(msg("m5", 5, ev.WAITING))
    tl.gap_opened("m5", ("m1", "m2"))
    tl.add_message(msg("m6", 6, ev.WAITING))
    tl.gap_opened("m6", ("m1", "m2", "m5"))  # causal history names the same gap again (and m5, which is here)
    assert order(tl) == ["[missing:2]", "m5", "m6"]


def test_lost_turns_the_marker_into_a_lost_line_and_a_late_arrival_removes_it() -> None:
    tl = Timeline()
    tl.add_message(msg("m3", 3, ev.WAITING))
    tl.gap_opened("m3", ("m1", "m2"))
    tl.message_lost("m1", B)
    assert order(tl) == ["[missing:1]", "m3"]  # still waiting for m2
    tl.message_lost("m2", B)
    tl.gap_closed("m3", ("m1", "m2"))
    assert order(tl) == ["[lost:2]", "m3"]
    tl.add_message(msg("m1", 1))  # "lost" messages still slot in if they turn up
    assert order(tl) == ["m1", "[lost:1]", "m3"]


def test_gap_from_a_sync_frame_floats_at_the_end() -> None:
    tl = Timeline()
    tl.add_message(msg("m1", 1))
    tl.gap_opened("", ("m2",), (B,))
    assert order(tl) == ["m1", "[missing:1]"]
    tl.add_message(msg("m2", 2))
    assert order(tl) == ["m1", "m2"]


def test_history_with_open_gaps_gets_the_markers_the_live_events_left() -> None:
    # the live run: m3 arrived without m2, m4 named m2 and m3, a sync named m9
    live = Timeline()
    for m in (msg("m1", 1), msg("m5", 5)):
        live.add_message(m)
    gaps = [ev.GapOpened("m3", ("m2",), (B,)), ev.GapOpened("m4", ("m2", "m3"), ()), ev.GapOpened("", ("m9",), (B,))]
    live.add_message(msg("m3", 3, ev.WAITING))
    live.gap_opened(gaps[0].message_id, gaps[0].missing, gaps[0].senders)
    live.add_message(msg("m4", 4, ev.WAITING))
    for g in gaps[1:]:
        live.gap_opened(g.message_id, g.missing, g.senders)
    # a view opened later (after a restart): the history plus node.open_gaps()
    tl = Timeline()
    tl.load([msg("m1", 1), msg("m3", 3, ev.WAITING), msg("m4", 4, ev.WAITING), msg("m5", 5)], gaps)
    assert order(tl) == order(live) == ["m1", "[missing:1]", "m3", "m4", "m5", "[missing:1]"]
    assert [sorted(m.pending) for m in tl.markers()] == [["m2"], ["m9"]]
    assert [sorted(m.senders) for m in tl.markers()] == [[B], [B]]
    tl.add_message(msg("m2", 2))
    tl.gap_closed("m3")
    tl.gap_closed("m4")
    assert order(tl) == ["m1", "m2", "m3", "m4", "m5", "[missing:1]"]
    tl.add_message(msg("m9", 9))
    assert order(tl) == ["m1", "m2", "m3", "m4", "m5", "m9"]


def test_history_without_gaps_has_no_markers() -> None:
    tl = Timeline()
    tl.load([msg("m1", 1), msg("m3", 3, ev.WAITING)])
    assert order(tl) == ["m1", "m3"]


def test_changes_are_recorded_for_the_view() -> None:
    tl = Timeline()
    tl.load([msg("m1", 1), msg("m2", 2)])
    tl.take_changes()
    tl.set_state("m2", ev.RECEIVED, 0, 0)  # no change: nothing to repaint
    assert tl.take_changes() == (None, set())
    tl.set_state("m1", ev.WAITING)
    first_moved, updated = tl.take_changes()
    assert first_moved is None and [it.msg.message_id for it in updated] == ["m1"]
    tl.add_message(msg("m0", 0))
    first_moved, _ = tl.take_changes()
    assert first_moved == 0


def test_notices_are_local_lines_after_the_latest_message() -> None:
    tl = Timeline()
    tl.add_message(msg("m1", 1))
    tl.notice("hello", 0)
    tl.add_message(msg("m2", 2))
    assert order(tl) == ["m1", "notice", "m2"]
    assert isinstance(tl.items[1], NoticeItem)


def test_local_lines_survive_a_reload_of_the_history() -> None:
    """A line said before the history was first shown (a command typed while the window opened) comes after
    it; a later reload keeps the lines said in what it loads, in place; a window around an older message
    leaves out what is newer than it, and the next load of the end shows it again."""
    tl = Timeline()
    tl.notice("/query: nobody called 'nobody'", 0, error=True)  # before any history
    tl.load([msg("m1", 1), msg("m2", 2)])
    assert order(tl) == ["m1", "m2", "notice"]
    tl.add_message(msg("m3", 3))
    tl.notice("connected again", 0)
    tl.load([msg("m1", 1), msg("m2", 2), msg("m3", 3)])  # Ctrl+End: the last page again
    assert order(tl) == ["m1", "m2", "notice", "m3", "notice"]
    tl.load([msg("m1", 1), msg("m2", 2)], upper=(2, "m2"))  # around a search result: m3 and after not loaded
    assert order(tl) == ["m1", "m2", "notice"]
    tl.append([msg("m3", 3)], None)  # paged down to the end
    assert order(tl) == ["m1", "m2", "notice", "m3", "notice"]
    tl.load([msg("m3", 3)])  # a page that starts later: the older line is not in it
    assert order(tl) == ["m3", "notice"]
    tl.prepend([msg("m1", 1), msg("m2", 2)])  # until the page it was said in is scrolled up to
    assert order(tl) == ["m1", "m2", "notice", "m3", "notice"]
