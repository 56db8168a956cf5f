"""Broker faults, long: outages of 1, 5 and 20 s, a bot started before its broker, and five runs each of a slow
subscriber whose frames mosquitto drops, with one and then two peers bursting (tests/support/broker_faults.py).

Several minutes, so marked slow: ``pytest -m slow -s tests/harness/test_broker_faults.py`` (``-s`` shows the
figures). tests/reliability/test_rel_broker_faults.py runs each part once, with short settings, in the default run.
"""

from __future__ import annotations

import broker_faults
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

MAX_QUEUED = 10
BURST = 150  # messages per burst bot when two burst at once; one bursting alone sends twice as many
SLOW_RUNS = 5


@pytest.mark.parametrize("down_s", [1.0, 5.0, 20.0])
def test_nodes_recover_every_message_after_a_broker_outage(tmp_path, down_s: float) -> None:
    r = broker_faults.restart(tmp_path, down_s=down_s)
    print(
        f"  down {down_s:5.1f} s: {r['messages']} messages, {r['publish_failed_while_down']} publishes failed "
        f"while down; all reconnected {r['all_reconnected_s']} s after the broker was back, every log complete "
        f"{r['recovered_s']} s after; converged {r['converged']}; connects {r['connects']}"
    )
    assert r["converged"], r


def test_a_bot_before_its_broker_fails_in_one_line_then_works(tmp_path) -> None:
    u = broker_faults.unreachable(tmp_path)
    print(f"  exit {u['exit_code']} after {u['fail_s']} s, {u['stderr_lines']} line on stderr: {u['stderr']!r}")
    assert u["exit_code"] != 0 and u["stderr_lines"] == 1, u
    assert u["second_exit_code"] == 0 and u["converged_after"], u


@pytest.mark.parametrize(("bursters", "burst"), [(1, 2 * BURST), (2, BURST)], ids=["one-bursting", "two-bursting"])
def test_a_slow_subscriber_recovers_every_frame_the_broker_dropped(tmp_path, bursters: int, burst: int) -> None:
    passed = 0
    for k in range(SLOW_RUNS):
        s = broker_faults.slow_subscriber(
            tmp_path / f"slow{bursters}-{k}", max_queued=MAX_QUEUED, burst=burst, bursters=bursters, seed=k * 100
        )
        passed += s["converged"]
        print(
            f"  run {k}: mosquitto's $SYS dropped counter {s['dropped_by_broker']}; {s['sent']} messages; "
            f"converged {s['converged']} (missing per bot {s['state']['missing']}); slow bot repaired "
            f"{s['slow_repaired']}; resends {s['resent']}; exit codes {set(s['exit_codes'].values())}; "
            f"{s['wall_s']} s"
        )
    assert passed == SLOW_RUNS, f"{passed} of {SLOW_RUNS} runs recovered every message"
