"""PNG plots for the report and the sweep (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

__all__ = ["load", "latency_cdfs", "participant_delivery", "message_delivery", "backlog", "sweep_plot"]


def load():
    """matplotlib's pyplot on the Agg backend (the first import takes about half a second)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


_TITLES = {
    "send_to_shown": "send → shown (first copy)",
    "send_to_deliver": "send → delivered in order",
    "send_to_ack": "send → ack (at the sender)",
    "repair": "gap noticed → repaired",
}


def latency_cdfs(latency_hist: list[dict], path: Path) -> Path:
    """One panel per latency metric, one CDF curve per source (x: seconds, log scale)."""
    from .metrics import LATENCY_METRICS, cdf_points

    plt = load()
    fig, axes = plt.subplots(1, len(LATENCY_METRICS), figsize=(5 * len(LATENCY_METRICS), 4), squeeze=False)
    by: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for r in latency_hist:
        by[(r["metric"], r["source"])].append((r["latency_ms"], r["n"]))
    for ax, metric in zip(axes[0], LATENCY_METRICS):
        drawn = False
        for (m, source), hist in sorted(by.items()):
            if m != metric:
                continue
            xs, ys = cdf_points(hist)
            ax.step([max(x, 1) / 1000 for x in xs], ys, where="post", label=source)
            drawn = True
        ax.set_title(_TITLES[metric])
        ax.set_xlabel("seconds")
        ax.set_ylabel("fraction ≤ x")
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
        if drawn:
            from matplotlib.ticker import NullFormatter

            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.legend(fontsize=7, loc="lower right")
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    return _save(plt, fig, path)


def participant_delivery(participants: list[dict], path: Path) -> Path:
    """Per-participant delivery ratio, participants sorted from worst to best, one curve per source."""
    plt = load()
    fig, ax = plt.subplots(figsize=(7, 4))
    by: dict[str, list[float]] = defaultdict(list)
    for r in participants:
        if r["delivery_ratio"] is not None:
            by[r["source"]].append(r["delivery_ratio"])
    for source, ratios in sorted(by.items()):
        ratios.sort()
        n = len(ratios)
        xs = [(i + 0.5) / n for i in range(n)]
        ax.plot(xs, ratios, drawstyle="steps-mid", label=f"{source} ({n})")
    ax.set_xlabel("participants (fraction, worst first)")
    ax.set_ylabel("delivery ratio")
    ax.set_title("per-participant delivery")
    lo = min((min(v) for v in by.values()), default=0.0)
    ax.set_ylim(max(0.0, lo - 0.02), 1.005)
    ax.grid(True, alpha=0.3)
    if by:
        ax.legend(fontsize=7)
    return _save(plt, fig, path)


def message_delivery(messages: list[dict], path: Path) -> Path:
    """Per-message delivery ratio in send order, one series per source."""
    plt = load()
    fig, ax = plt.subplots(figsize=(7, 4))
    by: dict[str, list[float]] = defaultdict(list)
    for r in messages:
        if r["delivery_ratio"] is not None:
            by[r["source"]].append(r["delivery_ratio"])
    for source, ratios in sorted(by.items()):
        ax.plot(range(len(ratios)), ratios, ".", markersize=3, label=source)
    ax.set_xlabel("message (send order)")
    ax.set_ylabel("delivery ratio")
    ax.set_title("per-message delivery")
    ax.grid(True, alpha=0.3)
    if by:
        ax.legend(fontsize=7)
    return _save(plt, fig, path)


def backlog(rows: list[dict], path: Path) -> Path:
    """Messages waiting and gaps open over time (seconds from each source's first event), one line per source."""
    plt = load()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), squeeze=False)
    by: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by[r["source"]].append(r)
    for ax, key, title in (
        (axes[0][0], "waiting", "messages shown, waiting for causal order"),
        (axes[0][1], "gaps_open", "gaps open (missing, not yet repaired or lost)"),
    ):
        for source, series in sorted(by.items()):
            series = sorted(series, key=lambda r: r["t_ms"])
            ax.step([r["t_ms"] / 1000 for r in series], [r[key] for r in series], where="post", label=source)
        ax.set_title(title)
        ax.set_xlabel("seconds from the first event")
        ax.set_ylabel("(participant, message) pairs")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        if by:
            ax.legend(fontsize=7)
    return _save(plt, fig, path)


def sweep_plot(rows: list[dict], y: str, ylabel: str, path: Path, *, logy: bool = False) -> Path:
    """``y`` against loss: one line per (group size, SDS-R on/off, variant); colour = size, SDS-R off dashed,
    marker = variant (the grid's other dimensions). With one group size, colour = variant too.

    ``rows``: aggregated sweep results with ``loss``, ``participants``, ``repair`` and ``y``
    (other grid dimensions are averaged over by the caller or shown as separate lines).
    """
    plt = load()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    groups: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for r in rows:
        if r.get(y) is None:
            continue
        key = (r["participants"], bool(r["repair"]), r.get("variant", ""))
        groups[key].append((r["loss"], r[y]))
    sizes = sorted({k[0] for k in groups})
    variants = sorted({k[2] for k in groups})
    markers = "os^Dvx*P"
    cmap = plt.get_cmap("viridis")
    by_variant = len(sizes) == 1 and len(variants) > 1
    for (n, repair, variant), pts in sorted(groups.items()):
        pts.sort()
        if by_variant:
            color = plt.get_cmap("tab10")(variants.index(variant) % 10)
        else:
            color = cmap(sizes.index(n) / max(1, len(sizes) - 1) * 0.85)
        label = f"n={n}, SDS-R {'on' if repair else 'off'}" + (f", {variant}" if variant else "")
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            marker=markers[variants.index(variant) % len(markers)],
            linestyle="-" if repair else "--",
            color=color,
            label=label,
        )
    ax.set_xlabel("loss probability")
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    if groups:
        ax.legend(fontsize=7)
    return _save(plt, fig, path)
