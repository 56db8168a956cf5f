"""The ``sdschat`` subcommands: argument wiring and one-line errors.

Each command is a ``configure(parser)`` and a ``run(args)`` (a coroutine for
the async ones). Heavy imports happen inside ``run`` so ``sdschat --help`` is
fast.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import signal
import sys
import time
from pathlib import Path

from .cli import CliError

__all__ = ["registry"]


# ---------------------------------------------------------------- shared bits


def _add_channel_args(p: argparse.ArgumentParser, *, name_required: bool = True) -> None:
    p.add_argument("--name", required=name_required, help="your nick in the channel")
    p.add_argument("--channel", default="general", help="channel name (never sent to the broker)")
    p.add_argument("--key-file", type=Path, help="channel key file (from `sdschat keygen`); "
                   "without it a passphrase is used (SDSCHAT_PASSPHRASE or a prompt)")
    p.add_argument("--broker", help="mqtt://host:port (default: 127.0.0.1:1883 if it answers, else an embedded broker)")
    p.add_argument("--db", type=Path, help="database file (default: under the user data directory)")
    p.add_argument("--qos", type=int, choices=(0, 1), default=0, help="MQTT QoS for publish and subscribe (default 0)")
    _add_impairment_args(p)


def _add_impairment_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("impairment (dogfooding)")
    g.add_argument("--loss", type=_probability, default=0.0, help="drop probability, both directions")
    g.add_argument("--loss-in", type=_probability, help="drop probability of incoming frames")
    g.add_argument("--loss-out", type=_probability, help="drop probability of outgoing frames")
    g.add_argument("--delay-ms", type=_non_negative, default=0.0, help="added delay per frame")
    g.add_argument("--jitter-ms", type=_non_negative, default=0.0, help="random +- delay (reorders frames)")
    g.add_argument("--duplicate", type=_probability, default=0.0, help="probability a frame is delivered twice")
    g.add_argument("--seed", type=int, help="seed of the impairment's randomness")
    p.add_argument("--tune", action="append", default=[], metavar="FIELD=VALUE", type=_tune,
                   help="expert: override a protocol setting of the node (a ChannelConfig field, or repair_FIELD "
                        "for RepairConfig), e.g. --tune repair_t_max_ms=3000; all members should agree")


def number(kind: type = float, lo: float | None = None, hi: float | None = None):
    """An argparse ``type`` accepting a ``kind`` (int or float) within ``[lo, hi]``."""

    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {'an integer' if kind is int else 'a number'}: {text!r}") from None
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            bounds = f"between {lo:g} and {hi:g}" if lo is not None and hi is not None else f">= {lo:g}"
            raise argparse.ArgumentTypeError(f"must be {bounds}, got {text}")
        return v

    return parse


_probability = number(float, 0.0, 1.0)
_non_negative = number(float, 0.0)
_positive_int = number(int, 0)


def _tune(text: str) -> tuple[str, int | float | bool]:
    import dataclasses

    from .sds import ChannelConfig, RepairConfig

    name, sep, raw = text.partition("=")
    known = {f.name for f in dataclasses.fields(ChannelConfig) if f.name != "repair"}
    known |= {f"repair_{f.name}" for f in dataclasses.fields(RepairConfig)}
    if not sep or name not in known:
        raise argparse.ArgumentTypeError(f"unknown setting {name!r} (known: {', '.join(sorted(known))})")
    if raw.lower() in ("true", "false"):
        return name, raw.lower() == "true"
    try:
        return name, int(raw)
    except ValueError:
        try:
            return name, float(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: not a number: {raw!r}") from None


def impairment_of(args: argparse.Namespace) -> dict:
    loss_in = args.loss if args.loss_in is None else args.loss_in
    loss_out = args.loss if args.loss_out is None else args.loss_out
    return {"loss_in": loss_in, "loss_out": loss_out, "delay_ms": args.delay_ms, "jitter_ms": args.jitter_ms,
            "duplicate": args.duplicate}


def load_key(args: argparse.Namespace):
    from .crypto import ChannelKey, CryptoError, key_file_is_private

    if args.key_file is not None:
        try:
            key = ChannelKey.from_file(args.key_file, args.channel)
        except CryptoError as exc:
            raise CliError(str(exc)) from None
        try:
            if not key_file_is_private(args.key_file):
                print(f"sdschat: warning: {args.key_file} is readable by others; chmod 600 it", file=sys.stderr)
        except CryptoError:
            pass
        return key
    passphrase = os.environ.get("SDSCHAT_PASSPHRASE")
    if not passphrase:
        if not sys.stdin.isatty():
            raise CliError("no key: pass --key-file, or set SDSCHAT_PASSPHRASE (no terminal to prompt on)")
        passphrase = getpass.getpass(f"passphrase for #{args.channel}: ")
    if not passphrase:
        raise CliError("empty passphrase")
    try:
        return ChannelKey.from_passphrase(args.channel, passphrase)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def default_db(name: str, key) -> Path:
    from platformdirs import user_data_dir

    folder = Path(os.environ.get("SDSCHAT_HOME") or user_data_dir("sdschat"))
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:40] or "me"
    return folder / f"{safe}-{key.topic.rsplit('/', 1)[-1][:12]}.db"


async def start_node(args: argparse.Namespace, *, channel_config=None):
    """Start a node from common CLI args, turning every expected failure into a CliError."""
    from .node import Node, NodeConfig, node_channel_config
    from .store import StoreError
    from .transport import TransportError

    key = load_key(args)
    db = args.db or default_db(args.name, key)
    try:
        db.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # private even under umask 0
    except OSError as exc:
        raise CliError(f"cannot create {db.parent}: {exc.strerror}") from None
    config = NodeConfig(
        nick=args.name, key=key, db_path=db, broker_url=args.broker, qos=args.qos,
        channel_config=channel_config or node_channel_config(**dict(getattr(args, "tune", []))),
        impairment=impairment_of(args), seed=args.seed,
    )
    try:
        return await Node.start(config)
    except TransportError as exc:
        raise CliError(str(exc)) from None
    except StoreError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot open {db}: {exc.strerror or exc}") from None


# ---------------------------------------------------------------- keygen


def _keygen_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", type=Path, help="where to write the key file (created with mode 0600)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")


def _keygen_run(args: argparse.Namespace) -> int:
    from .crypto import CryptoError, keygen

    try:
        keygen(args.path, overwrite=args.force)
    except CryptoError as exc:
        raise CliError(str(exc)) from None
    print(f"wrote a new channel key to {args.path} (mode 0600); share it only with the channel's members")
    return 0


# ---------------------------------------------------------------- broker


def _broker_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=_positive_int, default=1883)


async def _broker_run(args: argparse.Namespace) -> int:
    from .transport import TransportError, run_broker

    def ready(broker) -> None:
        print(f"sdschat broker listening on {broker.url} (Ctrl-C to stop)", flush=True)

    try:
        await run_broker(args.host, args.port, on_ready=ready)
    except TransportError as exc:
        raise CliError(str(exc)) from None
    return 0


# ---------------------------------------------------------------- bot


def _bot_configure(p: argparse.ArgumentParser) -> None:
    _add_channel_args(p)
    p.add_argument("--count", type=_positive_int, default=10, help="messages to send")
    p.add_argument("--interval", type=_non_negative, default=1.0, help="seconds between messages")
    p.add_argument("--linger", type=_non_negative, default=12.0,
                   help="after sending, exit once nothing was pending here, and no peer resent, repaired or asked "
                        "for a repair, for this many seconds (keep it above the repair backoff T_max and the longest resend interval, "
                        "both 10 s by default)")
    p.add_argument("--max-runtime", type=_non_negative, default=0.0, help="give up (exit 3) after this many seconds (0: never)")
    p.add_argument("--text", default="{name} #{i}", help="message template ({name}, {i})")
    p.add_argument("--start-after", type=_non_negative, default=0.0,
                   help="wait this many seconds after connecting before sending (lets peers subscribe first)")
    p.add_argument("--quiet", action="store_true")


async def _bot_run(args: argparse.Namespace) -> int:
    from .node import NodeFailed

    node = await start_node(args)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover
            pass
    started = time.monotonic()
    code = 0
    try:
        if not args.quiet:
            print(f"{args.name}: participant {node.participant_id[:12]} on {node.broker_url}", flush=True)
        if args.start_after:
            try:
                await asyncio.wait_for(stop.wait(), args.start_after)
            except (asyncio.TimeoutError, TimeoutError):
                pass
        for i in range(args.count):
            if stop.is_set() or node.failure:
                break
            try:
                await node.send_text(args.text.format(name=args.name, i=i))
            except NodeFailed:  # node.failure says why
                break
            try:
                await asyncio.wait_for(stop.wait(), args.interval)
            except (asyncio.TimeoutError, TimeoutError):
                pass
        quiet_since = time.monotonic()
        linger_ms = int(args.linger * 1000)
        while not stop.is_set() and node.failure is None:
            if not node.settled(linger_ms):
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= args.linger:
                break
            if args.max_runtime and time.monotonic() - started > args.max_runtime:
                summary = {k: v for k, v in node.channel.summary().items() if v and k != "lamport_timestamp"}
                summary["link"] = {k: v for k, v in vars(node.transport.counters).items() if v}
                summary["mqtt"] = {k: v for k, v in vars(node.transport.inner.stats).items() if v}
                print(f"{args.name}: gave up after {args.max_runtime:g} s with work pending: {summary}", file=sys.stderr)
                code = 3
                break
            try:
                await asyncio.wait_for(stop.wait(), 0.1)
            except (asyncio.TimeoutError, TimeoutError):
                pass
        if not args.quiet:
            h = node.health()
            print(f"{args.name}: log {h['log']} messages, sent {h['sent']}, resends {h['resends']}, "
                  f"repairs requested {h['repairs_requested']}, served {h['repairs_served']}, lost {h['lost']}",
                  flush=True)
    finally:
        await node.stop()
    if node.failure:
        raise CliError(node.failure, code=1)
    return code


# ---------------------------------------------------------------- export


def _export_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=Path, required=True, help="a participant's database file")
    p.add_argument("--events", action="store_true", help="export the event table instead of the ordered log")
    p.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl")
    p.add_argument("--out", type=Path, help="output file (default: standard output; required for parquet)")


async def _export_run(args: argparse.Namespace) -> int:
    from .export import ExportError, export

    if not args.db.exists():
        raise CliError(f"no database at {args.db}")
    if args.format == "parquet" and args.out is None:
        raise CliError("--format parquet needs --out FILE")
    try:
        n = await export(args.db, events=args.events, fmt=args.format, out=args.out)
    except ExportError as exc:
        raise CliError(str(exc)) from None
    if args.out is not None:
        print(f"wrote {n} {'events' if args.events else 'messages'} to {args.out}", file=sys.stderr)
    return 0


def registry() -> dict:
    from .pipeline.commands import (report_configure, report_run, simulate_configure, simulate_run, sweep_configure,
                                    sweep_run)
    from .storenode.commands import storenode_configure, storenode_run
    from .ui.commands import chat_configure, chat_run, demo_configure, demo_run

    return {
        "demo": (demo_configure, demo_run, "N participants side by side over an embedded broker (the main demo)"),
        "chat": (chat_configure, chat_run, "the chat UI: join a channel as NAME"),
        "keygen": (_keygen_configure, _keygen_run, "write a fresh random channel key file (mode 0600)"),
        "broker": (_broker_configure, _broker_run, "run an embedded MQTT broker"),
        "bot": (_bot_configure, _bot_run, "a headless participant that sends N messages, then lingers until settled"),
        "store": (storenode_configure, storenode_run,
                  "a key-less store node: caches every channel's envelopes so participants catch up and fill gaps"),
        "simulate": (simulate_configure, simulate_run,
                     "simulate a large group running the real engine in virtual time; writes Parquet events"),
        "report": (report_configure, report_run, "reliability report (PySpark) over simulations and/or participant databases"),
        "sweep": (sweep_configure, sweep_run, "run a grid of simulations as Spark tasks and plot the results"),
        "export": (_export_configure, _export_run, "write a database's ordered log (or events) as JSON lines or Parquet"),
    }

