"""Reliability and security tests: real brokers, real processes, real SQLite files.

The long runs live in bench/ (chaos_bots.py, crash_loop.py, fuzz_frames.py, soak_nodes.py,
broker_faults.py); these tests run the same code (loaded by path) with short settings, so the
bench scripts cannot rot. bench/chaos_harness.py holds what they share (mosquitto that can be
killed and restarted, `sdschat bot` processes, readers of the databases).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def load_bench(name: str):
    """Import bench/<name>.py (and, through it, bench/chaos_harness.py)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    if name == "chaos_harness":
        return importlib.import_module("chaos_harness")  # the one the bench scripts import
    full = f"sdschat_bench_{name}"
    if full in sys.modules:
        return sys.modules[full]
    spec = importlib.util.spec_from_file_location(full, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[full] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def bench():
    """``bench("chaos_bots")`` -> the bench module."""
    return load_bench


@pytest.fixture(scope="session")
def harness():
    return load_bench("chaos_harness")
