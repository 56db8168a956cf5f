"""Fixtures of the UI tests. Their helper modules (ui_helpers.py: clusters, fake nodes, Pilot waits; terminal.py: a
pseudo-terminal and a tmux pane) are in tests/support, on pyproject's pythonpath."""

from __future__ import annotations

import functools

import pytest
import ui_helpers
from run_until import run as run_with_deadline


@pytest.fixture
def fake_node() -> ui_helpers.FakeNode:
    return ui_helpers.FakeNode()


@pytest.fixture
def run():
    """The shared ``run_until.run`` (the suite has no asyncio plugin), with the UI tests' 40 s deadline unless a test
    passes its own ``timeout=``."""
    return functools.partial(run_with_deadline, timeout=40.0)
