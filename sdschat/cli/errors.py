"""The CLI's one error type: a user-facing failure printed as one line."""

from __future__ import annotations

__all__ = ["CliError"]


class CliError(Exception):
    """A user-facing failure: printed as one line, exit status 2 (or ``code``)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code
