"""Crash consistency, short: a bot kill -9ed in each phase (startup, send, persist, receive, repair).

tests/harness/test_crash_loop.py runs the same loop 50 times; here one round of the five phases.
"""

from __future__ import annotations

import crash_loop as crash
import pytest

pytestmark = pytest.mark.timeout(240)


def test_kill_9_in_every_phase_leaves_a_sound_database_and_loses_nothing(tmp_path):
    r = crash.run(tmp_path, runs=5, loss=0.2, seed=3, log=lambda *_: None)
    assert r["phases"] == {p: 1 for p in crash.PHASES}
    # after each kill: integrity_check ok, restored engine invariants hold, nothing accepted vanished;
    # after settling: every accepted message in every log, same order
    assert r["failures"] == [], r
    assert r["lost"] == 0 and r["same_order"], r
    assert r["victim_accepted"] > 0, r
