"""The ``sdschat`` command: the parser and the dispatch to one module per command group.

Each command is a ``configure(parser)`` and a ``run(args)`` (a coroutine for the
async ones); heavy imports happen inside ``run`` so ``sdschat --help`` is fast.
Bad input gets one line on stderr and a non-zero exit, never a traceback.

Errors are handled in one place, :func:`_run`: a failure a person can act on
(:func:`~sdschat.cli.errors.user_errors`: the command line's own, and each
part's user-facing errors) is ``sdschat: <text>`` and exit status 2; any
other exception is a bug, reported as ``sdschat: internal error (...)`` with
its traceback in the log file (:mod:`sdschat.cli.logs`) and exit status 70.
Logging is set up there too, once, from ``--log-level`` and ``--log-file``;
and the environment's yes/no switches are checked before anything reads them
(:func:`sdschat.profile.settings.check_flags`).

A closed pipe is handled here, once for every command: when whoever reads the output has gone
(``sdschat search x | head -2``), the command ends quietly with exit status 141 (128 + SIGPIPE, what
a shell reports for ``yes | head``), as Python's documentation recommends: the ``BrokenPipeError``
is caught at the top and standard output is pointed at the null device, so nothing fails again
when the interpreter flushes it on the way out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import select
import signal
import sys
from collections.abc import Sequence

from . import bot, broker, chat, dm, export, inspection, keys, members, pipeline, profiles, search, storenode, window
from .args import Parser, add_home_arg
from .errors import EXIT_INTERNAL, EXIT_USER, CliError, one_line, user_errors
from .logs import add_log_args, report_internal_error, setup_logging

__all__ = ["main", "build_parser", "COMMANDS", "EXIT_PIPE_CLOSED"]

#: the exit status when the reader of our output (or of our errors) went away: 128 + SIGPIPE
EXIT_PIPE_CLOSED = 128 + signal.SIGPIPE

COMMANDS = {
    "init": (profiles.init_configure, profiles.init_run, "create your profile: a name, a broker, one identity"),
    "new": (profiles.new_configure, profiles.new_run, "create a channel with a fresh random key and join it"),
    "invite": (
        profiles.invite_configure,
        profiles.invite_run,
        "print an invite token for a channel (a secret: it is the channel's key)",
    ),
    "join": (
        profiles.join_configure,
        profiles.join_run,
        "join a channel by invite token (or import a 0.1 key file and database)",
    ),
    "dm": (
        dm.dm_configure,
        dm.dm_run,
        "talk with a member of your channels in a new two-member channel (no token: they are asked in their window)",
    ),
    "channels": (
        profiles.channels_configure,
        profiles.channels_run,
        "list your channels: members seen, unread, messages",
    ),
    "search": (
        search.search_configure,
        search.search_run,
        "find messages in your channels (full-text, on this machine only)",
    ),
    "kick": (
        members.kick_configure,
        members.kick_run,
        "remove a member from a channel you administer: a new key for everyone else",
    ),
    "rekey": (
        members.rekey_configure,
        members.rekey_run,
        "rotate a channel's key (a new key epoch for every member) without removing anyone",
    ),
    "admin": (members.admin_configure, members.admin_run, "make a member an admin of a channel you administer"),
    "part": (
        members.part_configure,
        members.part_run,
        "leave a channel: the others are told (its history stays unless --forget)",
    ),
    "demo": (chat.demo_configure, chat.demo_run, "N participants side by side over an embedded broker (the main demo)"),
    "chat": (chat.chat_configure, chat.chat_run, "the chat UI: join a channel as NAME"),
    "keygen": (keys.keygen_configure, keys.keygen_run, "write a fresh random channel key file (mode 0600)"),
    "broker": (broker.broker_configure, broker.broker_run, "run an embedded MQTT broker"),
    "bot": (bot.bot_configure, bot.bot_run, "a headless participant that sends N messages, then lingers until settled"),
    "store": (
        storenode.storenode_configure,
        storenode.storenode_run,
        "a key-less store node: caches every channel's envelopes so participants catch up and fill gaps",
    ),
    "simulate": (
        pipeline.simulate_configure,
        pipeline.simulate_run,
        "simulate a large group running the real engine in virtual time; writes Parquet events",
    ),
    "report": (
        pipeline.report_configure,
        pipeline.report_run,
        "reliability report (PySpark) over simulations and/or participant databases",
    ),
    "sweep": (
        pipeline.sweep_configure,
        pipeline.sweep_run,
        "run a grid of simulations as Spark tasks and plot the results",
    ),
    "export": (
        export.export_configure,
        export.export_run,
        "write a database's ordered log (or events) as JSON lines or Parquet",
    ),
    "inspect": (
        inspection.inspect_configure,
        inspection.inspect_run,
        "one message's life (sends, acks, repairs, delivery), or every gap and how it closed",
    ),
}


class _Version(argparse.Action):
    """``--version``: sdschat's version and which build of the engine runs (imported only when asked)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from importlib.metadata import PackageNotFoundError, version

        from sdschat.sds import native

        try:
            own = version("sdschat")
        except PackageNotFoundError:
            own = "(not installed)"
        print(f"sdschat {own}; engine: {native.BUILD}")
        parser.exit(0)


