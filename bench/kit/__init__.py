"""What the benches and the tests share to run real processes: loopback ports, a killable mosquitto, `sdschat bot`
processes, readers of a node's database, and the figures of a run.

It lives in bench/ because the benches are scripts: `.venv/bin/python bench/x.py` puts bench/ first on ``sys.path``,
so ``import kit`` works there with nothing added. The tests reach the same folder through pytest's ``pythonpath``
setting in pyproject.toml, which names it next to tests/support. A top-level package would not do: the editable
install maps only sdschat, a script run from bench/ does not see the project root, and setuptools' discovery
(``include = ["sdschat*"]``) would ship anything named after the project in the wheel. Inside sdschat/ it would be
product code, layered and shipped, while it only exists to test and measure the product.

The names are re-exported here so a bench can say ``import kit as H`` and ``H.Bot``, ``H.converged``.
"""

from kit.bots import FAST, FAST_CONFIG, FAST_TUNE, LINGER_S, SDSCHAT, Bot, env_with, keygen, wait_all
from kit.brokers import Broker, find_mosquitto, mosquitto_binary
from kit.dbread import (
    connect_ro,
    converged,
    db_bytes,
    engine_check,
    event_counts,
    events_of,
    group_figures,
    integrity,
    log_of,
    own_accepted,
    participant_of,
    repaired_count,
    waiting_of,
)
from kit.figures import cpu_s, cpu_share, ed25519_us, percentile, print_table, rss_kb, sample_cpu, wait_until
from kit.ports import free_port, wait_listening
from kit.tap import broker_tap

__all__ = [
    "FAST",
    "FAST_CONFIG",
    "FAST_TUNE",
    "LINGER_S",
    "SDSCHAT",
    "Bot",
    "Broker",
    "broker_tap",
    "connect_ro",
    "converged",
    "db_bytes",
    "engine_check",
    "env_with",
    "event_counts",
    "events_of",
    "find_mosquitto",
    "free_port",
    "group_figures",
    "integrity",
    "keygen",
    "log_of",
    "mosquitto_binary",
    "own_accepted",
    "participant_of",
    "percentile",
    "print_table",
    "repaired_count",
    "rss_kb",
    "sample_cpu",
    "cpu_s",
    "cpu_share",
    "ed25519_us",
    "wait_all",
    "wait_listening",
    "wait_until",
    "waiting_of",
]
