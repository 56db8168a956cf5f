"""Readers of a node's SQLite database, opened read-only after (or while) a process wrote it, so what a run reports
is what a user's files hold:

* accepted  = the sender's own rows in its `messages` table (committed before publishing);
* log       = the `messages` rows not waiting for dependencies, in local-log order (lamport_timestamp, message_id),
  as `sdschat export` prints them;
* events    = the append-only `events` table ('sent', 'delivered', 'resent', 'repair_served', 'lost', ...).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

from kit.bots import FAST_CONFIG


def connect_ro(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)


def own_accepted(db: Path) -> set[str]:
    """Own messages committed to the database (accepted): sender = the database's participant."""
    if not Path(db).exists():
        return set()
    try:
        con = connect_ro(db)
    except sqlite3.Error:
        return set()
    try:
        row = con.execute("SELECT participant_id FROM channels").fetchone()
        if row is None:
            return set()
        return {r[0] for r in con.execute("SELECT message_id FROM messages WHERE sender_id = ?", (row[0],))}
    except sqlite3.Error:  # still being created
        return set()
    finally:
        con.close()


def participant_of(db: Path) -> str | None:
    con = connect_ro(db)
    try:
        row = con.execute("SELECT participant_id FROM channels").fetchone()
        return row[0] if row else None
    finally:
        con.close()


def log_of(db: Path) -> list[str]:
    """The ordered log as `sdschat export` gives it: delivered messages by (lamport, id)."""
    con = connect_ro(db)
    try:
        return [
            r[0]
            for r in con.execute(
                "SELECT message_id FROM messages WHERE state != 'waiting' ORDER BY lamport_timestamp, message_id"
            )
        ]
    finally:
        con.close()


def waiting_of(db: Path) -> list[str]:
    con = connect_ro(db)
    try:
        return [r[0] for r in con.execute("SELECT message_id FROM messages WHERE state = 'waiting'")]
    finally:
        con.close()


def event_counts(db: Path) -> Counter:
    con = connect_ro(db)
    try:
        return Counter(dict(con.execute("SELECT kind, COUNT(*) FROM events GROUP BY kind").fetchall()))
    finally:
        con.close()


def events_of(db: Path, kind: str) -> list[tuple[str, int, dict | None]]:
    con = connect_ro(db)
    try:
        return [
            (m, ts, json.loads(d) if d else None)
            for m, ts, d in con.execute(
                "SELECT message_id, ts_ms, detail FROM events WHERE kind = ? ORDER BY seq", (kind,)
            )
        ]
    finally:
        con.close()


def repaired_count(db: Path) -> int:
    """Messages of others that reached this database by a resend or an SDS-R repair after a gap."""
    con = connect_ro(db)
    try:
        return con.execute("SELECT COUNT(*) FROM messages WHERE repaired = 1").fetchone()[0]
    finally:
        con.close()


def integrity(db: Path) -> str:
    con = sqlite3.connect(db, timeout=10)
    try:
        return "\n".join(r[0] for r in con.execute("PRAGMA integrity_check"))
    finally:
        con.close()


def db_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in Path(db).parent.glob(Path(db).name + "*") if p.is_file())


async def _engine_check_async(db: Path, tune: dict) -> tuple[str, list[str], int]:
    from sdschat.node import node_channel_config
    from sdschat.sds import MessageChannel
    from sdschat.store import Store

    store = await Store.open(db, create=False)
    try:
        check = await store.integrity_check()
        ids = await store.channel_ids()
        problems: list[str] = []
        logged = 0
        for cid in ids:
            state = await store.load_state(cid)
            if state is None:
                problems.append(f"channel {cid} has no state")
                continue
            channel = MessageChannel.restore(state, node_channel_config(**tune))
            problems += channel.check_invariants()
            logged += channel.log_size()
        return check, problems, logged
    finally:
        await store.close()


def engine_check(db: Path, tune: dict | None = None) -> tuple[str, list[str], int]:
    """(PRAGMA integrity_check, MessageChannel.check_invariants() of the restored engine, log length).

    Uses the store API as the node does at start (Store.open migrates, so call it on a copy or on a
    database no process has open)."""
    import asyncio

    return asyncio.run(_engine_check_async(Path(db), FAST_CONFIG if tune is None else tune))


def converged(dbs: list[Path]) -> tuple[bool, dict]:
    """Whether every database holds every accepted message, in the same order, nothing waiting."""
    accepted: set[str] = set()
    for db in dbs:
        accepted |= own_accepted(db)
    logs = {db.stem: log_of(db) for db in dbs}
    missing = {name: len(accepted - set(log)) for name, log in logs.items()}
    waiting = {db.stem: len(waiting_of(db)) for db in dbs}
    same = len({tuple(v) for v in logs.values()}) == 1
    ok = same and not any(missing.values()) and not any(waiting.values())
    return ok, {
        "accepted": len(accepted),
        "same_order": same,
        "missing": missing,
        "waiting": waiting,
        "log_lengths": {k: len(v) for k, v in logs.items()},
    }


def group_figures(dbs: list[Path]) -> dict:
    """Sent, delivered, resent, repaired, lost (accepted but absent + 'lost' events), time to convergence."""
    accepted: dict[str, set[str]] = {db.stem: own_accepted(db) for db in dbs}
    all_accepted = set().union(*accepted.values())
    logs = {db.stem: log_of(db) for db in dbs}
    counts = {db.stem: event_counts(db) for db in dbs}
    last_sent = 0
    for db in dbs:
        for _, ts, _ in events_of(db, "sent"):
            last_sent = max(last_sent, ts)
    last_delivered = 0
    delivered = 0
    for db in dbs:
        seen = set()
        for mid, ts, _ in events_of(db, "delivered"):
            if mid in all_accepted and mid not in seen:
                seen.add(mid)
                last_delivered = max(last_delivered, ts)
        delivered += len(seen)
    expected = sum(len(all_accepted - accepted[n]) for n in accepted)
    absent = sum(len(all_accepted - set(log)) for log in logs.values())
    return {
        "sent": len(all_accepted),
        "delivered": delivered,
        "expected_deliveries": expected,
        "resent": sum(c["resent"] for c in counts.values()),
        "repaired": sum(repaired_count(db) for db in dbs),
        "repairs_served": sum(c["repair_served"] for c in counts.values()),
        "repair_requests": sum(c["repair_requested"] for c in counts.values()),
        "rejected": sum(c["rejected"] for c in counts.values()),
        "lost_events": sum(c["lost"] for c in counts.values()),
        "lost": absent,
        "same_order": len({tuple(v) for v in logs.values()}) == 1,
        "convergence_after_last_send_s": max(0, last_delivered - last_sent) / 1000 if last_sent else float("nan"),
    }
