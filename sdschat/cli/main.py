"""The ``sdschat`` command: the parser and the dispatch to one module per command group.

Each command is a ``configure(parser)`` and a ``run(args)`` (a coroutine for the
async ones); heavy imports happen inside ``run`` so ``sdschat --help`` is fast.
Bad input gets one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from . import bot, broker, chat, export, inspection, keys, members, pipeline, profiles, search, storenode, window
from .args import Parser, add_home_arg
from .errors import CliError

__all__ = ["main", "build_parser", "COMMANDS"]

COMMANDS = {
    "init": (profiles.init_configure, profiles.init_run, "create your profile: a name, a broker, one identity"),
    "new": (profiles.new_configure, profiles.new_run, "create a channel with a fresh random key and join it"),
    "invite": (profiles.invite_configure, profiles.invite_run,
               "print an invite token for a channel (a secret: it is the channel's key)"),
    "join": (profiles.join_configure, profiles.join_run,
             "join a channel by invite token (or import a 0.1 key file and database)"),
    "channels": (profiles.channels_configure, profiles.channels_run,
                 "list your channels: members seen, unread, messages"),
    "search": (search.search_configure, search.search_run,
               "find messages in your channels (full-text, on this machine only)"),
    "kick": (members.kick_configure, members.kick_run,
             "remove a member from a channel you administer: a new key for everyone else"),
    "rekey": (members.rekey_configure, members.rekey_run,
              "rotate a channel's key (a new key epoch for every member) without removing anyone"),
    "admin": (members.admin_configure, members.admin_run, "make a member an admin of a channel you administer"),
    "part": (profiles.part_configure, profiles.part_run, "leave a channel (its history stays unless --forget)"),
    "demo": (chat.demo_configure, chat.demo_run, "N participants side by side over an embedded broker (the main demo)"),
    "chat": (chat.chat_configure, chat.chat_run, "the chat UI: join a channel as NAME"),
    "keygen": (keys.keygen_configure, keys.keygen_run, "write a fresh random channel key file (mode 0600)"),
    "broker": (broker.broker_configure, broker.broker_run, "run an embedded MQTT broker"),
    "bot": (bot.bot_configure, bot.bot_run, "a headless participant that sends N messages, then lingers until settled"),
    "store": (storenode.storenode_configure, storenode.storenode_run,
              "a key-less store node: caches every channel's envelopes so participants catch up and fill gaps"),
    "simulate": (pipeline.simulate_configure, pipeline.simulate_run,
                 "simulate a large group running the real engine in virtual time; writes Parquet events"),
    "report": (pipeline.report_configure, pipeline.report_run,
               "reliability report (PySpark) over simulations and/or participant databases"),
    "sweep": (pipeline.sweep_configure, pipeline.sweep_run, "run a grid of simulations as Spark tasks and plot the results"),
    "export": (export.export_configure, export.export_run,
               "write a database's ordered log (or events) as JSON lines or Parquet"),
    "inspect": (inspection.inspect_configure, inspection.inspect_run,
                "one message's life (sends, acks, repairs, delivery), or every gap and how it closed"),
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


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="sdschat", description="Terminal group chat with end-to-end reliability you can see. "
                    "With no command: every channel of your profile in one window.")
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="print the version and which build of the engine runs (compiled or Python), then exit")
    add_home_arg(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, (configure, run, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        configure(p)
        p.set_defaults(_run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        result = (getattr(args, "_run", None) or window.window_run)(args)
        if asyncio.iscoroutine(result):
            result = asyncio.run(result)
        return int(result or 0)
    except CliError as exc:
        print(f"sdschat: {exc}" if not str(exc).startswith("sdschat") else str(exc), file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
