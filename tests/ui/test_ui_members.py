"""/members on three real nodes over the embedded broker: acks per member, their lag, repairs served and the loss
estimate, counted from a scenario whose losses are known."""

from __future__ import annotations

import statistics

from ui_helpers import cluster, line_with, lines_of, repaired_by_third, slash, wait_until

from sdschat.ui.app import ChatApp
from sdschat.ui.screens.members import FOOTER, MembersScreen

SIZE = (140, 36)


async def _rows(store, kind: str) -> list:
    return [e async for e in store.iter_events(kind=kind)]


def test_members_counts_acks_lag_repairs_and_loss_per_member(tmp_path, run) -> None:
    """alice's first copy of "hello" is lost at bob and carol (her resend gets through: 2 tries, 1 ack each);
    "again" goes straight (1 try each); bob's "missed" never reaches alice straight and carol repairs it.

    bob:   tries 3, acks 2; his 3 messages received, 1 indirect -> lost (3-2)+1 = 2 of 3+3 = 6 (33%)
    carol: tries 3, acks 2; her 2 messages received straight    -> lost (3-2)+0 = 1 of 3+2 = 5 (20%), 1 repair
    """

    async def scenario():
        async with cluster(tmp_path, ("alice", "bob", "carol")) as (alice, bob, carol):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await bob.send_text("first")
                await wait_until(pilot, lambda: line_with(lines_of(app), "first"), what="first")
                await wait_until(pilot, lambda: len(carol.channel.log) >= 1, what="carol has it")

                def acked_by_all(mid):
                    return all(mid in n.channel.log for n in (bob, carol))

                bob.set_impairment(loss_in=1.0)
                carol.set_impairment(loss_in=1.0)
                hello = await alice.send_text("hello")
                await pilot.pause(0.3)  # published and dropped; the resend comes at 0.8 s
                bob.set_impairment(loss_in=0.0)
                carol.set_impairment(loss_in=0.0)
                await wait_until(pilot, lambda: acked_by_all(hello), what="the resend")
                again = await alice.send_text("again")
                await wait_until(pilot, lambda: acked_by_all(again), what="again")
                # their next messages name both in their causal histories (a member's sync can be held back by
                # another's, so syncs alone may not come from each of them in time)
                await bob.send_text("got both")
                await carol.send_text("me too")
                # both straight to alice before her link drops for "missed" (a copy still on its way then would be
                # lost and repaired too: one more for carol's figures)
                for text in ("got both", "me too"):
                    await wait_until(pilot, lambda t=text: line_with(lines_of(app), t), what=text)

                async def acks_seen():
                    return {
                        (e.message_id, e.detail["by"])
                        for e in await _rows(alice.store, "ack_seen")
                        if e.message_id in (hello, again)
                    }

                want = {(m, p.participant_id) for m in (hello, again) for p in (bob, carol)}
                for _ in range(100):
                    await alice.members()  # flushes what the node holds to the database
                    if await acks_seen() >= want:
                        break
                    await pilot.pause(0.05)
                assert await acks_seen() >= want

                await repaired_by_third(pilot, alice, bob, carol, "missed")

                members = await slash(pilot, app, "/members", MembersScreen)
                await wait_until(
                    pilot,
                    lambda: len(members.lines) == 2 and all("/" in line for line in members.lines),
                    what="both members",
                )

                # the figures, against what the events say
                sent = {e.message_id: e.ts_ms for e in await _rows(alice.store, "sent")}
                resent = [e.message_id for e in await _rows(alice.store, "resent")]
                assert resent.count(hello) == 1 and again not in resent, resent
                by_id = {m.participant_id: m for m in await alice.members()}
                first_ack = {}
                for e in await _rows(alice.store, "ack_seen"):
                    first_ack.setdefault((e.detail["by"], e.message_id), e.ts_ms)
                for who, repairs, received, lost in ((bob, 0, 6, 2), (carol, 1, 5, 1)):
                    m = by_id[who.participant_id]
                    ours = [mid for (by, mid) in first_ack if by == who.participant_id]
                    assert sorted(ours) == sorted(sent), (who.nick, ours)  # only hello and again are ours
                    assert m.acks == 2, (who.nick, m)
                    lags = [first_ack[(who.participant_id, mid)] - sent[mid] for mid in ours]
                    assert m.ack_lag_ms == statistics.median(lags)
                    assert lags[ours.index(hello)] >= 800  # acknowledged only after the resend
                    assert m.repairs == repairs, (who.nick, m)
                    assert (m.tries, m.lost) == (received, lost), (who.nick, m)
                    line = next(row for row in members.lines if row.startswith(who.nick + " "))
                    cells = line.split()
                    assert cells[5] == "2" and cells[6] == f"{m.ack_lag_ms / 1000:.2f}"  # acked ours, lag
                    assert cells[8] == str(repairs)
                    assert cells[-2:] == [f"~{lost / received:.0%}", f"{lost}/{received}"], line
                assert (by_id[bob.participant_id].messages, by_id[carol.participant_id].messages) == (3, 2)
                text = app.screen.query_one("#live-body").render()
                assert "loss between us ≈ lost / tries" in str(text) and FOOTER.split()[0] in str(text)
                await pilot.press("escape")
                assert app.errors == []

    run(scenario(), timeout=60)
