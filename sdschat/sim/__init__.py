"""Discrete-event simulation of an SDS group on the real engine (``sdschat.sds``), in virtual time.

Layering (DESIGN.md): imports :mod:`sdschat.sds` only (plus numpy/pyarrow).
``simulate(SimParams(...), out_dir)`` runs one scenario and writes the node's
event schema as Parquet shards plus ``frames.parquet``, ``logs.parquet`` and
``meta.json`` (see :mod:`sdschat.sim.output`); :mod:`sdschat.sim.core`
describes the event loop and the optional worker processes.
"""

from .core import CHECK_INTERVAL_MS, Shard, SimResult, participant_ids, simulate
from .output import EVENT_SCHEMA, log_hash
from .params import SimParams, channel_config, parse_churn, parse_latency, parse_overrides
from .plan import make_plan

__all__ = [
    "CHECK_INTERVAL_MS", "EVENT_SCHEMA", "Shard", "SimParams", "SimResult", "channel_config", "log_hash",
    "make_plan", "parse_churn", "parse_latency", "parse_overrides", "participant_ids", "simulate",
]
