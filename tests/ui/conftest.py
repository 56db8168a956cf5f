"""Fixtures of the UI tests (helpers live in ui_helpers.py, importable from the tests)."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from ui_helpers import FakeNode  # noqa: E402


@pytest.fixture
def fake_node() -> FakeNode:
    return FakeNode()


@pytest.fixture
def run():
    """Run a coroutine to completion (the suite has no asyncio plugin)."""

    def _run(coro, timeout: float = 40.0):
        return asyncio.run(asyncio.wait_for(coro, timeout))

    return _run