class _CommandParser(Parser):
    """The parser of ``sdschat`` and of each command. Its help fails like any output on a closed pipe (argparse
    would ignore the failed write and exit 0). A command that reads free words (``search``'s query:
    ``p.set_defaults(_words=True)``) takes a word that starts with ``-`` but is no option of its own
    (``-deploy``, ``-5``) as a word, like one after ``--``, instead of refusing it as an unknown option (such a
    command's options take one value or none)."""

    def print_help(self, file=None) -> None:
        (file or sys.stdout).write(self.format_help())

    def parse_known_args(self, args=None, namespace=None):
        if args is not None and self.get_default("_words"):
            args = self._words_last(list(args))
        return super().parse_known_args(args, namespace)

    def _words_last(self, args: list[str]) -> list[str]:
        """``args`` with the options (and their values) first and every word after one ``--``, in order."""
        options = self._option_string_actions
        front: list[str] = []
        words: list[str] = []
        rest = iter(args)
        for arg in rest:
            if arg == "--":
                words.extend(rest)
                break
            name = arg.split("=", 1)[0] if arg.startswith("--") else arg
            if name.startswith("--") and name not in options and self.allow_abbrev:  # --lim: --limit, as argparse
                near = [o for o in options if o.startswith(name)]
                name = near[0] if len(near) == 1 else name
            action = options.get(name) if arg != "-" else None
            if action is None:
                words.append(arg)
                continue
            if action.nargs is None and "=" not in arg:  # the option's value, whatever it looks like
                value = next(rest, None)
                if value is None:
                    front.append(arg)  # argparse says it needs one
                else:
                    front += [f"{name}={value}"] if name.startswith("--") else [arg, value]
            else:
                front.append(arg)
        return front + ["--", *words] if words else front


def build_parser() -> argparse.ArgumentParser:
    parser = _CommandParser(
        prog="sdschat",
        description="Terminal group chat with end-to-end reliability you can see. "
        "With no command: every channel of your profile in one window.",
    )
    parser.add_argument(
        "--version",
        action=_Version,
        nargs=0,
        help="print the version and which build of the engine runs (compiled or Python), then exit",
    )
    add_home_arg(parser)
    add_log_args(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    for name, (configure, run, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        configure(p)
        add_log_args(p)
        p.set_defaults(_run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command of ``argv``; its exit status. A closed pipe ends any command quietly, exit 141; output that
    cannot be written (a full disk) is an internal error like any other unexpected one (exit 70)."""
    parsed: list[argparse.Namespace] = []  # the command line, once parsed: where an internal error is logged
    try:
        try:
            code = _run(argv, parsed)
        except SystemExit:  # --help, --version: what they wrote may still be buffered
            _flush()
            raise
        _flush()
        return code
    except BrokenPipeError as exc:
        gone = [s for s in (sys.stdout, sys.stderr) if s is not None and _reader_gone(s)]
        if not gone:  # a socket's (a broker went away mid-write), not our output's: not ours to hide
            return _internal_error(exc, parsed[0] if parsed else None)
        for stream in gone:
            _to_null(stream)
        return EXIT_PIPE_CLOSED
    except OSError as exc:  # our output could not be flushed: what is still buffered goes nowhere, quietly
        if sys.stdout is not None:
            with contextlib.suppress(OSError, ValueError):
                _to_null(sys.stdout)
        return _internal_error(exc, parsed[0] if parsed else None)


def _flush() -> None:
    """Flush stdout: what is still buffered fails here, where it is handled, not as the interpreter exits."""
    if sys.stdout is not None:
        sys.stdout.flush()


def _reader_gone(stream) -> bool:
    """Whether ``stream`` is a pipe (or socket) whose reading end was closed."""
    try:
        fd = stream.fileno()
    except (AttributeError, ValueError, OSError):
        return False
    if not hasattr(select, "poll"):
        return True
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0))


def _to_null(stream) -> None:
    """Point ``stream``'s file descriptor at the null device: what it still buffers goes nowhere, quietly."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, stream.fileno())
    finally:
        os.close(null)


def _run(argv: Sequence[str] | None, parsed: list[argparse.Namespace]) -> int:
    """Parse ``argv`` (into ``parsed``), set up logging, run the command; every failure that escapes it becomes
    one line here."""
    from sdschat.profile.settings import check_flags

    args: argparse.Namespace | None = None
    try:
        check_flags()  # before anything reads one (the engine reads its own on import)
        args = build_parser().parse_args(argv)
        parsed.append(args)
        setup_logging(args)
        result = (getattr(args, "_run", None) or window.window_run)(args)
        if asyncio.iscoroutine(result):
            result = asyncio.run(result)
        return int(result or 0)
    except CliError as exc:
        print(f"sdschat: {exc}" if not str(exc).startswith("sdschat") else str(exc), file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise  # main() tells our own closed output (quiet) from a socket's
    except Exception as exc:
        if isinstance(exc, user_errors()):
            text = one_line(exc)
            print(text if text.startswith("sdschat") else f"sdschat: {text}", file=sys.stderr)
            return EXIT_USER
        return _internal_error(exc, args)


def _internal_error(exc: BaseException, args: argparse.Namespace | None) -> int:
    """A bug: its traceback to the log file, one line saying where, exit status 70."""
    where = report_internal_error(exc, args)
    try:
        what = type(exc).__name__ if not str(exc).strip() else f"{type(exc).__name__}: {one_line(exc)}"
        print(f"sdschat: internal error ({what}); the traceback is in {where}", file=sys.stderr)
    except OSError:
        pass  # stderr is gone too: the log has it
    return EXIT_INTERNAL
