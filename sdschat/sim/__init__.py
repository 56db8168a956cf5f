"""Discrete-event simulation of an SDS group on the real engine (``sdschat.sds``), in virtual time.

Layering (DESIGN.md): imports :mod:`sdschat.sds` only (plus numpy/pyarrow).
``simulate(SimParams(...), out_dir)`` runs one scenario and writes the node's
event schema as Parquet shards plus ``frames.parquet``, ``logs.parquet`` and
``meta.json`` (see :mod:`sdschat.sim.output`); :mod:`sdschat.sim.core`
says which module does what (the event loop, the network, the worker processes).
"""

from .clock import CHECK_INTERVAL_MS
from .core import Runner, simulate
from .output import EVENT_SCHEMA, log_hash
from .params import SimParams, channel_config, parse_churn, parse_latency, parse_overrides
from .plan import make_plan
from .results import SimResult
from .shard import Shard, participant_ids
from .workers import agreed, run_task

__all__ = [
    "CHECK_INTERVAL_MS",
    "EVENT_SCHEMA",
    "Runner",
    "Shard",
    "SimParams",
    "SimResult",
    "agreed",
    "channel_config",
    "log_hash",
    "make_plan",
    "parse_churn",
    "parse_latency",
    "parse_overrides",
    "participant_ids",
    "run_task",
    "simulate",
]
