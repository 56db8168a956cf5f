"""A resend waits while no other member is here (``Receiver._anyone_here``): a member alone in its channel does not
fill the broker's kept sessions with copies of what nobody acknowledges, and resends once someone is heard again.
Real nodes over mosquitto."""

from __future__ import annotations

import asyncio

import pytest
from node_helpers import start
from run_until import until

from sdschat.crypto import ChannelKey

pytestmark = pytest.mark.timeout(60)

#: a resend every 300 ms while a message is unacknowledged
EAGER = dict(
    resend_unacknowledged_ms=300, resend_possibly_acknowledged_ms=300, resend_backoff=1.0, resend_max_interval_ms=300
)


def _resent(node, mid: str) -> int:
    """Resends of ``mid`` the node published (its wire log)."""
    return sum(1 for f in node.wire.frames if f.direction == "out" and f.kind == "resend" and f.message_id == mid)


def _has(node, mid: str) -> bool:
    return any(m.message_id == mid for m in node.messages())


def test_a_member_alone_holds_its_resends_and_resends_once_someone_is_back(node_mosquitto, tmp_path) -> None:
    key = ChannelKey.generate("resend-alone")
    url = node_mosquitto.url

    async def main() -> None:
        alice = await start("alice", key, tmp_path, url, **EAGER)
        bob = await start("bob", key, tmp_path, url, **EAGER)
        try:
            hi = await bob.send_text("hi")
            await until(lambda: _has(alice, hi), what="bob's line at alice")
            await until(lambda: alice.presences.others_here(alice.now()) == [bob.participant_id], what="bob here")
            # bob here but hearing nothing: alice's resends go out, none is held
            bob.set_impairment(loss_in=1.0)
            deaf = await alice.send_text("bob hears none of this at first")
            await until(lambda: _resent(alice, deaf) >= 2, what="resends while bob is here")
            assert alice.counters["resends_held"] == 0
            bob.set_impairment(loss_in=0.0)
            await until(lambda: _has(bob, deaf) and not alice.pending(), what="acknowledged")

            await bob.stop()  # cleanly: its last beat says it is offline
            await until(lambda: alice.presences.others_here(alice.now()) == [], what="bob offline at alice")
            resends_before = alice.health()["resends"]
            alone = await alice.send_text("anyone here?")
            await asyncio.sleep(2.0)  # a resend was due every 300 ms
            assert alice.counters["resends_held"] >= 3
            assert _resent(alice, alone) == 0
            assert alice.health()["resends"] == resends_before  # what was held is not counted as resent
            assert any(m.message_id == alone and m.state == "unacknowledged" for m in alice.messages())

            bob = await start("bob", key, tmp_path, url, **EAGER)  # its start asks the others for their presence
            await until(lambda: _resent(alice, alone) >= 1, timeout=10, what="a resend once bob is back")
            await until(lambda: _has(bob, alone) and not alice.pending(), timeout=10, what="bob has it, acked")
        finally:
            await alice.stop()
            await bob.stop()

    asyncio.run(main())
