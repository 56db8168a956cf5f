"""Exact percentiles of latency histograms: the simulator's run summary and the report use the same."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["QUANTILES", "percentiles"]

QUANTILES = (50, 95, 99)


def percentiles(hist: Iterable[tuple[int, int]] | Mapping[int, int], qs: Iterable[float] = QUANTILES) -> dict[str, Any]:
    """Exact nearest-rank percentiles of a histogram ``{value: count}`` (or ``(value, count)`` pairs).

    Returns ``{"n": ..., "p50": ..., "p95": ..., "p99": ..., "min": ..., "max": ..., "mean": ...}``;
    values are None for an empty histogram. The p-th percentile is the smallest
    value v with at least ``ceil(p/100 * n)`` samples <= v.
    """
    items = sorted(hist.items() if isinstance(hist, Mapping) else hist)
    items = [(v, c) for v, c in items if c > 0]
    n = sum(c for _, c in items)
    out: dict[str, Any] = {"n": n}
    if n == 0:
        for q in qs:
            out[f"p{q:g}"] = None
        out.update(min=None, max=None, mean=None)
        return out
    for q in qs:
        rank = max(1, math.ceil(q / 100.0 * n))
        acc = 0
        for v, c in items:
            acc += c
            if acc >= rank:
                out[f"p{q:g}"] = v
                break
    out["min"] = items[0][0]
    out["max"] = items[-1][0]
    out["mean"] = sum(v * c for v, c in items) / n
    return out
