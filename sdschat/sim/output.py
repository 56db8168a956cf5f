"""What a simulation writes: the node's event schema as sharded Parquet, plus frames, logs and meta.

Output directory layout (all Parquet files are readable by pyarrow, Spark, DuckDB...):

``events-00000.parquet``, ``events-00001.parquet``, ...
    The ``events`` table of ``migrations/`` (columns ``seq, ts_ms, kind,
    channel_id, message_id, sender_id, participant_id, lamport_timestamp,
    detail`` and the typed columns of :data:`TYPED_COLUMNS`), one row per
    event exactly as :class:`sdschat.node.receive.Receiver` maps engine events
    to rows, so the pipeline reads a simulation and a participant database
    alike. The facts the report reads are typed columns, not JSON: here they
    are not repeated in ``detail``, which keeps only the rest (a resend's
    count, a delivery's ``via``/``publisher``/``after_lost``, ...; None when
    nothing is left). Each shard is sorted by ``kind`` (stable: time order
    within a kind), so a reader's filter on ``kind`` skips whole row groups by
    their statistics; string columns are dictionary-encoded. Each
    shard holds about ``shard_rows`` rows (it is written once that many are
    buffered, after the event that filled it) in row groups of
    ``row_group_rows``: the simulator never holds more than one shard in
    memory. ``seq`` is global
    across shards. Simulation-only facts go into ``detail`` (see
    :data:`DETAIL_KEYS`). ``repair_cancelled`` rows (a member's repair
    request or answer called off by the message's arrival: ``what``, ``via``,
    ``publisher``) are written as the node writes them; the node's
    ``duplicate``, ``store_query`` and ``store_answer`` rows are not (the
    simulator has no store node, and a resend reaching thousands of members
    that hold it would be thousands of rows: duplicate copies are in
    ``frames.parquet``, ``copies`` less first deliveries).
``frames.parquet``
    One row per broadcast frame: when, who published it, why (``message``,
    ``resend``, ``sync``, ``repair``), the SDS message id, its size in bytes
    and how many copies reached an online receiver.
``logs.parquet``
    One row per participant at the end: the length and SHA-256 of its ordered
    local log (:func:`log_hash`), whether it was online, and what it still had
    pending. Identical hashes mean identical logs (convergence).
``meta.json``
    Parameters (:class:`~sdschat.sim.params.SimParams`), seed, counts, virtual
    and wall time, peak memory, why the run stopped.
"""

from __future__ import annotations

import functools
import json
import os
from collections import Counter
from collections.abc import Callable
from hashlib import sha256
from itertools import compress, repeat
from operator import is_not
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.parquet as pq  # type: ignore[import-untyped]  # (nor does its parquet module)

__all__ = [
    "EVENT_SCHEMA",
    "FRAME_SCHEMA",
    "LOG_SCHEMA",
    "EVENT_COLUMNS",
    "BASE_COLUMNS",
    "TYPED_COLUMNS",
    "FORMAT",
    "FACTS",
    "ROW_WIDTH",
    "DETAIL_KEYS",
    "EventBatch",
    "EventSink",
    "log_hash",
    "write_table",
    "write_meta",
    "SHARD_GLOB",
    "META_FILE",
    "FRAMES_FILE",
    "LOGS_FILE",
]

SHARD_GLOB = "events-*.parquet"
META_FILE = "meta.json"
FRAMES_FILE = "frames.parquet"
LOGS_FILE = "logs.parquet"

#: values per buffered row (:class:`EventSink`): every column but ``seq`` and ``channel_id``
ROW_WIDTH = 7

#: the columns every events table has had (simulation format 1, and a database before migration 0004)
BASE_COLUMNS = (
    "seq",
    "ts_ms",
    "kind",
    "channel_id",
    "message_id",
    "sender_id",
    "participant_id",
    "lamport_timestamp",
    "detail",
)

#: the facts the report reads, as columns (``migrations/0004_typed_events.sql`` says what each means);
#: in a database they are generated from ``detail``, here written directly
TYPED_COLUMNS = ("repaired", "by_bloom", "bytes", "by_id", "frame_ts", "missing_ids", "carrier")

EVENT_COLUMNS = BASE_COLUMNS + TYPED_COLUMNS

#: what ``meta.json`` says (``sdschat-sim/1``: no typed columns, every fact in ``detail``)
FORMAT = "sdschat-sim/2"

