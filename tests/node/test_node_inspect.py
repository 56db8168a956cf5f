"""The inspector's reading (node.inspect, node.gaps, `sdschat inspect`) over real scenarios on mosquitto:
a message whose first copy is lost and comes by the author's resend, and one repaired by a third member."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from node_helpers import run, start

from sdschat.crypto import ChannelKey

pytestmark = pytest.mark.timeout(120)


async def until(pred, timeout=20.0):
    for _ in range(int(timeout / 0.02)):
        if pred():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached")


def has(node, mid):
    return mid in node.channel.log


def test_a_first_copy_lost_then_resent_is_told_on_both_sides(node_mosquitto, tmp_path):
    key = ChannelKey.generate("inspect-resend")

    async def main():
        a = await start("a", key, tmp_path, node_mosquitto.url)
        b = await start("b", key, tmp_path, node_mosquitto.url)
        try:
            await a.send_text("hello")
            hi = await b.send_text("hi")  # so each knows the other's name
            await until(lambda: has(b, a.channel.log[0]) and has(a, hi))
            b.set_impairment(loss_in=1.0)
            mid = await a.send_text("b misses the first copy of this")
            await asyncio.sleep(0.15)
            b.set_impairment(loss_in=0.0)
            await until(lambda: has(b, mid) and not a.pending())
            mine, theirs = await a.inspect(mid), await b.inspect(mid)
        finally:
            await a.stop()
            await b.stop()
        return mid, mine, theirs

    mid, mine, theirs = run(main())
    kinds = [s.kind for s in mine.steps]
    assert mine.own and kinds[0] == "sent" and "resent" in kinds and kinds.index("resent") < kinds.index("acked")
    sent = mine.steps[0]
    assert "causal history" in sent.text and sent.detail["history"]  # the id of "hello" among them
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
    assert "rebroadcast by c (SDS-R answer)" in text and "delivered in causal order, repaired through SDS-R repair" in text
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
            await a.send_text("names the lost one")
            await until(lambda: b.open_gaps())
            a.set_impairment(offline=True)  # the only copy is gone for good: nobody can repair it
            for _ in range(300):
                gaps = await b.gaps()
                if any(g.message_id == gone and g.how == "lost" for g in gaps):
                    break
                await asyncio.sleep(0.1)
            return gone, gaps, await b.inspect(gone)
        finally:
            await a.stop()
            await b.stop()

    gone, gaps, insp = run(main())
    gap = next(g for g in gaps if g.message_id == gone)
    assert gap.how == "lost" and gap.closed_ms - gap.detected_ms >= 1_500
    kinds = [s.kind for s in insp.steps]
    assert kinds[0] == "missing" and kinds[-1] == "lost" and "repair_requested" in kinds
    assert insp.steps[-1].text == "declared lost: no copy came by resend, repair or store"
    assert insp.state == "lost" and insp.text is None  # never arrived here: no text to show


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
