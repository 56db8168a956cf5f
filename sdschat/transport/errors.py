"""The one exception type of the transport package."""

from __future__ import annotations

__all__ = ["TransportError"]


class TransportError(Exception):
    """A transport problem a user can act on (bad URL, unreachable broker, ...).

    The message is always a single line, fit to print as-is by the CLI.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))
