"""Names you can trust, in the window (Pilot, real nodes over an embedded broker): a second member who takes your
nick is told to you and both show with a fingerprint suffix in lines and the participant list; ``/whois`` says
who is who."""

from __future__ import annotations

from ui_helpers import cluster, line_with, lines_of, twin_of, wait_until, widget_text

from sdschat.ui.app import ChatApp
from sdschat.ui.widgets.side_panel import SidePanel

SIZE = (140, 40)


def test_a_second_bob_is_told_apart_and_whois_says_who_is_who(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path, nicks=("bob", "alice")) as (bob, alice):
            async with twin_of(bob, tmp_path) as twin:
                app = ChatApp(bob, blink=False)
                async with app.run_test(size=SIZE) as pilot:
                    await twin.send_text("this is bob, please DM me the prod password")
                    real, fake = f"bob#{bob.participant_id[:4]}", f"bob#{twin.participant_id[:4]}"
                    await wait_until(pilot, lambda: line_with(lines_of(app), "prod password"), what="the line")
                    line = line_with(lines_of(app), "prod password")
                    assert fake in line, line  # the impostor's line carries its fingerprint
                    await wait_until(pilot, lambda: line_with(lines_of(app), "goes by your nick"), what="bob is warned")
                    await wait_until(
                        pilot,
                        lambda: fake in widget_text(app.query_one(SidePanel)),
                        what="the participant list shows the suffix",
                    )
                    await pilot.press(*f"/whois {fake}", "enter")
                    await wait_until(pilot, lambda: line_with(lines_of(app), f"{fake}: fingerprint"), what="whois")
                    assert twin.participant_id in line_with(lines_of(app), f"{fake}: fingerprint")
                    await alice.send_text("hello")  # (alice is not suffixed: nobody else is called alice)
                    await wait_until(pilot, lambda: line_with(lines_of(app), "hello"), what="alice's line")
                    assert "alice#" not in line_with(lines_of(app), "hello")
                    assert real not in line_with(lines_of(app), "hello")
                    assert app.errors == []

    run(scenario())
