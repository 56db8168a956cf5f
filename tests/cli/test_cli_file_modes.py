"""Files that hold decrypted chat are 0600 whatever the umask: ``sdschat export --out`` (JSON lines and Parquet),
the window's ``/export``, its Screenshot command (the command palette's), and the screenshots the project makes of
real nodes. Each runs under umask 0, where a plain ``open`` would make the file 0666."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from sdschat.cli import main, screenshots
from sdschat.cli.wiring import start_demo_nodes, stop_all
from sdschat.transport import EmbeddedBroker
from sdschat.ui.app import ChatApp

DATA = Path(__file__).resolve().parents[1] / "data" / "v0.1"

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def umask_0():
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_export_out_is_0600_under_umask_0(tmp_path, capsys, umask_0) -> None:
    db = tmp_path / "alice.db"
    shutil.copy(DATA / "alice.db", db)
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert mode(plain) == 0o666  # what umask 0 gives an ordinary file
    out = tmp_path / "log.jsonl"
    assert main(["export", "--db", str(db), "--out", str(out)]) == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all("text" in r for r in rows)
    assert mode(out) == 0o600
    # an existing file readable by everyone is narrowed before the history goes in
    events = tmp_path / "events.jsonl"
    events.write_text("old")
    events.chmod(0o644)
    assert main(["export", "--db", str(db), "--events", "--out", str(events)]) == 0
    assert mode(events) == 0o600 and "old" not in events.read_text()
    parquet = tmp_path / "log.parquet"
    assert main(["export", "--db", str(db), "--format", "parquet", "--out", str(parquet)]) == 0
    assert mode(parquet) == 0o600 and parquet.read_bytes()[:4] == b"PAR1"


@contextlib.asynccontextmanager
async def chat(tmp_path: Path):
    """alice's chat window over a real node, with bob in the channel, on an embedded broker."""
    broker = await EmbeddedBroker.start()
    nodes = []
    try:
        nodes = await start_demo_nodes(2, 0.0, channel="team", db_dir=tmp_path / "nodes", broker_url=broker.url)
        yield nodes
    finally:
        await stop_all(nodes)
        await broker.close()


async def _until(pilot, predicate, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.05)


def test_the_windows_export_and_screenshot_are_0600_under_umask_0(tmp_path, monkeypatch, umask_0) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # the screenshot goes to the downloads folder: ~/Downloads
    monkeypatch.delenv("XDG_DOWNLOAD_DIR", raising=False)
    downloads = tmp_path / "Downloads"
    downloads.mkdir()
    text_out, jsonl_out = tmp_path / "log.txt", tmp_path / "log.jsonl"
    jsonl_out.write_text("")
    jsonl_out.chmod(0o644)

    async def scenario() -> None:
        async with chat(tmp_path) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=(100, 30)) as pilot:
                await bob.send_text("the launch codes are 0000")
                await _until(pilot, lambda: any(m.text.startswith("the launch") for m in alice.messages()), "bob")
                for out in (text_out, jsonl_out):
                    app.pane.input.load_text(f"/export {out}")
                    await pilot.press("enter")
                    await _until(pilot, lambda out=out: out.exists() and "launch codes" in out.read_text(), "export")
                await pilot.press("ctrl+p")
                await pilot.pause(0.2)
                await pilot.press(*"Screenshot")
                await pilot.pause(0.3)
                await pilot.press("enter")
                await _until(pilot, lambda: list(downloads.glob("*.svg")), "screenshot")
                await pilot.pause(0.2)
                assert not app.errors

    asyncio.run(scenario())
    for out in (text_out, jsonl_out):
        assert mode(out) == 0o600, (out, oct(mode(out)))
    (shot,) = downloads.glob("*.svg")
    assert "launch" in shot.read_text() and mode(shot) == 0o600


def test_the_projects_screenshots_of_real_nodes_are_0600_under_umask_0(tmp_path, capsys, umask_0) -> None:
    out = tmp_path / "shots"
    assert screenshots.main(["--out", str(out), "--only", "help"]) == 0
    (shot,) = out.glob("*.svg")
    assert shot.read_text().startswith("<svg") and mode(shot) == 0o600
