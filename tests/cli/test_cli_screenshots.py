"""The screenshot generator's SVG clean-up, and times where a person expects times."""

from __future__ import annotations

from datetime import UTC, datetime

from sdschat.cli.screenshots import leading_blanks_as_offsets
from sdschat.ui.widgets.side_panel import lamport_text

SVG = (
    '<svg><text class="r1" x="12.2" y="20" textLength="24.4" clip-path="url(#l0)">ab</text>'
    '<text class="r2" x="36.6" y="20" textLength="109.8" clip-path="url(#l0)">connected</text>'
    '<text class="r3" x="146.4" y="20" textLength="134.2" clip-path="url(#l0)">&#160;&#160;unacked&#160;1</text>'
    '<text class="r4" x="280.6" y="20" textLength="36.6" clip-path="url(#l0)">&#160;&#160;&#160;</text></svg>'
)


def test_leading_blanks_become_an_offset_of_whole_cells() -> None:
    out = leading_blanks_as_offsets(SVG)
    assert 'x="170.8" y="20" textLength="109.8" clip-path="url(#l0)">unacked&#160;1</text>' in out
    assert 'x="36.6" y="20" textLength="109.8" clip-path="url(#l0)">connected</text>' in out  # untouched
    assert ">&#160;&#160;&#160;</text>" in out  # blanks only: nothing to draw either way
    assert leading_blanks_as_offsets(out) == out


def test_lamport_times_read_as_times() -> None:
    utc = UTC
    now = int(datetime(2026, 11, 25, 6, 43, 50, tzinfo=utc).timestamp() * 1000)
    assert lamport_text(now - 7_903, now, utc) == "06:43:42.097"
    assert lamport_text(now - 86_400_000, now, utc) == "24 Nov 06:43:50.000"
    assert lamport_text(12, now, utc) == "12"  # a counter, not a clock
