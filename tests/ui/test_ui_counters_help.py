"""The side panel's counters explained (Pilot, real nodes over an embedded broker): F1 says what each counts, a
counter of refused frames points at F5, and F5 counts the refusals by reason."""

from __future__ import annotations

from textual.widgets import Static
from ui_helpers import cluster, wait_until, widget_text

from sdschat.ui.app import ChatApp
from sdschat.ui.screens.help import COUNTERS, HelpScreen
from sdschat.ui.screens.wire import WireScreen
from sdschat.ui.widgets.side_panel import SidePanel

SIZE = (140, 44)


def _row(text: str, label: str) -> str:
    return next((line for line in text.splitlines() if line.startswith(label + " ")), "")


def test_refused_frames_point_at_f5_which_says_why_and_f1_explains_every_counter(tmp_path, run) -> None:
    async def scenario():
        async with cluster(tmp_path) as (alice, _bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                panel = app.query_one(SidePanel)
                await wait_until(pilot, lambda: _row(widget_text(panel), "rejected"), what="the counters")
                assert "F5" not in _row(widget_text(panel), "rejected")  # nothing refused: nothing to look at

                # every counter the panel shows is one F1 explains
                text = widget_text(panel).split("Channel #")[1].split("Link (F2)")[0]
                shown = [line.split("  ")[0].strip() for line in text.splitlines()[1:] if line.strip()]
                explained = [label for label, _ in COUNTERS]
                assert shown and all(any(s.startswith(label) for label in explained) for s in shown), shown

                alice.receiver.on_frame(b"\x00not an envelope")  # nobody's key opens it
                alice.receiver.on_frame(alice.key.seal(b"x"))  # opens, but is no frame
                alice.receiver.on_frame(alice.key.seal(b"yy"))
                await wait_until(
                    pilot, lambda: _row(widget_text(panel), "rejected").endswith("2 · F5"), what="rejected 2 · F5"
                )
                assert _row(widget_text(panel), "undecryptable").endswith("1 · F5")

                await pilot.press("f5")
                wire = app.screen
                assert isinstance(wire, WireScreen)
                await wait_until(pilot, lambda: "malformed 2" in wire.reasons, what="the reasons")
                assert wire.reasons == "rejected, by reason: malformed 2 · undecryptable 1"
                assert "malformed 2 · undecryptable 1" in widget_text(wire.query_one("#wire-head", Static))
                await pilot.press("escape")

                await pilot.press("f1")
                assert isinstance(app.screen, HelpScreen)
                help_text = "\n".join(widget_text(s) for s in app.screen.query(Static))
                assert "The side panel's counters (F3)" in help_text
                for label, _ in COUNTERS:
                    assert any(line.lstrip().startswith(label + " ") for line in help_text.splitlines()), label
                rejected = _row("\n".join(line.lstrip() for line in help_text.splitlines()), "rejected")
                assert "frames refused" in rejected and "F5 shows them" in help_text
                await pilot.press("escape")
                assert app.errors == []

    run(scenario())