#: The events table as Arrow types (SQLite INTEGER is 64-bit: int64 everywhere).
EVENT_SCHEMA = pa.schema(
    [
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("ts_ms", pa.int64(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("channel_id", pa.string()),
        pa.field("message_id", pa.string()),
        pa.field("sender_id", pa.string()),
        pa.field("participant_id", pa.string()),
        pa.field("lamport_timestamp", pa.int64()),
        pa.field("detail", pa.string()),
        pa.field("repaired", pa.bool_()),
        pa.field("by_bloom", pa.bool_()),
        pa.field("bytes", pa.int64()),
        pa.field("by_id", pa.string()),
        pa.field("frame_ts", pa.int64()),
        pa.field("missing_ids", pa.list_(pa.string())),
        pa.field("carrier", pa.string()),
    ]
)

FRAME_SCHEMA = pa.schema(
    [
        pa.field("frame", pa.int64(), nullable=False),
        pa.field("ts_ms", pa.int64(), nullable=False),
        pa.field("publisher", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("message_id", pa.string(), nullable=False),
        pa.field("bytes", pa.int64(), nullable=False),
        pa.field("copies", pa.int64(), nullable=False),
        pa.field("delivered", pa.int64(), nullable=False),
    ]
)

LOG_SCHEMA = pa.schema(
    [
        pa.field("participant_id", pa.string(), nullable=False),
        pa.field("log_length", pa.int64(), nullable=False),
        pa.field("log_hash", pa.string(), nullable=False),
        pa.field("online", pa.bool_(), nullable=False),
        pa.field("unacknowledged", pa.int64(), nullable=False),
        pa.field("waiting", pa.int64(), nullable=False),
        pa.field("missing", pa.int64(), nullable=False),
        pa.field("repair_requests", pa.int64(), nullable=False),
    ]
)

#: Facts the simulator records beyond what the node writes (the first three as typed columns).
DETAIL_KEYS = {
    "bytes": "sent, resent, sync_sent, repair_served: size of the broadcast frame",
    "by": "acked, possibly_acked: sender_id of the frame whose causal history or bloom filter gave the ack (by_id)",
    "frame_ts": "acked, possibly_acked: when that frame was created (its bloom filter is the sender's state then)",
    "publisher": "delivered (repaired): who broadcast the frame (as the node; in detail)",
}


def log_hash(message_ids) -> str:
    """SHA-256 (hex) of an ordered log: the message ids joined by newlines.

    The pipeline computes the same hash from a database's ``sds_log``
    (ordered by ``lamport_timestamp, message_id``) and from events.
    """
    return sha256("\n".join(message_ids).encode()).hexdigest()


def write_table(path: Path, table: pa.Table, row_group_rows: int = 262_144) -> None:
    """Write ``table`` as zstd Parquet, its string columns dictionary-encoded (not its numbers: unique or
    nearly so, a dictionary only costs time)."""
    tmp = path.with_name(path.name + ".tmp")
    strings = [
        f.name
        for f in table.schema
        if pa.types.is_string(f.type) or (pa.types.is_list(f.type) and pa.types.is_string(f.type.value_type))
    ]
    pq.write_table(table, tmp, row_group_size=row_group_rows, compression="zstd", use_dictionary=strings)
    os.replace(tmp, path)


class EventSink:
    """Collects event rows (without ``seq``) and writes them as Parquet shards.

    A row is ``(ts_ms, kind, message_id, sender_id, participant_id,
    lamport_timestamp, facts)``; ``channel_id`` is constant per run. ``facts``
    is None, or what :data:`FACTS` says for the row's kind (e.g. a ``sent``
    row's frame size, an ``acked`` row's ``(by_bloom, by, frame_ts)``), or
    else the ``detail`` JSON text: the typed columns and ``detail`` are made
    from it when the shard is written, not a JSON string per row. Rows are
    kept *flat*: ``rows.extend((ts_ms, kind, ...))`` appends the
    :data:`ROW_WIDTH` values of a row (or of several rows at once) to one
    list, so no per-row object survives, and a shard's columns are strided
    slices of that list (``rows[j::ROW_WIDTH]``, C-speed and sequential),
    not a transpose of a million tuples. With ``participant_names``, the
    participant column holds indices into it (turned into a dictionary column
    and cast to strings when the shard is written: much cheaper than
    converting a million Python strings). ``rows`` is cleared in place, so a
    bound ``rows.extend`` stays valid across flushes.
    """

    def __init__(
        self,
        out_dir: Path | None,
        channel_id: str,
        shard_rows: int = 1_000_000,
        row_group_rows: int = 262_144,
        *,
        prefix: str = "events-",
        seq_stride: int = 1,
        seq_offset: int = 0,
        participant_names: list[str] | None = None,
    ) -> None:
        self.participant_names = pa.array(participant_names, pa.string()) if participant_names is not None else None
        self.out_dir = out_dir
        self.channel_id = channel_id
        self.prefix = prefix
        self.seq_stride = seq_stride
        self.seq_offset = seq_offset
        self.shard_rows = max(1, shard_rows)
        #: flush once ``len(rows)`` reaches this (``shard_rows`` rows)
        self.limit = self.shard_rows * ROW_WIDTH
        self.row_group_rows = max(1, row_group_rows)
        self.rows: list = []
        self.shards: list[str] = []
        self.written = 0
        self.kind_counts: Counter = Counter()
        #: called with each flush's rows (an :class:`EventBatch`) before they are written
        self.observe: Callable[[EventBatch], None] | None = None

    def add(self, *row) -> None:
        """Append one row (convenience; the simulator extends :attr:`rows` directly)."""
        self.rows.extend(row)

    def __len__(self) -> int:
        """Rows buffered (not yet written)."""
        return len(self.rows) // ROW_WIDTH

    def maybe_flush(self) -> None:
        if len(self.rows) >= self.limit:
            self.flush()

    def flush(self) -> None:
        rows = self.rows
        if not rows:
            return
        if len(rows) % ROW_WIDTH:
            raise ValueError(f"event buffer holds {len(rows)} values, not whole rows of {ROW_WIDTH}")
        n = len(rows) // ROW_WIDTH
        cols = [rows[j::ROW_WIDTH] for j in range(ROW_WIDTH)]
        rows.clear()  # in place: bound methods of the list stay valid
        kinds = pa.array(cols[1], pa.string()).dictionary_encode()
        names = kinds.dictionary.to_pylist()
        codes = kinds.indices.to_numpy()
        sizes = np.bincount(codes, minlength=len(names)).tolist()
        self.kind_counts.update(dict(zip(names, sizes)))
        ts = pa.array(cols[0], pa.int64())
        mids = pa.array(cols[2], pa.string())
        batch = EventBatch(names, codes, ts.to_numpy(), mids)
        if self.observe is not None:
            self.observe(batch)
        if self.out_dir is not None:
            # by kind (stable: time order within a kind), so a filter on kind skips row groups: a stable sort of
            # each row's kind rank (a radix sort of small integers); every column is put in that order as it is
            # made, the sparse ones (detail, the typed facts) from the kinds that have them, each kind's rows
            # being contiguous once sorted (from ``start[k]``)
            by_name = sorted(range(len(names)), key=names.__getitem__)
            rank = np.empty(len(names), np.int16)
            rank[by_name] = np.arange(len(names))
            order = np.argsort(rank[codes], kind="stable")
            start = [0] * len(names)
            at = 0
            for k in by_name:
                start[k] = at
                at += sizes[k]
            facts = _facts_columns(batch, cols[6], order, start, sizes)
            take = pa.array(order)
            first = self.written * self.seq_stride + self.seq_offset + 1
            if self.participant_names is not None:
                participants = pa.DictionaryArray.from_arrays(
                    pa.array(cols[4], pa.int32()).take(take), self.participant_names
                ).cast(pa.string())
            else:
                participants = pa.array(cols[4], pa.string()).take(take)
            arrays = [
                pa.array(order * self.seq_stride + first),
                ts.take(take),
                pa.DictionaryArray.from_arrays(pa.array(codes[order]), kinds.dictionary).cast(pa.string()),
                pa.repeat(self.channel_id, n),
                mids.take(take),
                pa.array(cols[3], pa.string()).take(take),
                participants,
                pa.array(cols[5], pa.int64()).take(take),
            ]
            del cols, kinds, ts, mids, batch
            for name in ("detail",) + TYPED_COLUMNS:
                arrays.append(_sparse(n, facts.pop(name, []), EVENT_SCHEMA.field(name).type))
            table = pa.Table.from_arrays(arrays, schema=EVENT_SCHEMA)
            del arrays
            name = f"{self.prefix}{len(self.shards):05d}.parquet"
            write_table(self.out_dir / name, table, self.row_group_rows)
            self.shards.append(name)
        self.written += n

    def close(self) -> None:
        self.flush()


class EventBatch(NamedTuple):
    """One flush's rows as :attr:`EventSink.observe` sees them (in the order they were added)."""

    kinds: list[str]  #: the kinds present
    codes: np.ndarray  #: each row's kind, as an index into ``kinds``
    ts: np.ndarray  #: each row's ``ts_ms`` (int64)
    message_ids: pa.Array  #: each row's ``message_id`` (strings)

    def of_kind(self, kind: str) -> np.ndarray:
        """A mask of the rows of ``kind``."""
        if kind not in self.kinds:
            return np.zeros(len(self.codes), bool)
        return self.codes == self.kinds.index(kind)


#: compact JSON (one encoder: ``json.dumps`` with separators makes one a call)
_dumps = json.JSONEncoder(separators=(",", ":")).encode


def _bytes(xs):
    return {"bytes": xs}


def _resent(xs):
    return {
        "bytes": [x[0] for x in xs],
        "detail": ['{"resends":' + ("null" if x[1] is None else str(x[1])) + "}" for x in xs],
    }


def _acked(xs):
    return {"by_bloom": [x[0] for x in xs], "by_id": [x[1] for x in xs], "frame_ts": [x[2] for x in xs]}


def _possibly_acked(xs):
    return {
        "by_id": [x[1] for x in xs],
        "frame_ts": [x[2] for x in xs],
        "detail": ['{"count":' + str(x[0]) + "}" for x in xs],
    }


def _delivered(xs):
    return {"repaired": [x[0] for x in xs], "detail": [_delivered_detail(x[1], x[2], tuple(x[3])) for x in xs]}


@functools.lru_cache(maxsize=1 << 16)
def _delivered_detail(via: str | None, publisher: str | None, after_lost: tuple) -> str:
    """A ``delivered`` row's detail: how and from whom it came, after which lost ids (few distinct ones in a run,
    each made once)."""
    return _dumps({"via": via, "publisher": publisher, "after_lost": list(after_lost)})


def _missing(xs):
    return {"missing_ids": [x[0] for x in xs], "detail": [x[1] for x in xs]}


def _carrier(xs):
    return {"carrier": xs}


#: kind -> how its rows' facts values (a list of them) become typed columns and detail (column -> values)
FACTS = {
    "sent": _bytes,
    "sync_sent": _bytes,
    "repair_served": _bytes,  # the frame's size (int)
    "resent": _resent,  # (size, resends)
    "acked": _acked,  # (by_bloom, by, frame_ts)
    "possibly_acked": _possibly_acked,  # (count, by, frame_ts)
    "delivered": _delivered,  # (repaired, via, publisher, after_lost)
    "missing": _missing,  # (missing ids, the rest of detail as JSON text)
    "repair_requested": _carrier,  # the carrier frame's id
}


def _facts_columns(
    batch: EventBatch, facts: list, order: np.ndarray, start: list[int], sizes: list[int]
) -> dict[str, list]:
    """``detail`` and the :data:`TYPED_COLUMNS` of a shard, from its rows' facts (see :data:`FACTS`): for each
    column, its values as pieces, one a kind: ``(first, size, within, values)``, the kind's rows being the
    ``size`` places from ``first`` once sorted by ``order``, ``within`` None when every one of them has a value,
    else the places (from ``first``) of those that do."""
    out: dict[str, list] = {}
    has = np.fromiter(compress(range(len(facts)), map(is_not, facts, repeat(None))), np.int64)  # (most: None)
    codes = batch.codes[has]
    for k, kind in enumerate(batch.kinds):
        rows = has[codes == k]
        if not len(rows):
            continue
        first, size = start[k], sizes[k]
        # (the kind's rows, sorted, are order[first:first + size]: in their original order, so searchable)
        within = None if len(rows) == size else np.searchsorted(order[first : first + size], rows)
        xs = [facts[i] for i in rows.tolist()]
        fill = FACTS.get(kind)
        for name, values in (fill(xs) if fill is not None else {"detail": xs}).items():
            out.setdefault(name, []).append((first, size, within, values))
    return out


def _sparse(n: int, pieces: list, kind: pa.DataType) -> pa.Array:
    """A column of ``n`` values, null but for its pieces (see :func:`_facts_columns`)."""
    parts = []
    at = 0
    for first, size, within, values in sorted(pieces, key=lambda piece: piece[0]):
        if first > at:
            parts.append(pa.nulls(first - at, kind))
        part = pa.array(values, kind)
        if within is not None:
            pick = np.zeros(size, np.int64)
            pick[within] = np.arange(len(within))
            null = np.ones(size, bool)
            null[within] = False
            part = part.take(pa.array(pick, mask=null))
        parts.append(part)
        at = first + size
    if at < n:
        parts.append(pa.nulls(n - at, kind))
    return pa.concat_arrays(parts) if len(parts) > 1 else parts[0]


def write_meta(path: Path, meta: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
