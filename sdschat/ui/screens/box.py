"""The look the modal screens share: one scrolling box in the middle of the screen."""

from __future__ import annotations

__all__ = ["box_css"]


def box_css(screen: str, width: int) -> str:
    """CSS for ``screen`` (its class name) showing a ``VerticalScroll`` box ``width`` columns wide (less on a
    narrower terminal) in the middle, as tall as its content up to 90% of the screen."""
    return f"""
    {screen} {{ align: center middle; }}
    {screen} > VerticalScroll {{
        width: {width};
        max-width: 100%;
        height: auto;
        max-height: 90%;
        border: round $accent;
        background: $panel;
        padding: 0 1;
    }}
    """
