"""SDS-R: timing and response-group functions, as @waku/sds 0.0.8 computes them, and the
:class:`RepairScheduler` that keeps one participant's requests, answers and cache.

``hash(x)`` is the first 8 bytes of SHA-256 of the UTF-8 string, read as a
big-endian unsigned 64-bit integer; ``hash(a, b)`` hashes the concatenation
``a + b``. ``T_resp`` multiplies two 64-bit values: the product is exact
(Python integers), as in @waku/sds's BigInt arithmetic — wrapping at 2**64
would disagree with every other implementation.
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict
from hashlib import sha256
from typing import Any, Protocol

from .config import PARTICIPANTS_PER_RESPONSE_GROUP, ChannelConfig, RepairConfig, response_groups_for
from .events import Event, Evicted, Outgoing, RepairScheduled, RepairServed
from .state import CacheRow, ChannelState, JournalOp, RequestRow
from .wire import HistoryEntry, encode_frame

__all__ = [
    "PARTICIPANTS_PER_RESPONSE_GROUP",
    "hash64",
    "t_req",
    "t_resp",
    "in_response_group",
    "response_groups_for",
    "RepairScheduler",
]


def hash64(text: str) -> int:
    return int.from_bytes(sha256(text.encode("utf-8")).digest()[:8], "big")


def t_req_offset(participant_id: str, message_id: str, t_min_ms: int, t_max_ms: int) -> int:
    span = t_max_ms - t_min_ms
    if span <= 0:
        return t_min_ms
    return hash64(participant_id + message_id) % span + t_min_ms


def t_req(participant_id: str, message_id: str, now_ms: int, t_min_ms: int, t_max_ms: int) -> int:
    """When ``participant_id`` should request a repair of ``message_id`` detected missing at ``now_ms``."""
    return now_ms + t_req_offset(participant_id, message_id, t_min_ms, t_max_ms)


def t_resp_offset(participant_id: str, sender_id: str, message_id: str, t_max_ms: int) -> int:
    if t_max_ms <= 0:
        return 0
    distance = hash64(participant_id) ^ hash64(sender_id)
    return (distance * hash64(message_id)) % t_max_ms


def t_resp(participant_id: str, sender_id: str, message_id: str, now_ms: int, t_max_ms: int) -> int:
    """When ``participant_id`` should answer a repair request for ``sender_id``'s ``message_id``.

    The original sender's distance is 0, so it answers at once.
    """
    return now_ms + t_resp_offset(participant_id, sender_id, message_id, t_max_ms)


def in_response_group(participant_id: str, sender_id: str | None, message_id: str, num_response_groups: int) -> bool:
    """Whether ``participant_id`` may answer repair requests for this message.

    Without a ``sender_id`` the group cannot be known: not eligible (as @waku/sds).
    """
    if not sender_id:
        return False
    if num_response_groups <= 1:
        return True
    return (hash64(participant_id + message_id) % num_response_groups) == (
        hash64(sender_id + message_id) % num_response_groups
    )


class FrameView(Protocol):
    """What the scheduler reads of a received :class:`~sdschat.sds.frame.Frame` (which imports this module, so
    it is named by what it offers)."""

    @property
    def message_id(self) -> str: ...

    @property
    def sender_id(self) -> str: ...

    @property
    def repair(self) -> tuple[tuple[str, str], ...]: ...

    @property
    def responders(self) -> frozenset[str] | None: ...

    def sender_hash(self) -> int: ...


class RepairScheduler:
    """Our pending repair requests and answers (timers in heaps, stale entries skipped) and the cache we answer from.

    ``requests`` (id -> ``[t_req, entry, attempts]``) and ``responses`` (id -> T_resp) are shared by
    reference with the channel's receive path (cancel before dedup).
    """

    __slots__ = (
        "requests",
        "req_heap",
        "responses",
        "resp_heap",
        "cache",
        "groups",
        "config",
        "stats",
        "journal",
        "channel_id",
        "participant_id",
        "requests_received",
    )

    def __init__(self, config: ChannelConfig, channel_id: str, participant_id: str, stats: dict[str, int]) -> None:
        # id -> [t_req, entry, attempts]: a mutable record of an int, a HistoryEntry and an int
        self.requests: dict[str, list[Any]] = {}
        self.req_heap: list[tuple[int, str]] = []
        self.responses: dict[str, int] = {}
        self.resp_heap: list[tuple[int, str]] = []
        self.cache: OrderedDict[str, CacheRow] = OrderedDict()
        self.groups = config.repair.response_groups
        self.config = config.repair
        self.stats = stats
        self.journal: list[JournalOp] | None = None
        self.channel_id = channel_id
        self.participant_id = participant_id
        self.requests_received = 0  # entries of others' requests (a native int: see MessageChannel.stats)

    def reconfigure(self, config: RepairConfig) -> None:
        """New settings for what is scheduled from now on (:meth:`MessageChannel.set_repair_config`): the timers
        and heaps keep what they hold."""
        self.config = config
        self.groups = config.response_groups

    # --------------------------------------------------------------- requests

    def request_live(self, t: int, mid: str) -> bool:
        return self.requests.get(mid, (None,))[0] == t

    def request_due(self, now_ms: int) -> bool:
        """Whether a live request is due (stale heap tops are dropped on the way)."""
        heap = self.req_heap
        while heap and not self.request_live(*heap[0]):
            heapq.heappop(heap)  # stale: answered, cancelled or re-scheduled
        return bool(self.config.enabled and heap and heap[0][0] <= now_ms)

    def due_requests(self, now_ms: int) -> list[HistoryEntry]:
        """Pop up to ``max_requests`` due requests (lowest T_req first) and re-schedule them."""
        cfg = self.config
        heap = self.req_heap
        if not cfg.enabled or not heap or heap[0][0] > now_ms:
            return []
        chosen: list[str] = []
        requests = self.requests
        while heap and heap[0][0] <= now_ms and len(chosen) < cfg.max_requests:
            t, mid = heapq.heappop(heap)
            rec = requests.get(mid)
            if rec is None or rec[0] != t or mid in chosen:
                continue
            chosen.append(mid)
        entries = []
        for mid in chosen:
            rec = requests[mid]
            rec[2] += 1
            self.schedule(mid, rec, now_ms)
            entries.append(rec[1])
        self.stats["repairs_requested"] += len(entries)
        return entries

    def t_min(self) -> int:
        """T_min for a request scheduled now: the configured one, grown with the gap (``t_min_growth``)."""
        cfg = self.config
        if cfg.t_min_growth <= 0.0 or len(self.requests) <= 1:
            return cfg.t_min_ms
        grown = int(cfg.t_min_ms * (1.0 + cfg.t_min_growth * math.log2(len(self.requests))))
        return min(grown, cfg.t_max_ms - (cfg.t_max_ms - cfg.t_min_ms) // 4)  # (a quarter of the window stays)

    def schedule(self, mid: str, rec: list[Any], now_ms: int) -> None:
        cfg = self.config
        key = mid if rec[2] == 0 else f"{mid}#{rec[2]}"
        rec[0] = t_req(self.participant_id, key, now_ms, self.t_min(), cfg.t_max_ms)
        heapq.heappush(self.req_heap, (rec[0], mid))
        if self.journal is not None:
            self.journal.append(("req", mid, RequestRow(rec[1], rec[0], rec[2])))

    def add_request(self, entry: HistoryEntry, now_ms: int, events: list[Event]) -> None:
        cfg = self.config
        mid = entry.message_id
        requests = self.requests
        if not cfg.enabled or mid in requests:
            return
        if len(requests) >= cfg.buffer_size:
            # evict the entry due furthest in the future
            far = max(requests, key=lambda k: requests[k][0])
            if requests[far][0] <= t_req(self.participant_id, mid, now_ms, self.t_min(), cfg.t_max_ms):
                return
            self.drop_request(far)
            self.stats["evicted"] += 1
            events.append(Evicted("repair_requests", far))
        rec = [0, entry, 0]
        requests[mid] = rec
        self.schedule(mid, rec, now_ms)

    def drop_request(self, mid: str) -> None:
        if self.requests.pop(mid, None) is not None and self.journal is not None:
            self.journal.append(("req-", mid, None))

    # ---------------------------------------------------------------- answers

    def response_live(self, t: int, mid: str) -> bool:
        return self.responses.get(mid) == t

    def drop_response(self, mid: str) -> None:
        if self.responses.pop(mid, None) is not None and self.journal is not None:
            self.journal.append(("resp-", mid, None))

    def on_requests(self, f: FrameView, sender: str, now_ms: int, events: list[Event]) -> None:
        """The repair requests of a frame not seen before: back off our own, schedule our answers."""
        cfg = self.config
        if not cfg.enabled:
            return
        self.requests_received += len(f.repair)  # one count per entry
        requests = self.requests
        cache = self.cache
        responses = self.responses
        pid = self.participant_id
        for rid, rsender in f.repair:
            if requests:
                rec = requests.get(rid)
                if rec is not None:
                    # someone else asked: back off afresh, but keep asking until it arrives
                    rec[2] += 1
                    self.schedule(rid, rec, now_ms)
            cached = cache.get(rid)
            if cached is None or rid in responses:
                continue
            origin = cached.sender_id or rsender
            if not in_response_group(pid, origin, rid, self.groups):
                continue
            t = t_resp(pid, origin, rid, now_ms, cfg.t_max_ms)
            if len(responses) >= cfg.buffer_size:
                # full: keep the answers due soonest
                far = max(responses, key=responses.__getitem__)
                if responses[far] <= t:
                    continue
                self.drop_response(far)
                self.stats["evicted"] += 1
                events.append(Evicted("repair_responses", far))
            responses[rid] = t
            heapq.heappush(self.resp_heap, (t, rid))
            if self.journal is not None:
                self.journal.append(("resp", rid, t))
            events.append(RepairScheduled(rid, sender, t))

    def serve_due(self, now_ms: int, events: list[Event]) -> None:
        """Rebroadcast the cached messages whose answer is due."""
        heap = self.resp_heap
        while heap and heap[0][0] <= now_ms:
            t, mid = heapq.heappop(heap)
            if not self.response_live(t, mid):
                continue
            self.drop_response(mid)
            row = self.cache.get(mid)
            if row is None:
                continue
            self.stats["repairs_served"] += 1
            data = encode_frame(
                self.channel_id, row.sender_id, mid, row.lamport_timestamp, row.causal_history, row.content
            )
            events.append(Outgoing(data, mid, "repair", row.lamport_timestamp))
            events.append(RepairServed(mid, row.sender_id))

    # ------------------------------------------------------------------ cache

    def in_sender_group(self, f: FrameView) -> bool:
        """``in_response_group(self, f.sender_id, f.message_id, groups)``, the sender's hash read once per frame
        (the whole group, when the frame knows it: ``Frame.responders``)."""
        groups = self.groups
        if not f.sender_id:
            return False
        if groups <= 1:
            return True
        known = f.responders
        if known is not None:
            return self.participant_id in known
        return hash64(self.participant_id + f.message_id) % groups == f.sender_hash() % groups

    def cache_put(self, row: CacheRow) -> None:
        cache = self.cache
        cache[row.message_id] = row
        if self.journal is not None:
            self.journal.append(("cache", row.message_id, row))
        if len(cache) > self.config.cache_size:
            old, _ = cache.popitem(last=False)
            if self.journal is not None:
                self.journal.append(("cache-", old, None))

    def cache_drop(self, mid: str) -> bool:
        """Forget a cached message (it is no longer rebroadcast from here); whether it was cached."""
        if self.cache.pop(mid, None) is None:
            return False
        if self.journal is not None:
            self.journal.append(("cache-", mid, None))
        return True

    # ------------------------------------------------------------ persistence

    def rows(self) -> tuple[list[RequestRow], list[tuple[str, int]], list[CacheRow]]:
        return (
            [RequestRow(rec[1], rec[0], rec[2]) for rec in self.requests.values()],
            list(self.responses.items()),
            list(self.cache.values()),
        )

    def load(self, state: ChannelState) -> None:
        for r in state.repair_requests:
            self.requests[r.entry.message_id] = [r.t_req, r.entry, r.attempts]
            heapq.heappush(self.req_heap, (r.t_req, r.entry.message_id))
        for mid, t in state.repair_responses:
            self.responses[mid] = t
            heapq.heappush(self.resp_heap, (t, mid))
        for row in state.cache:
            self.cache[row.message_id] = row
