"""One way to log, for every command: ``--log-level`` and ``--log-file``, set up once by ``sdschat``'s main.

Where records go:

* ``--log-file FILE``: to FILE (appended; created 0600, its folder 0700 when
  it has to be made), whatever the command.
* otherwise the commands that take the terminal for a screen (bare
  ``sdschat``, ``chat``, ``demo``) write to :func:`default_log_file`: a
  line on the screen would tear it;
* and every other command to standard error, as ``sdschat: level: logger: text``.

The level (default ``warning``) is the log's; at ``info`` and ``debug`` the
libraries underneath still log their warnings and errors only, so ``debug``
shows what sdschat does rather than every query and packet below it.

An internal error (an exception no part of the project raised on purpose) is
written, traceback and all, to the log file (``--log-file``, else the default
one) by :func:`report_internal_error`, and the person reads one line saying
where.

No secret reaches a log: every line is passed through :func:`redact`, which
masks the password of a broker URL, an invite token (it is a channel's key)
and the values of the passphrase variables.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import tempfile
import traceback
from io import TextIOWrapper
from pathlib import Path
from typing import TextIO

__all__ = [
    "LEVELS",
    "LOG_NAME",
    "SCREEN_COMMANDS",
    "add_log_args",
    "default_log_file",
    "log_level",
    "private_log_dir",
    "redact",
    "report_internal_error",
    "setup_logging",
]

#: the levels ``--log-level`` takes
LEVELS = ("debug", "info", "warning", "error")
#: the default log file's name, in the profile's data folder
LOG_NAME = "sdschat.log"
#: the commands whose output is a full-screen window (``None``: bare ``sdschat``)
SCREEN_COMMANDS = (None, "chat", "demo")
#: the variables whose values are secrets (a channel's passphrase, the identity's)
SECRET_VARIABLES = ("SDSCHAT_PASSPHRASE", "SDSCHAT_IDENTITY_PASSPHRASE")

_URL_LOGIN = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/\s:@]*:)[^@\s/]+@", re.IGNORECASE)
_TOKEN = re.compile(r"\bsdschat:[A-Za-z0-9_-]{16,}")


def add_log_args(p: argparse.ArgumentParser) -> None:
    """``--log-level`` and ``--log-file`` (accepted before or after the command, like ``--home``)."""
    p.add_argument(
        "--log-level",
        type=log_level,
        default=argparse.SUPPRESS,
        metavar="LEVEL",
        help=f"how much the log says: {', '.join(LEVELS)} (default warning)",
    )
    p.add_argument(
        "--log-file",
        type=_log_path,
        default=argparse.SUPPRESS,
        metavar="FILE",
        help="write the log (and an internal error's traceback) to FILE; default: standard error, or "
        f"for the window, chat and demo {LOG_NAME} in the profile's data folder",
    )


def log_level(text: str) -> int:
    """``--log-level``: a level's name, in any case."""
    name = text.strip().lower()
    if name not in LEVELS:
        raise argparse.ArgumentTypeError(f"one of {', '.join(LEVELS)}, not {text!r}")
    return int(getattr(logging, name.upper()))


