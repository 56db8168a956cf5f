"""The node's user-facing error base.

:class:`UserError` is what a person can fix: a wrong name, a command used wrongly, a refusal by the channel's
rules. A front end (the window, the CLI) shows its text as a notice or one line; anything else that escapes is a
bug and is reported as one, with its traceback in the log.
"""

from __future__ import annotations

__all__ = ["UserError", "MemberNotFound", "MessageNotFound", "NotAllowed"]


class UserError(Exception):
    """A failure the user can act on: its text is shown as it is, never a traceback."""


class MemberNotFound(UserError):
    """A name that is no member of the channel, or that several members go by (the text lists them)."""


class MessageNotFound(UserError):
    """A message id that names no message here (not received, or no id at all): nothing to edit, delete or react
    to."""


class NotAllowed(UserError):
    """Something the channel's rules do not let us do: a command for admins only, or anything once we were
    removed from the channel."""
