"""The sizes the layout changes at (Textual breakpoints: a class on the screen, the rest is CSS in app.tcss).

Below :data:`MIN_WIDTH` x :data:`MIN_HEIGHT` the screen shows a "window too small" notice instead of the
layout (no widget is laid out at a width of 0 or less). The channel window's list narrows with the window
(``-narrow``, ``-medium``; names cut with an ellipsis), and the side panel gives way below
:data:`SIDE_PANEL_WIDTH` columns: at 80x24 the messages get 61 of 80 columns (a 41-character line on one
row). F3 brings the panel back, or hides it, at any width (a class on the screen, kept across resizes).
"""

from __future__ import annotations

__all__ = [
    "MIN_WIDTH",
    "MIN_HEIGHT",
    "SIDE_PANEL_WIDTH",
    "HORIZONTAL_BREAKPOINTS",
    "VERTICAL_BREAKPOINTS",
    "SIDE_SHOWN",
    "SIDE_HIDDEN",
    "too_small",
    "size_classes",
]

MIN_WIDTH = 40
MIN_HEIGHT = 10
#: from this many columns on, the side panel is shown unless F3 hid it
SIDE_PANEL_WIDTH = 120

HORIZONTAL_BREAKPOINTS = [
    (0, "-too-narrow"),
    (MIN_WIDTH, "-narrow"),
    (60, "-medium"),
    (100, "-large"),
    (SIDE_PANEL_WIDTH, "-wide"),
]
VERTICAL_BREAKPOINTS = [(0, "-too-short"), (MIN_HEIGHT, "-tall")]

#: F3's choice, a class of the screen: the side panel shown / hidden whatever the width
SIDE_SHOWN = "-side-shown"
SIDE_HIDDEN = "-side-hidden"


def too_small(width: int, height: int) -> bool:
    return width < MIN_WIDTH or height < MIN_HEIGHT


def size_classes(width: int, height: int) -> list[str]:
    """The classes Textual's breakpoints give a screen of this size (one of each list: the last one reached)."""
    return [
        max((b for b in breakpoints if size >= b[0]), default=breakpoints[0])[1]
        for breakpoints, size in ((HORIZONTAL_BREAKPOINTS, width), (VERTICAL_BREAKPOINTS, height))
    ]
