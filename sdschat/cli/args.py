"""Argument helpers shared by the commands: the one-line parser, bounded numbers, channel options."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from .errors import CliError

__all__ = [
    "Parser",
    "home_dir",
    "broker_url",
    "ca_file",
    "number",
    "probability",
    "non_negative",
    "positive_int",
    "at_least",
    "positive_float",
    "parsed_by",
    "add_channel_args",
    "add_home_arg",
    "add_impairment_args",
    "tune_setting",
    "impairment_of",
    "add_spark_args",
    "spark_conf",
    "HOSTILE_MOVES",
]

#: the moves of ``bot --hostile`` and ``demo --hostile`` (sdschat.node.hostile.MOVES; not imported here, so that
#: parsing the command line stays cheap)
HOSTILE_MOVES = ("forge-acks", "reorder", "withhold", "flood")


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one :class:`CliError` line, never a usage dump."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{self.prog}: {message} (see --help)")

    def parse_args(self, args=None, namespace=None):
        """Parse, then refuse an empty ``$SDSCHAT_HOME`` when no ``--home`` overrides it (it would put the profile
        in the current folder, or silently in the platform's): the one reader of the variable says so."""
        from sdschat.profile.settings import env_home

        parsed = super().parse_args(args, namespace)
        if getattr(parsed, "home", None) is None:
            env_home()
        return parsed


def home_dir(text: str) -> Path:
    """``--home DIR``: a folder's name, never empty (``Path("")`` is the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a folder, not an empty string")
    return Path(text)


def broker_url(text: str) -> str:
    """``--broker URL``: a broker URL as ``sdschat init`` takes it (``mqtt://`` or ``mqtts://``), never empty."""
    from sdschat.transport.errors import TransportError
    from sdschat.transport.url import parse_broker_url

    if not text.strip():
        raise argparse.ArgumentTypeError(
            "needs a broker URL (mqtt://host[:port] or mqtts://host[:port]), not an empty string"
        )
    try:
        parse_broker_url(text)
    except TransportError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text.strip()


def ca_file(text: str) -> Path:
    """``--ca FILE``: a CA certificate file of this machine that exists and can be read (stored as an absolute
    path: the profile is read from any folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a CA file, not an empty string")
    path = Path(text).expanduser()
    try:
        with open(path, "rb") as f:
            f.read(1)
    except IsADirectoryError:
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a CA file") from None
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {text}: {exc.strerror or exc}") from None
    return path.resolve()


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

    parse.__name__ = f"{kind.__name__} in [{lo}, {hi}]"
    return parse


def at_least(lo: int):
    """An integer ``>= lo``."""
    return number(int, lo)


probability = number(float, 0.0, 1.0)
non_negative = number(float, 0.0)
positive_int = number(int, 0)


def positive_float(text: str) -> float:
    """A finite number ``> 0``."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0 or v != v or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return v


def parsed_by(fn: Callable[[str], object], what: str):
    """An argparse ``type`` from a parser that raises ``ValueError`` with a readable message."""

    def parse(text: str):
        try:
            return fn(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = what
    return parse


def add_channel_args(p: argparse.ArgumentParser) -> None:
    """Who, where and how: the options of every command that runs a node.

    A channel of the profile needs none but ``--channel``: name, key, broker
    and database come from the profile, and the options override them.
    """
    p.add_argument("--name", help="your nick in the channel (default: the profile's name)")
    p.add_argument("--channel", default="general", help="channel name (never sent to the broker)")
    p.add_argument(
        "--key-file",
        type=Path,
        help="channel key file (from `sdschat keygen`); without it, the "
        "profile's key of --channel, else a passphrase (SDSCHAT_PASSPHRASE or a prompt)",
    )
    add_home_arg(p)
    p.add_argument(
        "--broker",
        type=broker_url,
        help="mqtt://host:port (default: 127.0.0.1:1883 if it answers, else an embedded broker)",
    )
    p.add_argument("--db", type=Path, help="database file (default: under the user data directory)")
    p.add_argument("--qos", type=int, choices=(0, 1), default=0, help="MQTT QoS for publish and subscribe (default 0)")
    add_impairment_args(p)


def add_home_arg(p: argparse.ArgumentParser) -> None:
    """``--home DIR``: the profile's folder (accepted before or after the command)."""
    p.add_argument(
        "--home",
        type=home_dir,
        default=argparse.SUPPRESS,
        help="the profile's folder (default: $SDSCHAT_HOME, else the platform's config and data folders)",
    )


def add_impairment_args(p: argparse.ArgumentParser) -> None:
    """The dogfooding link knobs, and ``--tune`` for the protocol's settings."""
    g = p.add_argument_group("impairment (dogfooding)")
    g.add_argument("--loss", type=probability, default=0.0, help="drop probability, both directions")
    g.add_argument("--loss-in", type=probability, help="drop probability of incoming frames")
    g.add_argument("--loss-out", type=probability, help="drop probability of outgoing frames")
    g.add_argument("--delay-ms", type=non_negative, default=0.0, help="added delay per frame")
    g.add_argument("--jitter-ms", type=non_negative, default=0.0, help="random +- delay (reorders frames)")
    g.add_argument("--duplicate", type=probability, default=0.0, help="probability a frame is delivered twice")
    g.add_argument("--seed", type=int, help="seed of the impairment's randomness")
    p.add_argument(
        "--tune",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        type=tune_setting,
        help="expert: override a protocol setting of the node (a ChannelConfig field, or repair_FIELD "
        "for RepairConfig), e.g. --tune repair_t_max_ms=3000; all members should agree",
    )
    p.add_argument(
        "--events-keep",
        type=at_least(0),
        metavar="N",
        help="event rows the database keeps in full, the newest (default: the profile's [storage] "
        "events_keep, else 10000); older ones are compacted to each message's first times; 0 keeps all",
    )


def tune_setting(text: str) -> tuple[str, int | float | bool]:
    """``FIELD=VALUE`` for an engine setting, checked against the engine's config fields."""
    from sdschat.sds import ChannelConfig, RepairConfig

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
    """The node's impairment settings from the parsed options."""
    loss_in = args.loss if args.loss_in is None else args.loss_in
    loss_out = args.loss if args.loss_out is None else args.loss_out
    return {
        "loss_in": loss_in,
        "loss_out": loss_out,
        "delay_ms": args.delay_ms,
        "jitter_ms": args.jitter_ms,
        "duplicate": args.duplicate,
    }


def add_spark_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("spark")
    g.add_argument(
        "--master", default=None, help="Spark master URL (default local[*]: an embedded Spark using every core)"
    )
    # the default is sdschat.pipeline.spark.DRIVER_MEMORY (not imported: the CLI starts without the pipeline)
    g.add_argument(
        "--driver-memory",
        default=None,
        help="driver JVM heap in local mode, where it runs the executors too (default 1200m)",
    )
    g.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark configuration (repeatable); JVM options (spark.driver.extraJavaOptions, "
        "spark.executor.extraJavaOptions) are added to sdschat's own",
    )


def spark_conf(args: argparse.Namespace) -> dict[str, str]:
    """``--spark-conf KEY=VALUE`` options as a dict."""
    conf = {}
    for item in args.spark_conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--spark-conf must be KEY=VALUE, got {item!r}")
        conf[key.strip()] = value.strip()
    return conf
