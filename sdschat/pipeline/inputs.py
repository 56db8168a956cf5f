"""Report inputs: simulation output directories and participant SQLite databases, staged as Parquet.

A **simulation directory** is used as it is (its ``events-*.parquet`` shards,
``logs.parquet`` for the engine's ordered-log hashes, ``frames.parquet`` for
bytes received, ``meta.json``). One written before the typed event columns
(format ``sdschat-sim/1``: every fact in ``detail``) is still read: its
:attr:`Staged.legacy` tells the report to take the facts out of ``detail``,
more slowly.

A **participant database** is read with :mod:`sqlite3` (read-only, never
migrated; a database written by a newer sdschat is refused with the store's
:class:`~sdschat.store.SchemaTooNewError` message) and its events (the view
``event_history`` from schema 3 on: the recent full rows plus the first times
compaction kept of older ones; the ``events`` table before) are
converted with pyarrow into a Parquet file in the staging directory, in chunks
(INTEGER columns as int64: Spark's SQLite JDBC path would read them as 32-bit),
with the typed columns of migration 0004 (a database of an older schema, read
as it is, gets them from the same expressions over ``detail``).
Its ``sds_log`` gives the engine's ordered log. The databases of one channel
are one source (``db:<channel id>``): the group as seen by those participants.

Every problem is an :class:`InputError` with one line.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.parquet as pq  # type: ignore[import-untyped]  # (nor does its parquet module)

from sdschat.sim import output as simout

from .metrics import SourceInfo, log_hash

__all__ = ["InputError", "Staged", "stage_inputs", "EVENT_COLUMNS"]

EVENT_COLUMNS = simout.EVENT_COLUMNS
#: simulation formats this version reads (1: before the typed columns)
_SIM_FORMATS = ("1", "2")
_SQLITE_MAGIC = b"SQLite format 3\x00"


class InputError(Exception):
    """A report input is missing, unreadable, empty or of an unknown kind (one line)."""


class Staged:
    """A source ready for Spark: its Parquet event files and what else is known about it."""

    def __init__(self, info: SourceInfo, event_files: list[Path], legacy: bool = False) -> None:
        self.info = info
        self.event_files = event_files
        #: the event files have no typed columns (simulation format 1): the facts are in ``detail``
        self.legacy = legacy

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def events(self) -> int:
        """The events in its files (read from their Parquet footers)."""
        return sum(pq.read_metadata(f).num_rows for f in self.event_files)


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == _SQLITE_MAGIC
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None


def stage_inputs(paths: list[Path], staging: Path) -> list[Staged]:
    """Check and stage every input; raises :class:`InputError` for the first bad one."""
    if not paths:
        raise InputError("no inputs given")
    seen: set[Path] = set()
    sims: list[Staged] = []
    dbs: dict[str, list[tuple[Path, str, Path | None, tuple[str, int]]]] = {}
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise InputError(f"no such file or directory: {path}")
        real = path.resolve()
        if real in seen:
            continue
        seen.add(real)
        if path.is_dir():
            sims.append(_stage_sim(path))
        elif _is_sqlite(path):
            for channel, pid, events_file, loginfo in _stage_db(path, staging):
                dbs.setdefault(channel, []).append((path, pid, events_file, loginfo))
        else:
            raise InputError(f"{path} is neither a simulation output directory nor an sdschat database")
    out = list(sims)
    names: dict[str, int] = {}
    for s in out:
        base = s.info.name
        if base in names:
            names[base] += 1
            s.info.name = f"{base}#{names[base]}"
        else:
            names[base] = 1
    for channel, members in sorted(dbs.items()):
        pids = [pid for _, pid, _, _ in members]
        dupes = {p for p in pids if pids.count(p) > 1}
        if dupes:
            raise InputError(f"two databases record participant {sorted(dupes)[0][:16]} in channel {channel[:16]}")
        info = SourceInfo(
            name=f"db:{channel[:16]}",
            kind="db",
            participants=sorted(pids),
            inputs=[str(p) for p, _, _, _ in members],
            engine_log_hashes={pid: loginfo for _, pid, _, loginfo in members},
        )
        out.append(Staged(info, [f for _, _, f, _ in members if f is not None]))
    if not any(s.event_files for s in out):
        raise InputError("the inputs hold no events")
    return out


# ------------------------------------------------------------- simulation


def _stage_sim(path: Path) -> Staged:
    meta_path = path / simout.META_FILE
    if not meta_path.is_file():
        raise InputError(f"{path} is not a simulation output directory (no {simout.META_FILE})")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if not isinstance(meta, dict) or not str(meta.get("format", "")).startswith("sdschat-sim/"):
            raise ValueError("not a simulation meta file")
        participants_n = int(meta["participants"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{meta_path} is unreadable: {exc}") from None
    version = str(meta["format"]).split("/", 1)[1]
    if version not in _SIM_FORMATS:
        raise InputError(f"{path} was written by a newer sdschat (simulation format {meta['format']})")
    columns = simout.BASE_COLUMNS if version == "1" else EVENT_COLUMNS
    shards = sorted(path.glob(simout.SHARD_GLOB))
    if not shards:
        raise InputError(f"{path} has no events (no {simout.SHARD_GLOB} files)")
    for shard in shards:
        try:
            schema = pq.read_schema(shard)
        except (OSError, pa.ArrowInvalid) as exc:
            raise InputError(f"{shard} is not readable Parquet: {exc}") from None
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise InputError(f"{shard} is not an events table (missing column {missing[0]})")
    if sum(pq.ParquetFile(s).metadata.num_rows for s in shards) == 0:
        raise InputError(f"{path} has no events")
    from sdschat.sim import participant_ids

    participants = participant_ids(participants_n)
    engine = None
    logs_path = path / simout.LOGS_FILE
    if logs_path.is_file():
        try:
            logs = pq.read_table(logs_path, columns=["participant_id", "log_hash", "log_length"]).to_pydict()
        except (OSError, pa.ArrowInvalid, KeyError) as exc:
            raise InputError(f"{logs_path} is unreadable: {exc}") from None
        engine = {p: (h, n) for p, h, n in zip(logs["participant_id"], logs["log_hash"], logs["log_length"])}
        participants = sorted(set(participants) | set(engine))
    bytes_received = frames = None
    frames_path = path / simout.FRAMES_FILE
    if frames_path.is_file():
        try:
            ft = pq.read_table(frames_path, columns=["bytes", "delivered"]).to_pydict()
        except (OSError, pa.ArrowInvalid, KeyError) as exc:
            raise InputError(f"{frames_path} is unreadable: {exc}") from None
        bytes_received = sum(b * d for b, d in zip(ft["bytes"], ft["delivered"]))
        frames = len(ft["bytes"])
    info = SourceInfo(
        name=path.resolve().name or str(path),
        kind="sim",
        participants=participants,
        inputs=[str(path)],
        engine_log_hashes=engine,
        bytes_received=bytes_received,
        frames=frames,
        meta=meta,
    )
    return Staged(info, shards, legacy=version == "1")


# --------------------------------------------------------------- database


def _connect_ro(path: Path) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.Error as exc:
        raise InputError(f"cannot open {path} as a database: {exc}") from None


def _stage_db(path: Path, staging: Path) -> list[tuple[str, str, Path | None, tuple[str, int]]]:
    """Convert one database; returns ``(channel_id, participant_id, events parquet, (log hash, length))`` per
    channel."""
    from sdschat.store import SchemaTooNewError
    from sdschat.store import migrate as store_migrate

    conn = _connect_ro(path)
    try:
        try:
            version = store_migrate.current_version(conn)
            known = store_migrate.latest_version()
            if version > known:
                raise InputError(f"{path}: {SchemaTooNewError(version, known)}")
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if version == 0 or not {"events", "channels", "sds_log"} <= tables:
                raise InputError(f"{path} is not an sdschat database")
            channels = conn.execute("SELECT channel_id, participant_id FROM channels ORDER BY channel_id").fetchall()
            if not channels:
                raise InputError(f"{path} has no channel (an sdschat database that was never used)")
            # from schema 3 on, older events may be compacted: the view gives them back as event rows
            views = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'")}
            source = "event_history" if "event_history" in views else "events"
            n_events = conn.execute(f"SELECT count(*) FROM {source}").fetchone()[0]
            if n_events == 0:
                raise InputError(f"{path} has no events")
            out = []
            staging.mkdir(parents=True, exist_ok=True)
            for channel_id, pid in channels:
                mids = [
                    r[0]
                    for r in conn.execute(
                        "SELECT message_id FROM sds_log WHERE channel_id = ? ORDER BY lamport_timestamp, message_id",
                        (channel_id,),
                    )
                ]
                target = staging / f"db-{len(list(staging.iterdir())):04d}-{path.stem}.parquet"
                rows = _copy_events(conn, channel_id, target, source)
                out.append((channel_id, pid, target if rows else None, (log_hash(mids), len(mids))))
            return out
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{path} is unreadable: {exc}") from None
    finally:
        conn.close()


#: migration 0004's typed columns as expressions over ``detail``, for a database read before that migration
_TYPED_SQL = {
    "repaired": "json_extract(detail, '$.repaired')",
    "by_bloom": "json_extract(detail, '$.by_bloom')",
    "bytes": "json_extract(detail, '$.bytes')",
    "by_id": "json_extract(detail, '$.by')",
    "frame_ts": "json_extract(detail, '$.frame_ts')",
    "missing_ids": "CASE WHEN json_type(detail, '$.missing') = 'array' THEN json_extract(detail, '$.missing') END",
    "carrier": "json_extract(detail, '$.carrier')",
}


def _typed_select(conn: sqlite3.Connection, source: str) -> str:
    """The typed columns of ``source`` (a table or view): its own, or :data:`_TYPED_SQL` where it has none."""
    have = {r[1] for r in conn.execute(f"SELECT * FROM pragma_table_xinfo('{source}')")}
    return ", ".join(
        c if c in have else f"CASE WHEN json_valid(detail) THEN {_TYPED_SQL[c]} END AS {c}"
        for c in simout.TYPED_COLUMNS
    )


def _missing_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    ids = json.loads(text)
    return [str(i) for i in ids]


def _copy_events(
    conn: sqlite3.Connection, channel_id: str, target: Path, source: str = "events", chunk: int = 100_000
) -> int:
    cur = conn.execute(
        "SELECT seq, ts_ms, kind, channel_id, message_id, sender_id, participant_id, lamport_timestamp, detail, "
        f"{_typed_select(conn, source)} "
        f"FROM {source} WHERE channel_id = ? OR channel_id IS NULL ORDER BY seq",
        (channel_id,),
    )
    missing_at = EVENT_COLUMNS.index("missing_ids")
    flags = [EVENT_COLUMNS.index("repaired"), EVENT_COLUMNS.index("by_bloom")]
    ints = [EVENT_COLUMNS.index("bytes"), EVENT_COLUMNS.index("frame_ts")]
    texts = [EVENT_COLUMNS.index("by_id"), EVENT_COLUMNS.index("carrier")]
    writer = None
    n = 0
    try:
        while True:
            rows = cur.fetchmany(chunk)
            if not rows:
                break
            cols = [list(c) for c in zip(*rows)]
            cols[missing_at] = [_missing_list(v) for v in cols[missing_at]]
            for i in flags:  # SQLite's JSON true/false are 1/0
                cols[i] = [None if v is None else bool(v) for v in cols[i]]
            for i in ints:  # a hand-edited detail could hold anything: what is not an integer is no value
                cols[i] = [v if type(v) is int else None for v in cols[i]]
            for i in texts:
                cols[i] = [v if v is None or type(v) is str else str(v) for v in cols[i]]
            table = pa.Table.from_arrays(
                [pa.array(c, f.type) for c, f in zip(cols, simout.EVENT_SCHEMA)], schema=simout.EVENT_SCHEMA
            )
            if writer is None:
                writer = pq.ParquetWriter(target, simout.EVENT_SCHEMA, compression="zstd")
            writer.write_table(table)
            n += len(rows)
    finally:
        if writer is not None:
            writer.close()
    return n
