"""Telling the person they were named: the bell, and a desktop notification through the terminal."""

from __future__ import annotations

__all__ = ["clean_osc", "tell_mentions"]


def clean_osc(text: str) -> str:
    """Text safe inside an OSC sequence: no control characters (a peer's text could end it early)."""
    return "".join(c if c.isprintable() else " " for c in text).replace(";", ",")


def tell_mentions(pane, named: list) -> None:
    """Someone named you in ``pane``'s channel: the bell, and a desktop notification (OSC 777 and OSC 9) when
    the terminal is not focused, as the pane's ``notifications`` settings say (none, or ``/mute``: nothing). Each
    message once: a mention that arrives by repair or catch-up is new then."""
    notify = pane.notifications
    if notify is None or pane.muted:
        return
    app = pane.app
    if notify.bell:
        app.bell()
    if notify.desktop and not app.app_focus:
        last = named[-1]
        app.notify_desktop(clean_osc(f"{last.nick} in #{pane.channel_name}"), clean_osc(last.text)[:200])
