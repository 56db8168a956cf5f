"""The inspector's reading (node.inspect, node.gaps, `sdschat inspect`) over real scenarios on mosquitto:
a message whose first copy is lost and comes by the author's resend, one only possibly acknowledged, one repaired
by a third member (and one that two members asked for), one declared lost."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from node_helpers import run, start, until

from sdschat.crypto import ChannelKey
from sdschat.node.inspect import lamport_time, render, wall_clock

pytestmark = pytest.mark.timeout(120)


def has(node, mid):
    return mid in node.channel.log


def cli(db, *args):
    """``sdschat inspect --db DB ARGS`` as a shell runs it."""
    return subprocess.run(
        [sys.executable, "-m", "sdschat", "inspect", "--db", str(db), *args], capture_output=True, text=True, timeout=60
    )


def test_a_first_copy_lost_then_resent_is_told_on_both_sides(node_mosquitto, tmp_path):
    key = ChannelKey.generate("inspect-resend")

    async def main():
        a = await start("a", key, tmp_path, node_mosquitto.url)
        b = await start("b", key, tmp_path, node_mosquitto.url)
        try:
            hello = await a.send_text("hello")
            hi = await b.send_text("hi")  # so each knows the other's name
            await until(lambda: has(b, hello) and has(a, hi))
            b.set_impairment(loss_in=1.0)
            mid = await a.send_text("b misses the first copy of this")
            await asyncio.sleep(0.15)
            b.set_impairment(loss_in=0.0)
            await until(lambda: has(b, mid) and not a.pending())
            mine, theirs = await a.inspect(mid), await b.inspect(mid)
        finally:
            await a.stop()
            await b.stop()
        return mid, mine, theirs, hello, hi, b.participant_id

    mid, mine, theirs, hello, hi, bob = run(main())
    kinds = [s.kind for s in mine.steps]
    assert mine.own and kinds[0] == "sent" and "resent" in kinds and kinds.index("resent") < kinds.index("acked")
    sent = mine.steps[0]
    # the causal history it carried: each id (short) with its author
    assert sorted(sent.detail["history"]) == sorted([hello, hi])
    assert sent.detail["authors"] == {hello: mine.sender_id, hi: bob}
    assert sent.text.startswith("sent, naming 2 earlier message(s) in its causal history: ")
    assert f"{hello[:8]} (you)" in sent.text and f"{hi[:8]} (b)" in sent.text
    resent = [s for s in mine.steps if s.kind == "resent"]  # b heard nothing of it: no bloom, no history had it
    assert resent[0].text == "resent (#1): not yet acknowledged: no member has named it or shown it in a bloom filter"
    assert resent[0].detail["possibly"] == 0 and resent[0].detail["resends"] == 1
    # the Lamport time as a time of day (it is ms since the epoch here), the number only in the JSON
    lines = render(mine, now_ms=sent.ts_ms, clock=wall_clock)
    assert lines[0] == f"message {mid[:16]}… from you, Lamport time {wall_clock(mine.lamport_timestamp)}"
    assert str(mine.lamport_timestamp) not in lines[0] and abs(mine.lamport_timestamp - sent.ts_ms) < 5_000
    assert any(line.endswith(f"  {resent[0].text}") for line in lines)
    out = cli(tmp_path / "a.db", mid[:8], "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["lamport_timestamp"] == mine.lamport_timestamp and doc["own"] and doc["state"] == "acknowledged"
    assert [s["kind"] for s in doc["steps"]] == kinds
    assert [s["detail"] for s in doc["steps"] if s["kind"] == "resent"][0] == {"resends": 1, "possibly": 0}
    ack = next(s for s in mine.steps if s.kind == "acked")
    assert "acknowledged: in the" in ack.text and "b's" in ack.text
    assert mine.figures["first_ack_ms"] >= 0 and mine.state == "acknowledged"
    seen = [s for s in mine.steps if s.kind == "ack_seen"]  # per member: b named it, once
    assert len(seen) == 1 and seen[0].text.startswith("b has it: named in the causal history of their frame")
    assert mine.figures["acked_by"] == [seen[0].detail["by"]] and mine.figures["not_yet"] == []
    assert mine.figures["all_acked_ms"] == seen[0].ts_ms - sent.ts_ms >= 0  # the only other member: b
    assert not theirs.own and theirs.text == "b misses the first copy of this" and theirs.nick == "a"
    assert [s.kind for s in theirs.steps][:2] == ["received", "delivered"]
    assert theirs.steps[0].text == "first copy resent by a"


def test_a_message_repaired_by_a_third_member_and_the_gap_list(node_mosquitto, tmp_path):
    key = ChannelKey.generate("inspect-repair")

    async def main():
        a, b, c = [await start(n, key, tmp_path, node_mosquitto.url, seed=i) for i, n in enumerate("abc")]
        try:
            b.set_impairment(loss_in=1.0)
            lost = await a.send_text("only c gets this at first")
            await until(lambda: has(c, lost))
            a.set_impairment(offline=True)  # the author cannot resend: c must repair it
            await asyncio.sleep(0.1)
            b.set_impairment(loss_in=0.0)
            await c.send_text("names the one b missed")
            await until(lambda: has(b, lost), timeout=30)
            insp, gaps, only = await b.inspect(lost), await b.gaps(), await b.gaps([lost])
        finally:
            for n in (a, b, c):
                await n.stop()
        return lost, insp, gaps, only

    lost, insp, gaps, only = run(main())
    assert only == [g for g in gaps if g.message_id == lost]  # one gap, read from the rows naming it
    kinds = [s.kind for s in insp.steps]
    assert kinds[0] == "missing" and "noticed missing" in insp.steps[0].text
    assert "delivered" in kinds and insp.figures
    arrived = next(s for s in insp.steps if s.kind == "received")
    assert arrived.detail["via"] == "repair" and "rebroadcast by c (SDS-R answer)" in arrived.text
    gap = next(g for g in gaps if g.message_id == lost)
    assert gap.how == "repair" and gap.closed_ms >= gap.detected_ms

    # the same from the command line, on b's database after the fact
    cmd = [sys.executable, "-m", "sdschat", "inspect", "--db", str(tmp_path / "b.db")]
    out = subprocess.run([*cmd, lost[:10], "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["message_id"] == lost and [s["kind"] for s in doc["steps"]] == kinds
    text = subprocess.run([*cmd, lost[:10]], capture_output=True, text=True, timeout=60).stdout
    assert (
        "rebroadcast by c (SDS-R answer)" in text and "delivered in causal order, repaired through SDS-R repair" in text
    )
    listing = subprocess.run([*cmd, "--gaps"], capture_output=True, text=True, timeout=60).stdout
    assert f"{lost[:16]} from a: noticed through c's message" in listing and "repaired (SDS-R) by c" in listing
    for bad, msg in (("zz", "is not a message id"), ("0123456789", "no message 0123456789")):
        r = subprocess.run([*cmd, bad], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_message_declared_lost_is_told_so(node_mosquitto, tmp_path):
    key = ChannelKey.generate("inspect-lost")
    quiet = dict(lost_after_ms=1_500, resend_unacknowledged_ms=60_000, resend_possibly_acknowledged_ms=60_000)

    async def main():
        a = await start("a", key, tmp_path, node_mosquitto.url, **quiet)
        b = await start("b", key, tmp_path, node_mosquitto.url, **quiet)
        try:
            await a.send_text("first")
            await until(lambda: len(b.channel.log) == 1)
            b.set_impairment(loss_in=1.0)
            gone = await a.send_text("nobody will ever give b this one")
            await asyncio.sleep(0.2)
            b.set_impairment(loss_in=0.0)
            names = await a.send_text("names the lost one")
            await until(lambda: b.open_gaps())
            a.set_impairment(offline=True)  # the only copy is gone for good: nobody can repair it
            waiting = await b.inspect(names)
            for _ in range(300):
                gaps = await b.gaps()
                if any(g.message_id == gone and g.how == "lost" for g in gaps):
                    break
                await asyncio.sleep(0.1)
            await until(lambda: has(b, names))
            return gone, gaps, await b.inspect(gone), waiting, await b.inspect(names)
        finally:
            await a.stop()
            await b.stop()

    gone, gaps, insp, waiting, released = run(main())
    gap = next(g for g in gaps if g.message_id == gone)
    assert gap.how == "lost" and gap.closed_ms - gap.detected_ms >= 1_500
    kinds = [s.kind for s in insp.steps]
    assert kinds[0] == "missing" and kinds[-1] == "lost" and "repair_requested" in kinds
    assert insp.steps[-1].text == "declared lost: no copy came by resend, repair or store"
    assert insp.state == "lost" and insp.text is None  # never arrived here: no text to show
    # the message that named it was held back until then: while it waited, and after
    held = next(s for s in waiting.pending if s.kind == "buffered")
    assert held.text == f"held back: waits for {gone[:8]}" and held.detail["waits_for"] == [gone]
    assert f"now: {held.text}" in render(waiting, now_ms=held.ts_ms + 5_000, clock=wall_clock)  # no countdown
    assert released.figures["held_back_ms"] >= 1_500 and not released.pending
    assert f"held back {released.figures['held_back_ms'] / 1000:.2f} s for earlier messages" in render(
        released, now_ms=0, clock=wall_clock
    )
    delivered = next(s for s in released.steps if s.kind == "delivered")
    assert delivered.text == "delivered in causal order, after 1 earlier message(s) were declared lost"
    # the same from the command line, on b's database: as JSON, and as text
    out = cli(tmp_path / "b.db", gone, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["state"] == "lost" and doc["lamport_timestamp"] is None and doc["text"] is None
    assert [s["kind"] for s in doc["steps"]] == kinds
    assert doc["steps"][-1]["detail"]["dependants"] == [released.message_id]
    text = cli(tmp_path / "b.db", gone[:7]).stdout.splitlines()
    assert text[:2] == [f"message {gone[:16]}… from a", "state: lost"]  # no Lamport time: it never came
    assert any(line.endswith("  declared lost: no copy came by resend, repair or store") for line in text)
    assert text[-1] == "now: declared lost"


def test_duplicate_copies_are_told_with_how_they_came(node_mosquitto, tmp_path):
    """a never hears b's acknowledgement, so she resends a message b already has: b's timeline shows each extra
    copy (resent by a: a duplicate, dropped) and counts them."""
    key = ChannelKey.generate("inspect-duplicates")

    async def main():
        a = await start("a", key, tmp_path, node_mosquitto.url)
        b = await start("b", key, tmp_path, node_mosquitto.url)
        try:
            await b.send_text("hi")
            await until(lambda: len(a.channel.log) == 1)
            a.set_impairment(loss_in=1.0)  # a hears nothing more: no acknowledgement reaches her
            mid = await a.send_text("b gets this more than once")
            await until(lambda: a.channel.stats["resends"] >= 2 and b.channel.stats["duplicates"] >= 2)
            a.set_impairment(loss_in=0.0)
            await until(lambda: not a.pending())
            return mid, await b.inspect(mid)
        finally:
            await a.stop()
            await b.stop()

    mid, theirs = run(main())
    kinds = [s.kind for s in theirs.steps]
    assert kinds[:2] == ["received", "delivered"] and kinds.count("duplicate") >= 2
    dup = next(s for s in theirs.steps if s.kind == "duplicate")
    assert dup.text == "another copy (resent by a): a duplicate, dropped" and dup.detail["via"] == "resend"
    assert theirs.figures["duplicates"] == kinds.count("duplicate")


def test_a_message_only_possibly_acknowledged_tells_why_it_is_resent_and_when_next(node_mosquitto, tmp_path):
    """a's message reaches b and c, but a hears nothing back until b's next message: with a causal history of one
    entry it names c's later message, not a's, while b's bloom filter holds a's. So a's message is only possibly
    acknowledged (one of the two members it needs), and its resends say so; the next one counts down."""
    key = ChannelKey.generate("inspect-possibly")
    one = dict(causal_history_size=1, ack_delay_ms=None)  # no acknowledgement by a named history, none brought forward

    async def main():
        a, b, c = [await start(n, key, tmp_path, node_mosquitto.url, seed=i, **one) for i, n in enumerate("abc")]
        try:
            hb, hc = await b.send_text("hi from b"), await c.send_text("hi from c")
            await until(lambda: all(has(n, h) for n in (a, b, c) for h in (hb, hc)))
            a.set_impairment(loss_in=1.0)
            mid = await a.send_text("b and c get this, a hears nothing back")
            await until(lambda: has(b, mid) and has(c, mid) and a.channel.stats["resends"] >= 1)
            later = await c.send_text("c's later message")
            await until(lambda: has(b, later))
            c.set_impairment(offline=True)  # c's filter must not complete the acknowledgement
            a.set_impairment(loss_in=0.0)
            await b.send_text("names c's message, not a's")
            await until(
                lambda: a.channel.outgoing_state(mid) == ("possibly_acknowledged", a.channel.outgoing_state(mid)[1])
            )
            for _ in range(200):  # the next resend, sent possibly acknowledged
                insp = await a.inspect(mid)
                if any(s.kind == "resent" and s.detail.get("possibly") for s in insp.steps):
                    break
                await asyncio.sleep(0.05)
            return mid, insp, b.participant_id
        finally:
            for n in (a, b, c):
                await n.stop()

    mid, insp, bob = run(main())
    kinds = [s.kind for s in insp.steps]
    assert insp.state == "resending" and "acked" not in kinds  # resent since it was possibly acknowledged
    possibly = next(s for s in insp.steps if s.kind == "possibly_acked")
    assert possibly.text == "possibly acknowledged (bloom filter of b; 1 member(s) so far)"
    assert possibly.detail["by"] == bob and possibly.detail["count"] == 1
    resent = [s for s in insp.steps if s.kind == "resent"]
    before = [s for s in resent if s.ts_ms < possibly.ts_ms]
    after = [s for s in resent if s.ts_ms > possibly.ts_ms]
    assert before and all(
        s.text.endswith(": not yet acknowledged: no member has named it or shown it in a bloom filter") for s in before
    )
    n = after[0].detail["resends"]
    assert after[0].text == (
        f"resent (#{n}): only possibly acknowledged: in the bloom filter of 1 member(s) (b), "
        "in nobody's causal history yet"
    )
    due = next(s for s in insp.pending if s.kind == "resend_due")
    assert due.text.startswith(f"not yet acknowledged: resend #{due.detail['resends'] + 1} due")
    assert due.text.endswith("; possibly acknowledged by b") and due.detail["possibly_by"] == [bob]
    # the countdown, as the panel and `sdschat inspect` show it at a given moment
    assert f"now: {due.text} (in 2.5 s)" in render(insp, now_ms=due.ts_ms - 2_500, clock=wall_clock)
    assert f"now: {due.text} (now)" in render(insp, now_ms=due.ts_ms + 10, clock=wall_clock)
    # the JSON keeps the reasons' figures and the timer as an absolute time
    out = cli(tmp_path / "a.db", mid, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert [s["detail"]["possibly"] for s in doc["steps"] if s["kind"] == "resent"][-1] == 1
    assert doc["pending"][0]["kind"] == "resend_due" and doc["pending"][0]["ts_ms"] >= due.ts_ms


def test_a_lamport_time_reads_as_a_time_with_its_date_when_not_today():
    ms = 1_795_804_358_222  # what the issue saw printed as a number
    assert lamport_time(ms, ms + 60_000) == wall_clock(ms)
    assert lamport_time(ms, ms + 3 * 86_400_000).endswith(f" {wall_clock(ms)}")  # another day: its date first
    assert lamport_time(ms, ms + 3 * 86_400_000) != wall_clock(ms)
    assert lamport_time(42, ms) == "42"  # a plain counter stays a number
    assert lamport_time(2**63, ms) == str(2**63)  # as does a time no calendar holds (a peer's nonsense)


def test_repair_requests_of_other_members_are_told(node_mosquitto, tmp_path):
    """b and d both miss a's message and a goes offline: c answers. Whichever of b and d asked second saw the
    other's request first (so did c, who answered it): their timelines tell who asked, in which frame."""
    key = ChannelKey.generate("inspect-others-ask")

    async def main():
        a, b, c, d = [await start(n, key, tmp_path, node_mosquitto.url, seed=i) for i, n in enumerate("abcd")]
        nodes = (a, b, c, d)
        try:
            hellos = [await n.send_text(f"hello from {n.nick}") for n in nodes]
            await until(lambda: all(has(n, h) for n in nodes for h in hellos))
            b.set_impairment(loss_in=1.0)
            d.set_impairment(loss_in=1.0)
            lost = await a.send_text("only c gets this at first")
            await until(lambda: has(c, lost))
            a.set_impairment(offline=True)  # the author cannot resend: c must repair it
            await asyncio.sleep(0.1)
            b.set_impairment(loss_in=0.0)
            d.set_impairment(loss_in=0.0)
            await c.send_text("names the one b and d missed")
            await until(lambda: has(b, lost) and has(d, lost), timeout=30)
            await until(lambda: not c.pending(), timeout=10)
            return lost, {n.nick: await n.inspect(lost) for n in (b, c, d)}, {n.nick: n.participant_id for n in nodes}
        finally:
            for n in nodes:
                await n.stop()

    lost, insp, ids = run(main())
    seen = {who: [s for s in insp[who].steps if s.kind == "repair_request_seen"] for who in ("b", "d")}
    assert seen["b"] or seen["d"]  # the later asker (or one who never had to ask) saw the earlier one's request
    for who, other in (("b", "d"), ("d", "b")):
        kinds = [s.kind for s in insp[who].steps]
        for s in seen[who]:
            assert s.detail["by"] == ids[other] and s.text.startswith(
                f"{other} asked for a repair (SDS-R request in their frame {s.detail['frame'][:8]})"
            )
            assert s.ts_ms <= insp[who].steps[kinds.index("received")].ts_ms  # while it was still missing here
            if s.detail.get("asking"):
                assert s.text.endswith("; your own request backs off afresh")
    # c had it and answered: its timeline says who asked and when its answer was due
    asked = [s for s in insp["c"].steps if s.kind == "repair_request_seen"]
    assert asked and {s.detail["by"] for s in asked} <= {ids["b"], ids["d"]}
    answer = next(s for s in asked if "answer_ms" in s.detail)
    assert "; you answer in " in answer.text and answer.text.endswith(" s unless someone answers first")
    assert answer.detail["answer_ms"] >= answer.ts_ms
