"""Parameters of one simulation and the engine configuration they imply.

Everything a run depends on is in :class:`SimParams` (plus nothing else: no
clock, no global randomness), so ``meta.json`` records a run completely and
the same parameters give the same events.

Text forms used by the CLI and by sweep grids (:func:`parse_latency`,
:func:`parse_churn`, :func:`parse_overrides`) raise :class:`ValueError` with a
one-line message for bad input. Each field that ``sdschat simulate`` sets
carries its flag and help (an :class:`Option` in the field's metadata), so
its default is written once, in the field.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sdschat.sds import ChannelConfig, MessageChannel, RepairConfig
from sdschat.sds.repair import response_groups_for

__all__ = [
    "SimParams",
    "SETTLE_MODES",
    "Option",
    "OPTION",
    "command_line_fields",
    "parse_latency",
    "parse_churn",
    "parse_overrides",
    "channel_config",
    "CHANNEL_FIELDS",
    "REPAIR_FIELDS",
]

SETTLE_MODES = ("continue", "clean")
#: sync frame ids each simulated member remembers to drop a second copy (the node: 4,096). A duplicate copy
#: arrives within the latency range; at ~3 syncs a second (a group of 100,000) 256 is over a minute of them,
#: and 4,096 would be ~180 KB a member (``--set sync_dedup=4096`` to have the node's)
SYNC_DEDUP = 256

#: ChannelConfig fields that may be overridden (``--set name=value``; grid keys)
CHANNEL_FIELDS = {f.name: f for f in dataclasses.fields(ChannelConfig) if f.name != "repair"}
#: RepairConfig fields, overridden as ``repair_<name>`` (``repair_t_min_ms=2000``)
REPAIR_FIELDS = {
    f.name: f
    for f in dataclasses.fields(RepairConfig)
    if f.name not in ("enabled", "num_response_groups", "expected_participants")
}
#: settings that have their own option (``--causal-history`` ...), not ``--set``
OWN_OPTIONS = {
    "causal_history_size": "causal_history",
    "bloom_capacity": "bloom_capacity",
    "repair_enabled": "repair",
    "repair_num_response_groups": "response_groups",
    "repair_expected_participants": "response_groups",
}


# ------------------------------------------------------------- text forms


def parse_latency(text: str) -> tuple[int, int]:
    """``"LO:HI"`` (or ``"MS"``) milliseconds -> ``(lo, hi)``."""
    parts = str(text).split(":")
    try:
        if len(parts) == 1:
            lo = hi = int(parts[0])
        elif len(parts) == 2:
            lo, hi = int(parts[0]), int(parts[1])
        else:
            raise ValueError
    except ValueError:
        raise ValueError(f"latency must be LO:HI whole milliseconds, e.g. 20:200, got {text!r}") from None
    if lo < 0 or hi < lo:
        raise ValueError(f"latency must satisfy 0 <= LO <= HI, got {text!r}")
    return lo, hi


def parse_churn(text: str, name: str = "churn") -> tuple[float, int] | None:
    """``"FRACTION:MEAN_OFF_MS"`` -> ``(fraction, mean_off_ms)``; ``"0"``/``"none"`` -> None (also for
    ``store_outages``: ``name`` is what error messages call it)."""
    t = str(text).strip().lower()
    if t in ("", "0", "none", "off"):
        return None
    parts = t.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        frac, off = float(parts[0]), int(float(parts[1]))
    except ValueError:
        raise ValueError(f"{name} must be FRACTION:MEAN_OFF_MS, e.g. 0.1:30000, got {text!r}") from None
    if not 0.0 <= frac < 1.0 or off <= 0:
        raise ValueError(f"{name} needs 0 <= FRACTION < 1 and MEAN_OFF_MS > 0, got {text!r}")
    return None if frac == 0.0 else (frac, off)


def parse_overrides(items: list[str] | None) -> dict[str, str]:
    """``["name=value", ...]`` -> dict (values stay text; :func:`channel_config` types them)."""
    out: dict[str, str] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"engine setting must be NAME=VALUE, got {item!r}")
        out[name] = value.strip()
    return out


# ------------------------------------------------------------- command line


@dataclass(frozen=True)
class Option:
    """How a :class:`SimParams` field is set on ``sdschat simulate``'s command line (the field's metadata under
    :data:`OPTION`), so that the field's default, its flag and its help are written once, beside the field.

    ``help`` leaves out the default: the command adds ``(default VALUE)`` from the field's default
    (``note`` follows the value), or ``(default: default_text)`` for a field whose default is None. A number
    is checked against ``minimum``/``maximum`` (``positive``: above 0); ``parse`` turns text into the value
    (a :class:`ValueError` with a readable message for bad text); ``repeated`` makes the option repeatable and
    turns the list of its texts into the value. ``flag`` is ``--field-name`` unless given.
    """

    help: str
    group: str
    metavar: str | None = None
    note: str = ""
    default_text: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    positive: bool = False
    parse: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    repeated: Callable[[list[str]], Any] | None = None
    flag: str | None = None


#: the metadata key of a field's :class:`Option`
OPTION = "sdschat.option"

_TRAFFIC = "group and traffic"
_NETWORK = "network"
_STORES = "store nodes"
_ENGINE = "engine (defaults: the engine's RFC timings)"
_RUN = "run"


def _opt(**kw: Any) -> dict[str, Option]:
    return {OPTION: Option(**kw)}


def command_line_fields() -> list[tuple[dataclasses.Field, Option]]:
    """The :class:`SimParams` fields set on the command line, in order, each with its :class:`Option`."""
    return [(f, f.metadata[OPTION]) for f in dataclasses.fields(SimParams) if OPTION in f.metadata]


@dataclass(frozen=True)
class SimParams:
    """One scenario.

    Group and traffic: ``participants`` members, ``messages`` content messages
    sent by random members (``senders`` limits who talks: the first
    ``senders`` participants; default everyone) at ``rate`` messages per
    second in aggregate (exponential gaps), ``content_bytes`` each.

    Network (a broadcast medium): every frame one member publishes reaches
    every other member independently: dropped with probability ``loss``,
    otherwise after a latency drawn uniformly from ``latency_ms`` (inclusive,
    whole milliseconds), and with probability ``duplicate`` a second copy
    arrives after its own latency.

    Churn (``churn = (fraction, mean_off_ms)``): every member alternates
    online and offline periods with exponentially distributed lengths; an
    offline period lasts ``mean_off_ms`` on average and an online period
    ``mean_off_ms * (1 - fraction) / fraction``, so at any moment about
    ``fraction`` of the group is offline (the process starts in its steady
    state). Offline means disconnected: the engine keeps running (its resends
    and syncs go nowhere) and frames addressed to it are lost; on
    reconnecting it rebroadcasts its outgoing buffer (``resend_now``), as the
    node does.

    Phases: sending lasts until the last message; then the settle phase runs
    until the group is quiescent or ``horizon_ms`` of virtual time after the
    last send. Quiescent: at every check (each 5 s) for a quiet period of two
    sync rounds (``2 * (sync_interval_ms + sync_jitter_ms + latency max)``),
    no frame but periodic syncs was in flight and nobody had unacknowledged own
    messages, waiting messages, known gaps or pending repair requests or
    answers. (Idle alone is not settled: a member who missed the last messages
    learns they exist only from someone's next periodic sync.) ``settle="continue"`` keeps loss, duplication and
    churn during settling; ``"clean"`` makes the network lossless and brings
    everyone online for it.

    Store nodes (``stores``, default none): members of the model that keep
    every frame that reaches them (``store_loss`` per copy, the network's
    latency) and answer, as ``sdschat store`` does, queries for missing
    messages and catch-up queries for a time range; members ask as the node
    does (:mod:`sdschat.sim.stores`): 200 ms after noticing a gap, for the
    ids still missing then, once each; and on coming back online, for
    everything since they went away (less a 10 s margin), in pages of 500.
    Each request and each answer is lost with ``store_loss`` and takes a
    latency drawn from ``store_latency_ms`` (default: the network's); every
    store answers, the first answer settles the request and the frames of
    later answers to a request by id are used too (as the node does); no
    answer within 3 s is a timeout. ``store_outages = (fraction, mean_off_ms)``: stores alternate
    up and down periods as churning members do; a store that is down keeps
    nothing and answers nothing.

    Engine: the real :class:`~sdschat.sds.MessageChannel` with the engine's
    defaults (RFC timings: resend 5 s, sync 30 s + 0..10 s, T_min 30 s,
    T_max 120 s, lost after 300 s) except ``sync_dedup`` (:data:`SYNC_DEDUP`),
    ``causal_history`` (default 10, as
    the node: 2 leaves gaps nobody learns of), ``bloom_capacity``, ``repair``
    (SDS-R on/off) and ``response_groups`` (default the RFC's
    ``participants // 128 + 1``); ``overrides`` sets any other
    :class:`~sdschat.sds.ChannelConfig` field by name, or a
    :class:`~sdschat.sds.RepairConfig` field as ``repair_<name>``.
    """

    participants: int = field(default=100, metadata=_opt(help="group size", group=_TRAFFIC, metavar="N", minimum=2))
    messages: int = field(
        default=100, metadata=_opt(help="content messages to send", group=_TRAFFIC, metavar="M", minimum=0)
    )
    rate: float = field(
        default=1.0,
        metadata=_opt(
            help="aggregate send rate, messages per second, exponential gaps",
            group=_TRAFFIC,
            metavar="PER_S",
            positive=True,
        ),
    )
    senders: int | None = field(
        default=None,
        metadata=_opt(
            help="only the first K participants send; each message comes from a random online one",
            group=_TRAFFIC,
            metavar="K",
            minimum=1,
            default_text="everyone",
        ),
    )
    content_bytes: int = field(
        default=100, metadata=_opt(help="content size of each message", group=_TRAFFIC, metavar="B", minimum=1)
    )
    loss: float = field(
        default=0.0,
        metadata=_opt(
            help="probability that a copy of a frame is lost, per receiver",
            group=_NETWORK,
            metavar="P",
            minimum=0.0,
            maximum=1.0,
        ),
    )
    latency_ms: tuple[int, int] = field(
        default=(20, 200),
        metadata=_opt(
            help="latency of each copy, uniform in [LO, HI] ms", group=_NETWORK, metavar="LO:HI", parse=parse_latency
        ),
    )
    duplicate: float = field(
        default=0.0,
        metadata=_opt(
            help="probability that a delivered copy arrives twice",
            group=_NETWORK,
            metavar="P",
            minimum=0.0,
            maximum=1.0,
        ),
    )
    churn: tuple[float, int] | None = field(
        default=None,
        metadata=_opt(
            help="members alternate online/offline periods (exponential lengths): FRACTION of the group is offline at "
            "any time on average, offline periods last MEAN_OFF_MS on average; offline members get nothing and "
            "their frames go nowhere",
            group=_NETWORK,
            metavar="FRACTION:MEAN_OFF_MS",
            parse=parse_churn,
            default_text="no churn",
        ),
    )
    stores: int = field(
        default=0,
        metadata=_opt(
            help="store nodes in the model: they keep the frames that reach them and answer members as sdschat store "
            "does; members ask 200 ms after noticing a gap and catch up on coming back online, with the node's "
            "timings",
            group=_STORES,
            metavar="S",
            minimum=0,
        ),
    )
    store_loss: float = field(
        default=0.0,
        metadata=_opt(
            help="probability that a frame copy to a store, a store request or an answer is lost",
            group=_STORES,
            metavar="P",
            minimum=0.0,
            maximum=1.0,
        ),
    )
    store_latency_ms: tuple[int, int] | None = field(
        default=None,
        metadata=_opt(
            help="latency of a store request and of its answer, each",
            group=_STORES,
            metavar="LO:HI",
            parse=parse_latency,
            default_text="the network's",
        ),
    )
    store_outages: tuple[float, int] | None = field(
        default=None,
        metadata=_opt(
            help="stores go down and come back as churning members do: FRACTION of the time down, for MEAN_OFF_MS on "
            "average; a store that is down keeps nothing and answers nothing",
            group=_STORES,
            metavar="FRACTION:MEAN_OFF_MS",
            parse=functools.partial(parse_churn, name="store outages"),
        ),
    )
    causal_history: int = field(
        default=10,
        metadata=_opt(help="causal history length", group=_ENGINE, metavar="K", minimum=0, note=", as the node"),
    )
    bloom_capacity: int = field(
        default=10_000,
        metadata=_opt(
            help="bloom filter capacity", group=_ENGINE, metavar="C", minimum=1, note=": 18,752-byte filters"
        ),
    )
    repair: bool = field(default=True, metadata=_opt(help="SDS-R repair", group=_ENGINE))
    response_groups: int | None = field(
        default=None,
        metadata=_opt(
            help="SDS-R response groups",
            group=_ENGINE,
            metavar="G",
            minimum=1,
            default_text="the RFC's participants // 128 + 1",
        ),
    )
    overrides: dict[str, Any] = field(
        default_factory=dict,
        metadata=_opt(
            help="any other ChannelConfig field (e.g. sync_interval_ms=10000) or RepairConfig field as repair_NAME "
            "(e.g. repair_t_min_ms=2000); repeatable",
            group=_ENGINE,
            metavar="NAME=VALUE",
            flag="--set",
            repeated=parse_overrides,
        ),
    )
    settle: str = field(
        default="continue",
        metadata=_opt(
            help="after the last send: keep loss/duplication/churn (continue) or make the network lossless with "
            "everyone online (clean) while the group settles",
            group=_RUN,
            choices=SETTLE_MODES,
        ),
    )
    horizon_ms: int = field(
        default=600_000,
        metadata=_opt(
            help="settle for at most this long after the last send; stops earlier once quiescent",
            group=_RUN,
            metavar="MS",
            minimum=0,
        ),
    )
    seed: int = field(default=1, metadata=_opt(help="seed: same seed, same events", group=_RUN))
    channel_id: str = "sim"
    start_ms: int = 0

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------ checks

    def validate(self) -> None:
        def bad(msg: str) -> None:
            raise ValueError(msg)

        if not isinstance(self.participants, int) or self.participants < 2:
            bad(f"participants must be an integer >= 2, got {self.participants!r}")
        if not isinstance(self.messages, int) or self.messages < 0:
            bad(f"messages must be an integer >= 0, got {self.messages!r}")
        if not _finite(self.rate) or self.rate <= 0:
            bad(f"rate must be > 0 messages per second, got {self.rate!r}")
        if self.senders is not None and (
            not isinstance(self.senders, int) or not 1 <= self.senders <= self.participants
        ):
            bad(f"senders must be between 1 and participants ({self.participants}), got {self.senders!r}")
        if not isinstance(self.content_bytes, int) or not 1 <= self.content_bytes <= 1_000_000:
            bad(f"content_bytes must be between 1 and 1000000, got {self.content_bytes!r}")
        for name in ("loss", "duplicate", "store_loss"):
            v = getattr(self, name)
            if not _finite(v) or not 0.0 <= v <= 1.0:
                bad(f"{name} must be a probability between 0 and 1, got {v!r}")

        def latency(what: str, pair: tuple) -> None:
            lo, hi = pair
            if not (isinstance(lo, int) and isinstance(hi, int)) or lo < 0 or hi < lo:
                bad(f"{what} must be LO:HI milliseconds with 0 <= LO <= HI, got {lo!r}:{hi!r}")

        def on_off(pair: tuple, fraction: str, length: str) -> None:
            frac, off = pair
            if not _finite(frac) or not 0.0 <= frac < 1.0:
                bad(f"{fraction} must be in [0, 1), got {frac!r}")
            if not isinstance(off, int) or off <= 0:
                bad(f"{length} must be a positive number of milliseconds, got {off!r}")

        latency("latency", self.latency_ms)
        if self.churn is not None:
            on_off(self.churn, "churn fraction", "churn mean offline time")
        if not isinstance(self.stores, int) or isinstance(self.stores, bool) or not 0 <= self.stores <= 16:
            bad(f"stores must be between 0 and 16, got {self.stores!r}")
        if self.store_latency_ms is not None:
            latency("store latency", self.store_latency_ms)
            if self.store_latency_ms[0] < self.latency_ms[0]:
                bad(
                    f"store latency must not be below the network's minimum ({self.latency_ms[0]} ms: the "
                    f"workers' lookahead), got {self.store_latency_ms[0]}"
                )
        if self.store_outages is not None:
            on_off(self.store_outages, "store outage fraction", "store outages' mean length")
        if not isinstance(self.causal_history, int) or not 0 <= self.causal_history <= 256:
            bad(f"causal history must be between 0 and 256, got {self.causal_history!r}")
        if not isinstance(self.bloom_capacity, int) or not 1 <= self.bloom_capacity <= 10_000_000:
            bad(f"bloom capacity must be between 1 and 10000000, got {self.bloom_capacity!r}")
        if self.response_groups is not None and (not isinstance(self.response_groups, int) or self.response_groups < 1):
            bad(f"response groups must be an integer >= 1, got {self.response_groups!r}")
        if self.settle not in SETTLE_MODES:
            bad(f"settle must be one of {', '.join(SETTLE_MODES)}, got {self.settle!r}")
        if not isinstance(self.horizon_ms, int) or self.horizon_ms < 0:
            bad(f"horizon must be >= 0 milliseconds, got {self.horizon_ms!r}")
        if not isinstance(self.seed, int):
            bad(f"seed must be an integer, got {self.seed!r}")
        if not isinstance(self.channel_id, str):
            bad("channel_id must be a string")
        cfg = channel_config(self)  # unknown or ill-typed overrides fail here
        try:  # and settings the engine refuses (e.g. a bloom error rate of 2) before any run starts
            MessageChannel(self.channel_id, "p0", cfg, self.start_ms)
        except (ValueError, TypeError, ZeroDivisionError, OverflowError) as exc:
            bad(f"engine settings refused: {exc}")

    # ---------------------------------------------------------- derived

    @property
    def effective_response_groups(self) -> int:
        return self.response_groups if self.response_groups is not None else response_groups_for(self.participants)

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["latency_ms"] = list(self.latency_ms)
        d["churn"] = None if self.churn is None else list(self.churn)
        d["store_latency_ms"] = None if self.store_latency_ms is None else list(self.store_latency_ms)
        d["store_outages"] = None if self.store_outages is None else list(self.store_outages)
        d["effective_response_groups"] = self.effective_response_groups
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SimParams:
        d = dict(d)
        d.pop("effective_response_groups", None)
        d["latency_ms"] = tuple(d["latency_ms"])
        if d.get("churn") is not None:
            d["churn"] = (float(d["churn"][0]), int(d["churn"][1]))
        if d.get("store_latency_ms") is not None:
            d["store_latency_ms"] = tuple(d["store_latency_ms"])
        if d.get("store_outages") is not None:
            d["store_outages"] = (float(d["store_outages"][0]), int(d["store_outages"][1]))
        return cls(**d)

    @property
    def store_latency(self) -> tuple[int, int]:
        """A store request's or answer's latency range (the network's unless set)."""
        return self.store_latency_ms if self.store_latency_ms is not None else self.latency_ms

    def replace(self, **changes: Any) -> SimParams:
        return dataclasses.replace(self, **changes)


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# -------------------------------------------------------------- engine config


def channel_config(p: SimParams) -> ChannelConfig:
    """The :class:`ChannelConfig` every simulated participant runs."""
    chan: dict[str, Any] = {}
    rep: dict[str, Any] = {}
    for key, value in p.overrides.items():
        if key in OWN_OPTIONS:
            own = OWN_OPTIONS[key]
            raise ValueError(f"engine setting {key} has its own option: {own} (--{own.replace('_', '-')})")
        if key.startswith("repair_") and key[len("repair_") :] in REPAIR_FIELDS:
            rep[key[len("repair_") :]] = _typed(key, value, REPAIR_FIELDS[key[len("repair_") :]])
        elif key in CHANNEL_FIELDS:
            chan[key] = _typed(key, value, CHANNEL_FIELDS[key])
        else:
            known = ", ".join(
                sorted(set(CHANNEL_FIELDS) - set(OWN_OPTIONS)) + [f"repair_{k}" for k in sorted(REPAIR_FIELDS)]
            )
            raise ValueError(f"unknown engine setting {key!r} (known: {known})")
    chan.setdefault("sync_dedup", SYNC_DEDUP)
    repair = RepairConfig(enabled=p.repair, num_response_groups=p.effective_response_groups, **rep)
    try:
        return ChannelConfig(
            causal_history_size=p.causal_history, bloom_capacity=p.bloom_capacity, repair=repair, **chan
        )
    except (TypeError, ValueError) as exc:  # pragma: no cover - typed above
        raise ValueError(f"bad engine settings: {exc}") from None


def _typed(key: str, value: Any, f: dataclasses.Field) -> Any:
    """Coerce ``value`` (from TOML or ``name=value`` text) to the field's type."""
    typ = str(f.type)
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("none", "null") and "None" in typ:
            return None
        try:
            if typ.startswith("bool"):
                if text.lower() in ("true", "1", "yes", "on"):
                    return True
                if text.lower() in ("false", "0", "no", "off"):
                    return False
                raise ValueError
            if typ.startswith("int"):
                value = int(text)
            elif typ.startswith("float"):
                value = float(text)
            else:
                return text
        except ValueError:
            raise ValueError(f"engine setting {key}: expected {typ}, got {value!r}") from None
    if value is None and "None" in typ:
        return None
    if typ.startswith("bool"):
        if isinstance(value, bool):
            return value
    elif typ.startswith("int"):
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 0:
                raise ValueError(f"engine setting {key} must be >= 0, got {value}")
            return value
        if isinstance(value, float) and value.is_integer() and value >= 0:
            return int(value)
    elif typ.startswith("float"):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            if value < 0:
                raise ValueError(f"engine setting {key} must be >= 0, got {value}")
            return float(value)
    raise ValueError(f"engine setting {key}: expected {typ}, got {value!r}")
