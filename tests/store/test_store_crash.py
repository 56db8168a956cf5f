"""A store killed (SIGKILL) while writing reopens sound, at a batch boundary, with every flushed batch."""

import asyncio
import os
import random
import signal
import stat
import subprocess
import sys
import time

import pytest

from sdschat.sds import MessageChannel
from sdschat.store import Store

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


async def _inspect(db):
    store = await Store.open(db)
    try:
        integrity = await store.integrity_check()
        state = await store.load_state("room")
        steps = [e.detail["step"] async for e in store.iter_events() if e.detail and "step" in e.detail]
        messages = {m.message_id async for m in store.iter_messages("room")}
        return integrity, state, steps, messages
    finally:
        await store.close()


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_killed_while_writing_reopens_consistent(tmp_path, sim_mod, sim_path, seed):
    db = tmp_path / "bob.db"
    delay = random.SystemRandom().uniform(0.05, 0.9)
    proc = subprocess.Popen(
        [sys.executable, str(sim_path), "child", str(db), str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = proc.stdout.readline()
        assert first.strip() == "ready", proc.stderr.read()
        time.sleep(delay)
    finally:
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err
    flushed = [int(line.split()[1]) for line in out.splitlines() if line.startswith("flushed ")]
    where = f"(seed {seed}, killed after {delay:.3f} s, {len(flushed)} flushes reported)"
    assert os.path.exists(f"{db}-wal"), where  # recovery really goes through the WAL
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{db}{suffix}"):
            assert stat.S_IMODE(os.stat(f"{db}{suffix}").st_mode) == 0o600, (suffix, where)

    integrity, loaded, steps, messages = asyncio.run(_inspect(db))
    assert integrity == "ok", where
    assert loaded is not None, where
    sim = sim_mod.Sim(seed)
    restored = MessageChannel.restore(loaded, sim.cfg)
    assert restored.check_invariants() == [], where

    # durable before published: every batch the child saw flushed is in the file
    last = max(steps, default=0)
    if flushed:
        assert last >= flushed[-1] or _no_events_between(sim_mod, seed, last, flushed[-1]), where

    # atomic batches: the file holds exactly the engine's state after some step, at or after the
    # last step that left an event (steps without events leave no marker)
    sim.chans["bob"].drain_journal()
    seen_messages = set()
    while sim.step_no < last:
        seen_messages.update(m.message_id for m in sim.step()["bob"][1].messages)
    for _ in range(1000):
        snap = sim.chans["bob"].snapshot()
        if not sim_mod.compare_states(loaded, snap, skip=sim_mod.UNJOURNALED) and seen_messages == messages:
            break
        out = sim.step()
        if out["bob"][1].events:
            pytest.fail(
                f"stored state matches no step boundary after step {last} {where}: "
                f"{sim_mod.compare_states(loaded, snap, skip=sim_mod.UNJOURNALED)[:3]}"
            )
        seen_messages.update(m.message_id for m in out["bob"][1].messages)
    else:
        pytest.fail(f"no match {where}")


def _no_events_between(sim_mod, seed, last, flushed_step):
    """True if steps last+1 .. flushed_step of Bob produced no events (so leave no marker)."""
    sim = sim_mod.Sim(seed)
    while sim.step_no < flushed_step:
        out = sim.step()
        if sim.step_no > last and out["bob"][1].events:
            return False
    return True
