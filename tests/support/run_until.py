"""Run a test's coroutine with a deadline, and wait inside it until a condition holds.

Every test folder used to define its own ``run`` and ``until`` (or ``wait_for``), with different deadlines and
different ways of failing: a hung coroutine either hung the test until pytest-timeout killed it or raised a bare
``TimeoutError`` that said nothing about where the tasks were stuck. One pair keeps the behaviour, and the failure
messages, the same everywhere.
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def run(coro: Awaitable[T], timeout: float = 90.0) -> T:
    """``asyncio.run`` with a deadline; on expiry, an AssertionError showing where every task was waiting.

    The stacks are printed before the test's task is cancelled, because after the cancellation they all point at the
    cancellation itself and no longer at what the test was waiting for."""

    async def guarded() -> T:
        task = asyncio.ensure_future(coro)
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if task in done:
            return task.result()
        out = io.StringIO()
        for t in asyncio.all_tasks():
            if t is not asyncio.current_task():
                t.print_stack(file=out)
        task.cancel()
        raise AssertionError(f"test coroutine still running after {timeout} s; tasks:\n{out.getvalue()}")

    return asyncio.run(guarded())


async def until(
    pred: Callable[[], object], timeout: float = 20.0, what: str = "condition", interval: float = 0.02
) -> None:
    """Wait until ``pred()`` is true, checking every ``interval`` seconds; AssertionError naming ``what`` after
    ``timeout`` seconds.

    The deadline is read from the monotonic clock rather than counted in sleeps, so a loaded machine, where each
    sleep overshoots, still gives up after ``timeout`` seconds and not several times later."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout} s")
        await asyncio.sleep(interval)
