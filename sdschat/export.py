"""``sdschat export``: a participant database's ordered log, or its event table.

The log is every delivered message (own ones included) in local-log order
``(lamport_timestamp, message_id)``, one JSON object per line with at least
``message_id``, ``sender_id``, ``lamport_timestamp``, ``nick`` and ``text``.
Messages still waiting for dependencies are not in the log and are left out.

The output file holds decrypted history: it is created 0600 (and an existing
regular file is narrowed to 0600 before a byte is written), whatever the umask.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .node.errors import UserError
from .node.files import open_private
from .node.payload import AppPayload, PayloadError
from .store import Store, StoreError

__all__ = ["export", "ExportError", "log_records", "event_records", "open_private"]

_NOT_IN_LOG = {"waiting"}


class ExportError(UserError):
    """One-line failure of an export (a database that cannot be read, a file that cannot be written)."""


async def log_records(store: Store):
    async for row in store.iter_messages():
        if row.state in _NOT_IN_LOG:
            continue
        try:
            app = AppPayload.decode(row.content)
        except PayloadError as exc:  # sdschat stores only payloads it read (or wrote): the row was changed since
            raise ExportError(
                f"database {store.path}: the messages table is damaged (message {row.message_id[:16]}: {exc})"
            ) from None
        yield {
            "message_id": row.message_id,
            "sender_id": row.sender_id,
            "lamport_timestamp": row.lamport_timestamp,
            "nick": app.nick,
            "text": app.text,
            "kind": app.kind,
            "sent_at_ms": app.sent_at_ms,
            "reply_to": app.reply_to or None,
            "state": row.state,
            "repaired": row.repaired,
            "after_lost": list(row.after_lost),
            "received_at_ms": row.received_at_ms,
        }


async def event_records(store: Store):
    async for e in store.iter_event_history():
        yield {
            "seq": e.seq,
            "ts_ms": e.ts_ms,
            "kind": e.kind,
            "message_id": e.message_id,
            "sender_id": e.sender_id,
            "participant_id": e.participant_id,
            "lamport_timestamp": e.lamport_timestamp,
            "channel_id": e.channel_id,
            "detail": json.dumps(e.detail, separators=(",", ":")) if e.detail is not None else None,
        }


async def export(db: Path, *, events: bool = False, fmt: str = "jsonl", out: Path | None = None) -> int:
    """Write the log (or events) of ``db``; returns the number of records."""
    try:
        store = await Store.open(db, create=False)
    except StoreError as exc:
        raise ExportError(str(exc)) from None
    try:
        source = event_records(store) if events else log_records(store)
        records = [r async for r in source]
    except StoreError as exc:  # a row that does not hold what sdschat wrote (CorruptRowError, and the like)
        raise ExportError(str(exc)) from None
    finally:
        await store.close()
    if fmt == "parquet":
        if out is None:  # a binary file: never to the terminal
            raise ExportError("a parquet export needs an output file (--out)")
        import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
        import pyarrow.parquet as pq  # type: ignore[import-untyped]  # (the same package)

        if records:
            table = pa.Table.from_pylist(records)
        else:
            table = pa.table({})
        try:
            with open_private(out, "wb") as f:
                pq.write_table(table, f)
        except OSError as exc:
            raise ExportError(f"cannot write {out}: {exc.strerror or exc}") from None
        return len(records)
    try:
        stream = open_private(out) if out is not None else sys.stdout
    except OSError as exc:
        raise ExportError(f"cannot write {out}: {exc.strerror}") from None
    try:
        for r in records:
            stream.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
    finally:
        if out is not None:
            stream.close()
        else:
            stream.flush()
    return len(records)
