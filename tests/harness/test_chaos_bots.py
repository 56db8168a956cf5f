"""Chaos, long: 5 `sdschat bot` processes, 100 messages each, 30% loss each way, duplication, reordering, the
sender n0 killed -9 three times, mosquitto restarted once (tests/support/chaos_bots.py drives it).

A few minutes, so marked slow: ``pytest -m slow -s tests/harness/test_chaos_bots.py`` (``-s`` shows the figures).
tests/reliability/test_rel_chaos.py runs the same code with 16 messages a bot in the default run.
"""

from __future__ import annotations

import chaos_bots
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_five_bots_of_a_hundred_messages_converge_through_loss_kills_and_a_broker_restart(tmp_path) -> None:
    r = chaos_bots.run(
        tmp_path,
        bots=5,
        count=100,
        interval=0.1,
        loss=0.3,
        duplicate=0.2,
        delay_ms=20,
        jitter_ms=20,
        kills=3,
        broker_restarts=1,
        seed=1,
    )
    chaos_bots.report(r)
    assert r["passed"], r["state"]
    assert r["lost"] == 0 and r["same_order"]
