"""The CLI's error policy: which failures are the user's to fix (one line, exit 2) and which are bugs.

Each part raises its own errors (the layering forbids a base shared across
parts), so the one list of what counts as a user-facing failure is here:
:data:`USER_ERROR_BASES` names the base error of every part a person can act
on, and :func:`user_errors` is the tuple ``sdschat``'s one catch (in
:mod:`sdschat.cli.main`) turns into ``sdschat: <text>`` and exit status 2.
Anything else that escapes a command is an internal error: one line saying
where its traceback was written, and exit status :data:`EXIT_INTERNAL`.

A command raises :class:`CliError` for what the command line itself refuses
(an option that contradicts another, no terminal to ask on); a part's own
error needs no translating unless the command adds what the part cannot know
(which channel, which option).
"""

from __future__ import annotations

import sys
from typing import NoReturn

__all__ = ["CliError", "EXIT_INTERNAL", "EXIT_USER", "USER_ERROR_BASES", "one_line", "refuse_after", "user_errors"]

#: the exit status of a user-facing failure
EXIT_USER = 2
#: the exit status of an internal error (a bug): ``EX_SOFTWARE`` of sysexits.h
EXIT_INTERNAL = 70

#: the user-facing error bases of the project's parts, as (module, class name). The store node's request errors
#: are not here: they describe a peer's request and are answered on the wire, never raised to a command
USER_ERROR_BASES: tuple[tuple[str, str], ...] = (
    ("sdschat.profile.errors", "ProfileError"),  # TokenError, SettingError
    ("sdschat.store.errors", "StoreError"),  # a damaged or too new database, a search query that cannot run
    ("sdschat.crypto.errors", "CryptoError"),  # a key file, an envelope, a signature, a key epoch
    ("sdschat.transport.errors", "TransportError"),  # a broker that cannot be reached or refuses
    ("sdschat.export", "ExportError"),
    ("sdschat.node.errors", "UserError"),  # what the node refuses a person
    ("sdschat.node.inspect", "InspectError"),  # a message id that names nothing, or too many
    ("sdschat.pipeline.report", "ReportError"),
    ("sdschat.pipeline.spark", "SparkJobError"),
    ("sdschat.pipeline.inputs", "InputError"),
    ("sdschat.pipeline.sweep", "GridError"),
)


class CliError(Exception):
    """A user-facing failure of the command line: printed as one line, exit status 2 (or ``code``)."""

    def __init__(self, message: str, code: int = EXIT_USER) -> None:
        super().__init__(message)
        self.code = code


def user_errors() -> tuple[type[Exception], ...]:
    """:class:`CliError` and every base of :data:`USER_ERROR_BASES` whose module is loaded.

    A module never imported cannot have raised its error, so the tuple is built
    from what this process loaded: the catch costs no import (``--help`` stays
    fast, and a command that never touched the pipeline does not load Spark to
    learn the name of its error).
    """
    found: list[type[Exception]] = [CliError]
    for module, name in USER_ERROR_BASES:
        loaded = sys.modules.get(module)
        cls = getattr(loaded, name, None) if loaded is not None else None
        if isinstance(cls, type) and issubclass(cls, Exception):
            found.append(cls)
    return tuple(found)


def refuse_after(errors: list[CliError]) -> NoReturn:
    """End a command that gave what it could (its output first) with the parts it could not (a damaged
    channel's database, say): one line each on stderr, the last raised (exit 2)."""
    sys.stdout.flush()
    for error in errors[:-1]:
        print(f"sdschat: {error}", file=sys.stderr)
    raise errors[-1]


def one_line(exc: BaseException) -> str:
    """``exc``'s text as one line (its lines joined; its type's name if it has no text)."""
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    return text or type(exc).__name__
