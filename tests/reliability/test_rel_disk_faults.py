"""Disk faults: the database on a full or read-only filesystem.

The claim: a clear one-line error to the user (the bot exits non-zero, one line, no traceback), no
corruption (PRAGMA integrity_check is "ok" once space is back), and recovery (the bot runs again on
the same database and the group converges: every message it accepted reaches the others).
Set SDSCHAT_TEST_DISK_FAULT=rlimit to run the fallback below where tmpfs would work.

The filesystem is a tiny tmpfs (`mount -t tmpfs -o size=256k`), which needs root (CAP_SYS_ADMIN).
Where mounting is not permitted the tests fall back to RLIMIT_FSIZE for "full" (the kernel refuses
to grow any file of the bot past the limit: EFBIG) and to a chmod'ed read-only directory for
"read-only" (not effective for root; then the read-only test uses the same RLIMIT_FSIZE trick) --
DiskFault.mode says which one ran.
"""

from __future__ import annotations

import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(150)

SDSCHAT = [sys.executable, "-m", "sdschat"]


class DiskFault:
    """A small filesystem for one test: tmpfs when root may mount, else RLIMIT_FSIZE / chmod."""

    def __init__(self, path: Path, size_kb: int = 256) -> None:
        self.path = path
        self.size_kb = size_kb
        self.path.mkdir(parents=True, exist_ok=True)
        self.mode = "rlimit"
        if os.environ.get("SDSCHAT_TEST_DISK_FAULT") != "rlimit":  # set it to exercise the fallback
            probe = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k,mode=0700", "tmpfs", str(path)],
                capture_output=True,
                text=True,
            )
            self.mode = "tmpfs" if probe.returncode == 0 else "rlimit"
        self.limit: int | None = None  # RLIMIT_FSIZE for processes started through preexec()

    # -- faults

    def fill(self) -> None:
        """No space left (tmpfs: a filler file takes the rest; rlimit: files cannot grow)."""
        if self.mode == "tmpfs":
            fd = os.open(self.path / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                while os.write(fd, b"\0" * 4096):
                    pass
            except OSError:
                pass
            finally:
                os.close(fd)
        else:
            self.limit = 1

    def cap(self) -> None:
        """Space runs out as the database grows (tmpfs: its size; rlimit: 256 kB per file)."""
        if self.mode != "tmpfs":
            self.limit = self.size_kb * 1024

    def space_back(self) -> None:
        if self.mode == "tmpfs":
            (self.path / "filler").unlink(missing_ok=True)
            subprocess.run(["mount", "-o", "remount,size=16m", str(self.path)], check=True)
        self.limit = None

    def read_only(self) -> None:
        if self.mode == "tmpfs":
            subprocess.run(["mount", "-o", "remount,ro", str(self.path)], check=True)
        elif os.geteuid() != 0:
            for p in [self.path, *self.path.iterdir()]:
                p.chmod(0o500 if p.is_dir() else 0o400)
        else:
            self.limit = 1  # root without mount: nothing can grow (the nearest we get)

    def writable(self) -> None:
        if self.mode == "tmpfs":
            subprocess.run(["mount", "-o", "remount,rw", str(self.path)], check=True)
        elif os.geteuid() != 0:
            for p in [self.path, *self.path.iterdir()]:
                p.chmod(0o700 if p.is_dir() else 0o600)
        self.limit = None

    def preexec(self):
        limit = self.limit
        if limit is None:
            return None
        return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    def close(self) -> None:
        if self.mode == "tmpfs":
            if subprocess.run(["umount", str(self.path)], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", str(self.path)], capture_output=True)


@pytest.fixture
def disk(tmp_path):
    d = DiskFault(tmp_path / "small")
    yield d
    d.close()


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "k.key"
    subprocess.run([*SDSCHAT, "keygen", str(path)], check=True, capture_output=True, timeout=60)
    return path


FAST = [
    a
    for kv in (
        "repair_t_min_ms=300",
        "repair_t_max_ms=1500",
        "resend_unacknowledged_ms=400",
        "resend_possibly_acknowledged_ms=1200",
        "resend_max_interval_ms=3000",
        "sync_interval_ms=2000",
        "sync_jitter_ms=500",
    )
    for a in ("--tune", kv)
]


def bot(name: str, db: Path, key_file: Path, url: str, *extra: str, disk: DiskFault | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [
            *SDSCHAT,
            "bot",
            "--name",
            name,
            "--key-file",
            str(key_file),
            "--broker",
            url,
            "--db",
            str(db),
            "--quiet",
            "--max-runtime",
            "60",
            *FAST,
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=disk.preexec() if disk else None,
    )


def one_line_failure(p: subprocess.Popen, timeout: float = 60) -> str:
    out, err = p.communicate(timeout=timeout)
    lines = [line for line in err.splitlines() if line.strip()]
    assert p.returncode not in (0, None), f"exit {p.returncode}; stderr: {err[-800:]}"
    assert "Traceback" not in err, err[-2000:]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{err[-1500:]}"
    return lines[0]


def own_accepted(db: Path) -> set[str]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        pid = con.execute("SELECT participant_id FROM channels").fetchone()[0]
        return {r[0] for r in con.execute("SELECT message_id FROM messages WHERE sender_id = ?", (pid,))}
    finally:
        con.close()


def log_of(db: Path) -> list[str]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [
            r[0]
            for r in con.execute(
                "SELECT message_id FROM messages WHERE state != 'waiting' ORDER BY lamport_timestamp, message_id"
            )
        ]
    finally:
        con.close()


def integrity(db: Path) -> str:
    con = sqlite3.connect(db)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


@pytest.fixture(scope="module")
def mosq(tmp_path_factory):
    from brokers import Mosquitto, mosquitto_binary

    broker = Mosquitto(mosquitto_binary(), tmp_path_factory.mktemp("rel-disk-mosquitto"))
    broker.start()
    yield broker
    broker.close()


def test_full_disk_at_start_is_one_line_then_the_bot_runs_once_space_is_back(disk, key_file, mosq, tmp_path):
    db = disk.path / "full.db"
    disk.fill()
    line = one_line_failure(bot("full", db, key_file, mosq.url, "--count", "1", disk=disk))
    assert any(w in line.lower() for w in ("full", "space", "disk", "large", "write")), line
    # a database is made whole or not at all: no half-made file is left to be taken for a damaged one (or, as
    # before, for a new one) on the next run
    assert [p.name for p in disk.path.iterdir() if p.name != "filler"] == []
    disk.space_back()
    peer = bot("peer", tmp_path / "peer.db", key_file, mosq.url, "--count", "3", "--interval", "0.1", "--linger", "2")
    again = bot("full", db, key_file, mosq.url, "--count", "3", "--interval", "0.1", "--linger", "2")
    for p in (again, peer):
        _, err = p.communicate(timeout=90)
        assert p.returncode == 0, err[-1000:]
    assert integrity(db) == "ok"
    assert log_of(db) == log_of(tmp_path / "peer.db") and len(log_of(db)) == 6 + 2  # and both joins


@pytest.fixture
def mb_disk(tmp_path):
    d = DiskFault(tmp_path / "one-mb", size_kb=1024)
    yield d
    d.close()


def test_disk_filling_up_mid_run_is_one_line_no_corruption_and_the_group_converges(mb_disk, key_file, mosq, tmp_path):
    """The bot's database (and its write-ahead log, which grows to ~4 MB between checkpoints) fills a
    1 MB filesystem after a few dozen messages."""
    disk = mb_disk
    db = disk.path / "grow.db"
    disk.cap()
    peer = bot(
        "peer",
        tmp_path / "peer.db",
        key_file,
        mosq.url,
        "--count",
        "60",
        "--interval",
        "0.1",
        "--linger",
        "3",
        "--start-after",
        "0.5",
    )
    victim = bot(
        "grow", db, key_file, mosq.url, "--count", "400", "--interval", "0.01", "--start-after", "0.5", disk=disk
    )
    line = one_line_failure(victim)
    assert "database" in line.lower() or "disk" in line.lower(), line
    accepted = own_accepted(db)
    assert 0 < len(accepted) < 400, len(accepted)
    disk.space_back()
    assert integrity(db) == "ok"
    again = bot("grow", db, key_file, mosq.url, "--count", "0", "--linger", "3")
    for p in (again, peer):
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-1000:]
    assert integrity(db) == "ok"
    peer_log = log_of(tmp_path / "peer.db")
    assert accepted <= set(peer_log), f"{len(accepted - set(peer_log))} accepted messages never reached the peer"
    assert log_of(db) == peer_log


@pytest.fixture
def roomy_disk(tmp_path):
    d = DiskFault(tmp_path / "roomy", size_kb=16 * 1024)
    yield d
    d.close()


def test_read_only_filesystem_is_one_line_then_the_bot_runs_when_writable(roomy_disk, key_file, mosq, tmp_path):
    disk = roomy_disk
    db = disk.path / "ro.db"
    first = bot(
        "ro", db, key_file, mosq.url, "--count", "2", "--interval", "0.1", "--linger", "0", "--max-runtime", "3"
    )
    _, err = first.communicate(timeout=60)
    assert first.returncode in (0, 3), err  # alone: nobody acknowledges, so it may give up after 3 s
    before = own_accepted(db)  # (this reader leaves -wal and -shm behind, as a crash would)
    assert (disk.path / "ro.db-wal").exists()
    disk.read_only()
    try:
        line = one_line_failure(bot("ro", db, key_file, mosq.url, "--count", "1", disk=disk))
        assert any(
            w in line.lower() for w in ("read-only", "readonly", "read only", "permission", "write", "disk", "open")
        ), line
    finally:
        disk.writable()
    assert integrity(db) == "ok" and own_accepted(db) == before
    peer = bot("peer", tmp_path / "peer.db", key_file, mosq.url, "--count", "2", "--interval", "0.1", "--linger", "2")
    again = bot("ro", db, key_file, mosq.url, "--count", "2", "--interval", "0.1", "--linger", "2")
    for p in (again, peer):
        _, err = p.communicate(timeout=90)
        assert p.returncode == 0, err[-1000:]
    assert before <= set(log_of(tmp_path / "peer.db"))
    assert log_of(db) == log_of(tmp_path / "peer.db")
