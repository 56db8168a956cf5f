"""Broker faults: killed and restarted, unreachable at start, dropping frames for a slow subscriber.

Same code as tests/harness/test_broker_faults.py (longer outages, more runs), with short settings.
"""

from __future__ import annotations

import broker_faults
import pytest

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def bf():
    return broker_faults


def test_running_nodes_reconnect_after_a_broker_restart_and_sds_recovers_every_message(bf, tmp_path):
    """mosquitto killed -9 while three nodes chat; they keep sending for 2 s into the void; it comes back."""
    r = bf.restart(tmp_path, down_s=2.0, nodes=3, per_phase=4)
    assert r["publish_failed_while_down"] > 0, r  # the outage was real
    assert r["connects"] == [2, 2, 2], r  # each node reconnected, once
    assert r["reconnect_after_up_s"] is not None and r["reconnect_after_up_s"] < 5, r  # backoff 0.5 s, doubling
    assert r["converged"], r  # every message, including those "sent" while the broker was gone, in every log


def test_bot_started_before_the_broker_exists_exits_with_one_line_and_works_once_it_does(bf, tmp_path):
    """Today's behaviour (documented): no waiting for a broker at start; exit 2 with one line. The database is
    created (identity included) and the same command works as soon as the broker is there."""
    r = bf.unreachable(tmp_path)
    assert r["exit_code"] == 2, r
    assert r["stderr_lines"] == 1 and "Traceback" not in r["stderr"], r["stderr"]
    assert r["stderr"].startswith("sdschat: cannot reach MQTT broker at 127.0.0.1:") and "refused" in r["stderr"], r
    assert r["fail_s"] < 10, r
    assert r["db_created"] and r["same_identity_after"], r
    assert r["second_exit_code"] == 0 and r["peer_exit_code"] == 0, r["second_stderr"]
    assert r["converged_after"], r["state"]


def test_slow_subscriber_frames_dropped_by_the_broker_are_recovered_by_sds(bf, tmp_path):
    """mosquitto with max_queued_messages 10; the subscriber is frozen (SIGSTOP) while a peer bursts 200
    messages, so mosquitto drops QoS 0 frames meant for it; after SIGCONT it carries on and gets them all."""
    r = bf.slow_subscriber(tmp_path, max_queued=10, burst=200, freeze_s=2.0, chatters=0, slow_count=4, bursters=1)
    detail = {k: r[k] for k in ("dropped_by_broker", "state", "exit_codes", "resent", "repaired", "workdir")}
    assert r["dropped_by_broker"] > 0, detail  # mosquitto really dropped frames
    assert set(r["exit_codes"].values()) == {0}, detail
    assert r["converged"] and r["lost"] == 0, detail
