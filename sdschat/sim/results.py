"""A run's results: the shards' parts merged into ``frames.parquet``, ``logs.parquet``, ``meta.json``
and the :class:`SimResult`."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import output
from .params import SimParams, channel_config
from .plan import Plan
from .shard import participant_ids
from .stats import percentiles

__all__ = ["SimResult", "merge"]


@dataclass
class SimResult:
    """What :func:`~sdschat.sim.simulate` returns (``meta`` is also ``meta.json``)."""

    params: SimParams
    meta: dict[str, Any]
    log_hashes: list[str] = field(default_factory=list)
    out_dir: Path | None = None

    @property
    def converged(self) -> bool:
        return len(set(self.log_hashes)) <= 1


def merge(
    p: SimParams,
    plan: Plan,
    parts: list[dict],
    out: Path | None,
    workers: int,
    stop_reason: str,
    stop_t: int,
    windows: int,
    wall: float,
) -> SimResult:
    """The shards' parts (:meth:`~sdschat.sim.shard.Shard.finish`) as one result, written to ``out`` if given."""
    pids = participant_ids(p.participants)
    logs = sorted(x for part in parts for x in part["logs"])
    hashes = [x[2] for x in logs]
    frames = _frames(parts, pids)
    meta = {
        **_run_meta(p, plan, parts, workers, stop_reason, stop_t, windows, wall),
        **_traffic_meta(p, parts, frames, hashes),
        "latency": _latency_meta(parts),
    }
    rows = meta["events"]
    meta["events_per_s"] = round(rows / wall, 1) if wall > 0 else None
    if out is not None:
        _write(out, frames, logs, pids, meta)
    return SimResult(p, meta, hashes, out)


def _frames(parts: list[dict], pids: list[str]) -> list[tuple]:
    """Rows of ``frames.parquet``: every published frame in publishing order, with its copies and deliveries."""
    recv: dict[tuple[int, int], list[int]] = {}
    for part in parts:
        for k, (copies, delivered) in part["frame_recv"].items():
            acc = recv.setdefault(k, [0, 0])
            acc[0] += copies
            acc[1] += delivered
    published = sorted((f[2], f[0], f[1], f[3], f[4], f[5]) for part in parts for f in part["frames_published"])
    frames = []
    for no, (t, r, c, reason, mid, size) in enumerate(published):
        copies, delivered = recv.get((r, c), (0, 0))
        frames.append((no, t, pids[r], reason, mid, size, copies, delivered))
    return frames


def _latency_meta(parts: list[dict]) -> dict[str, dict[str, Any]]:
    """Both latencies over every member (n, p50, p95, p99, min, max, mean ms), as the report computes them."""
    out = {}
    for metric in ("send_to_shown", "send_to_deliver"):
        hist: Counter = Counter()
        for part in parts:
            hist.update(part["latency"][metric])
        out[metric] = percentiles(hist)
        if out[metric]["mean"] is not None:
            out[metric]["mean"] = round(out[metric]["mean"], 1)
    return out


def _total(parts: list[dict], key: str) -> Counter:
    acc: Counter = Counter()
    for part in parts:
        acc.update(part[key])
    return acc


def _run_meta(
    p: SimParams, plan: Plan, parts: list[dict], workers: int, stop_reason: str, stop_t: int, windows: int, wall: float
) -> dict[str, Any]:
    """The run: parameters, phases, when and why it stopped, what it cost, what it wrote."""
    config = channel_config(p)
    kinds = dict(sorted(_total(parts, "kind_counts").items()))
    return {
        "format": output.FORMAT,
        "params": p.to_json(),
        "seed": p.seed,
        "workers": workers,
        "engine_config": json.loads(json.dumps(dataclasses.asdict(config), default=str)),
        "participants": p.participants,
        "messages_sent": kinds.get("sent", 0),
        "virtual_start_ms": p.start_ms,
        "settle_start_ms": plan.settle_ms,
        "virtual_end_ms": stop_t,
        "stop_reason": stop_reason,
        "windows": windows,
        "worker_busy_s": [part["busy_s"] for part in parts],
        "worker_cpu_s": [part["cpu_s"] for part in parts],
        # whether a worker's Python arenas were on huge pages (one worker runs in the caller's process: never)
        "worker_huge_pages": [part.get("huge_pages", "off (in the calling process)") for part in parts],
        "worker_wait_s": [part["wait_s"] for part in parts],
        "wall_time_s": round(wall, 3),
        "peak_rss_mb": round(max(part["peak_rss_kb"] for part in parts) / 1024, 1),
        "peak_rss_mb_total": round(sum(part["peak_rss_kb"] for part in parts) / 1024, 1),
        "events": sum(part["rows"] for part in parts),
        "event_kinds": kinds,
        "event_shards": sorted(s for part in parts for s in part["shards"]),
    }


def _traffic_meta(p: SimParams, parts: list[dict], frames: list[tuple], hashes: list[str]) -> dict[str, Any]:
    """The traffic: frames and bytes, counts, delivery ratio and convergence."""
    kinds = _total(parts, "kind_counts")
    frame_count = _total(parts, "frame_count")
    frame_bytes = _total(parts, "frame_bytes")
    counts = _total(parts, "counts")
    counts["copies_in_flight_at_end"] = sum(part["copies_in_flight"] for part in parts)
    hash_counts = Counter(hashes)
    delivered = kinds.get("delivered", 0)
    sent = kinds.get("sent", 0)
    expected = sent * (p.participants - 1)
    bytes_published = sum(frame_bytes.values())
    bytes_received = sum(f[5] * f[7] for f in frames)
    return {
        "frames": dict(sorted(frame_count.items())),
        "frame_bytes": dict(sorted(frame_bytes.items())),
        "bytes_published": bytes_published,
        "bytes_received": bytes_received,
        "counts": dict(sorted(counts.items())),
        "engine_stats": dict(sorted(_total(parts, "engine_stats").items())),
        "delivery_ratio": (delivered / expected) if expected else None,
        "bytes_received_per_delivery": (bytes_received / delivered) if delivered else None,
        "bytes_published_per_message": (bytes_published / sent) if sent else None,
        "converged": len(hash_counts) <= 1,
        "distinct_logs": len(hash_counts),
        "largest_agreeing": hash_counts.most_common(1)[0][1] if hash_counts else 0,
    }


def _write(out: Path, frames: list[tuple], logs: list[tuple], pids: list[str], meta: dict[str, Any]) -> None:
    import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information

    cols = list(zip(*frames)) if frames else [() for _ in output.FRAME_SCHEMA.names]
    output.write_table(
        out / output.FRAMES_FILE,
        pa.Table.from_arrays(
            [pa.array(col, f.type) for col, f in zip(cols, output.FRAME_SCHEMA)], schema=output.FRAME_SCHEMA
        ),
    )
    lcols = list(zip(*logs)) if logs else [() for _ in range(8)]
    output.write_table(
        out / output.LOGS_FILE,
        pa.Table.from_arrays(
            [pa.array([pids[r] for r in lcols[0]], pa.string())]
            + [pa.array(col, f.type) for col, f in zip(lcols[1:], list(output.LOG_SCHEMA)[1:])],
            schema=output.LOG_SCHEMA,
        ),
    )
    output.write_meta(out / output.META_FILE, meta)