def _log_path(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a file, not an empty string")
    return Path(text).expanduser()


def redact(text: str) -> str:
    """``text`` with its secrets masked: a URL's password, an invite token, a passphrase of the environment."""
    text = _URL_LOGIN.sub(r"\1***@", text)
    text = _TOKEN.sub("sdschat:***", text)
    for name in SECRET_VARIABLES:
        secret = os.environ.get(name)
        if secret and len(secret) >= 4:  # (a shorter one would mask ordinary words)
            text = text.replace(secret, "***")
    return text


class _RedactingFormatter(logging.Formatter):
    """A formatter whose every line (message and traceback alike) went through :func:`redact`."""

    def format(self, record: logging.LogRecord) -> str:
        record.level = record.levelname.lower()  # (the stderr lines say "sdschat: warning: ...", as the CLI's own)
        return redact(super().format(record))


class _StderrHandler(logging.StreamHandler):
    """Standard error as it is when a record is written (not as it was when logging was set up: a test's capture,
    a stream redirected since), like the handler Python falls back on when none is set up."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


def _open_log(path: str | Path) -> int:
    """A descriptor appending to the log file ``path``, created 0600 (the records are the user's business)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


class _PrivateFileHandler(logging.FileHandler):
    """A log file created 0600, appended to."""

    def _open(self) -> TextIOWrapper:
        return open(_open_log(self.baseFilename), "a", encoding=self.encoding or "utf-8", errors=self.errors)


def private_log_dir(path: Path) -> Path:
    """``path`` made (0700) if missing; an existing folder is used as it is (``--log-file`` may name any)."""
    if not path.exists():
        path.mkdir(parents=True, mode=0o700)
        os.chmod(path, 0o700)
    return path


def _temp_log_dir() -> Path:
    """This user's own folder for logs under the temporary folder, 0700 (a fresh one if the usual name is taken
    by someone else, or is not a plain folder)."""
    folder = Path(tempfile.gettempdir()) / f"sdschat-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        st = folder.lstat()
        if folder.is_symlink() or not folder.is_dir() or (hasattr(os, "getuid") and st.st_uid != os.getuid()):
            raise PermissionError(folder)
        os.chmod(folder, 0o700)
        return folder
    except OSError:
        return Path(tempfile.mkdtemp(prefix="sdschat-"))


def default_log_file(args: argparse.Namespace | None) -> Path:
    """Where a log goes without ``--log-file``: ``sdschat.log`` in the profile's data folder when there is a
    profile there, else in this user's folder under the temporary folder."""
    from sdschat.profile import ProfileError, resolve_paths

    try:
        data = resolve_paths(getattr(args, "home", None)).data
    except ProfileError:
        data = None
    if data is not None and data.is_dir():
        return data / LOG_NAME
    return _temp_log_dir() / LOG_NAME


def _file_handler(path: Path) -> logging.Handler:
    private_log_dir(path.parent)
    handler = _PrivateFileHandler(path, encoding="utf-8", delay=True)
    handler.setFormatter(_RedactingFormatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
    return handler


def setup_logging(args: argparse.Namespace) -> None:
    """Send the records of this run where :mod:`this module <sdschat.cli.logs>` says, at ``--log-level``."""
    level = getattr(args, "log_level", logging.WARNING)
    log_file = getattr(args, "log_file", None)
    if log_file is None and getattr(args, "command", None) in SCREEN_COMMANDS:
        log_file = default_log_file(args)
    if log_file is not None:
        try:
            handler = _file_handler(log_file)
        except OSError as exc:
            from .errors import CliError

            raise CliError(f"cannot write the log to {log_file}: {exc.strerror or exc}") from None
    else:
        handler = _StderrHandler()
        handler.setFormatter(_RedactingFormatter("sdschat: %(level)s: %(name)s: %(message)s"))
    handler.setLevel(level)
    root = logging.getLogger()
    for old in list(root.handlers):  # once per run: a second main() in one process replaces the first's
        if getattr(old, "_sdschat", False):
            root.removeHandler(old)
            old.close()
    handler._sdschat = True  # type: ignore[attr-defined]  # (marks the handler this module added)
    root.addHandler(handler)
    root.setLevel(level)
    if level < logging.WARNING:  # the libraries' chatter stays out of sdschat's debug log
        for name in _LIBRARIES:
            logging.getLogger(name).setLevel(logging.WARNING)


#: the loggers of the libraries underneath, kept at warning whatever ``--log-level`` says
_LIBRARIES = ("asyncio", "aiosqlite", "paho", "textual", "markdown_it", "py4j", "pyspark")


def report_internal_error(exc: BaseException, args: argparse.Namespace | None) -> str:
    """Write ``exc``'s traceback to the log file (``--log-file``, else :func:`default_log_file`); where it went,
    or why it could not be written."""
    import time

    try:
        path = getattr(args, "log_file", None) or default_log_file(args)
        private_log_dir(path.parent)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        text = "".join(traceback.format_exception(exc)).rstrip()
        entry = redact(f"{stamp} {os.getpid()} CRITICAL sdschat.cli: internal error: {type(exc).__name__}\n{text}\n")
        fd = _open_log(path)
        try:
            os.write(fd, entry.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError as failed:
        return f"nowhere ({failed.strerror or failed})"
    return str(path)
