"""The wire view's record: the last frames in and out of a node, in a ring buffer.

One :class:`WireFrame` per frame, made where the node already has the frame
decoded (the receive pipeline, the publisher), so keeping up with 1,000 frames/s
costs a few microseconds each; a view reads the ring at its own pace (it never
repaints per frame). ``outcome`` says what the node did with an incoming frame:
``delivered``, ``duplicate``, ``buffered: waits for N``, ``acked N of ours``,
``rejected: REASON`` ...; for an outgoing one, ``published`` or ``publish failed``. That is text to show;
``rejected`` holds the refusal's code (None: not refused), for what counts or filters refusals.
"""

from __future__ import annotations

import dataclasses
from collections import deque

__all__ = ["WireFrame", "WireLog", "KINDS", "frame_of"]

#: frame kinds as the view names them: the node frame's publish reason (a repair answer: ``repair ans``),
#: ``repair req`` for a content or sync frame that carries repair requests, ``store`` for a store node's reply
KINDS = ("content", "resend", "repair req", "repair ans", "sync", "ephemeral", "store")
_KIND = {"message": "content", "resend": "resend", "repair": "repair ans", "sync": "sync", "ephemeral": "ephemeral"}
#: the publish reasons whose frame is named ``repair req`` when it carries repair requests (a resend or a repair
#: answer rebroadcasts a frame: the requests it carries are old, see DESIGN.md)
_ASKING = frozenset({"message", "sync"})


@dataclasses.dataclass(frozen=True, slots=True)
class WireFrame:
    ts_ms: int
    direction: str  # "in" / "out"
    kind: str
    sender_id: str  # the SDS frame's sender ("" when the frame could not be read)
    publisher: str | None
    message_id: str
    lamport_timestamp: int | None
    history: int  # causal history entries
    bloom_fill: float | None  # share of the bloom filter's bits set
    repair: int  # repair request entries
    size: int  # bytes on the wire (the sealed envelope)
    outcome: str
    rejected: str | None = None  # the refusal's code, for a frame refused


def frame_of(
    ts_ms: int,
    direction: str,
    reason: str | None,
    source: str | None,
    msg,
    publisher: str | None,
    size: int,
    outcome: str,
    rejected: str | None = None,
) -> WireFrame:
    """The record of one frame from its decoded SDS message (``msg``: a ``wire.Message``, or None for a frame
    that could not be read); ``rejected``: the refusal's code, for a frame refused."""
    if msg is None:
        return WireFrame(
            ts_ms, direction, kind_of(reason, source), "", publisher, "", None, 0, None, 0, size, outcome, rejected
        )
    repair = len(msg.repair_request)
    return WireFrame(
        ts_ms,
        direction,
        kind_of(reason, source, repair),
        msg.sender_id,
        publisher,
        msg.message_id,
        msg.lamport_timestamp,
        len(msg.causal_history),
        bloom_fill(msg.bloom_filter),
        repair,
        size,
        outcome,
        rejected,
    )


def kind_of(reason: str | None, source: str | None, repair: int = 0) -> str:
    """The view's kind of a frame (``repair``: how many repair request entries it carries)."""
    if source == "store":
        return "store"
    if repair and reason in _ASKING:
        return "repair req"
    return _KIND.get(reason or "", reason or "?")


#: the bytes of a bloom filter whose bits are counted (a uniform sample: a bloom filter's bits are spread evenly,
#: and counting all 19 KB of a sync frame's filter would cost ~20 us a frame)
BLOOM_SAMPLE = 1024


def bloom_fill(bloom: bytes | None) -> float | None:
    """The share of the filter's bits that are set (estimated from its first ``BLOOM_SAMPLE`` bytes)."""
    if not bloom:
        return None
    sample = bloom[:BLOOM_SAMPLE]
    return int.from_bytes(sample, "little").bit_count() / (len(sample) * 8)


class WireLog:
    """The newest ``size`` frames (oldest drop out) and running totals."""

    def __init__(self, size: int = 5_000) -> None:
        self.frames: deque[WireFrame] = deque(maxlen=size)
        self.totals = {"in": 0, "out": 0, "rejected": 0}

    def add(self, frame: WireFrame) -> None:
        self.frames.append(frame)
        self.totals[frame.direction] += 1
        if frame.rejected is not None:
            self.totals["rejected"] += 1

    def rates(self, now_ms: int, window_ms: int = 5_000) -> dict[str, float]:
        """Frames per second in and out over the last ``window_ms``."""
        counts = {"in": 0, "out": 0}
        since = now_ms - window_ms
        for f in reversed(self.frames):
            if f.ts_ms < since:
                break
            counts[f.direction] += 1
        return {k: v * 1000 / window_ms for k, v in counts.items()}
