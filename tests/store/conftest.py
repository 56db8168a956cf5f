"""Shared pieces of the store tests: the scenario module (loaded by path: tests/ is not a package)."""

import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _load_sim():
    name = "sdschat_store_test_sim"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / "store_sim.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def sim_mod():
    return _load_sim()


@pytest.fixture(scope="session")
def sim_path() -> Path:
    return HERE / "store_sim.py"
