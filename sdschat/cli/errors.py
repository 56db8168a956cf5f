"""The CLI's one error type: a user-facing failure printed as one line."""

from __future__ import annotations

__all__ = ["CliError", "profile_call"]


class CliError(Exception):
    """A user-facing failure: printed as one line, exit status 2 (or ``code``)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def profile_call(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, a profile operation: its :class:`~sdschat.profile.ProfileError` (a damaged or
    missing profile, a name already taken...) becomes a one-line :class:`CliError`."""
    from sdschat.profile import ProfileError

    try:
        return fn(*args, **kwargs)
    except ProfileError as exc:
        raise CliError(str(exc)) from None
