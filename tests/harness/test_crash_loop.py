"""Crash consistency, long: one `sdschat bot` of a group of three killed -9 fifty times, cycling through the phases of
its work (tests/support/crash_loop.py drives it and checks the database after each kill).

Several minutes, so marked slow: ``pytest -m slow -s tests/harness/test_crash_loop.py``. tests/reliability/
test_rel_crash.py runs one round of the five phases in the default run.
"""

from __future__ import annotations

import crash_loop
import pytest
from kit import print_table

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]


def test_fifty_kills_leave_sound_databases_and_lose_no_accepted_message(tmp_path) -> None:
    loss = 0.2
    r = crash_loop.run(tmp_path, runs=50, loss=loss, seed=1)
    print(
        f"{r['runs']} kill -9 runs of one bot in a group of 3 over mosquitto ({loss:.0%} loss each way): "
        f"phases {r['phases']}"
    )
    print_table(
        [
            (
                "databases passing integrity_check + check_invariants after a kill",
                f"{r['checked'] - sum(1 for f in r['failures'] if 'integrity' in f or 'invariants' in f)}"
                f" of {r['checked']}"
                f" (the other {r['runs'] - r['checked']} kills came before the file existed)",
            ),
            ("messages accepted by the victim over all runs", r["victim_accepted"]),
            ("messages accepted by the group", r["group_accepted"]),
            ("accepted messages lost after settling", r["lost"]),
            ("logs identical, same order", r["same_order"]),
            ("time to settle after the last kill", f"{r['settle_s']} s"),
            ("wall time", f"{r['wall_s']} s"),
        ]
    )
    assert r["passed"], r["failures"]
    assert r["lost"] == 0
