"""The UI's garbage-collector policy (sdschat.ui.collector): survivors frozen, no automatic full passes,
frozen cyclic garbage reclaimed on schedule, everything put back at the end."""

from __future__ import annotations

import gc
import weakref

from sdschat.ui import collector as collector_module
from sdschat.ui.collector import NO_FULL_PASSES, RECLAIM_EVERY_S, Collector


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_survivors_are_frozen_and_frozen_garbage_is_reclaimed_on_schedule() -> None:
    now = [1000.0]
    thresholds = gc.get_threshold()
    c = Collector(clock=lambda: now[0])
    c.start()
    try:
        assert gc.get_threshold() == (thresholds[0], thresholds[1], NO_FULL_PASSES)
        alive = Cycle()
        ref = weakref.ref(alive)
        c.tick()  # a freeze: the cycle survived a young collection
        assert c.freezes == 1 and gc.get_freeze_count() > 0
        del alive
        gc.collect()  # a full collection does not walk frozen objects: the dead cycle stays
        assert ref() is not None
        now[0] += RECLAIM_EVERY_S
        c.tick()  # the reclaim: unfrozen, collected, frozen again
        assert c.reclaims == 1 and ref() is None
        young = Cycle()
        young_ref = weakref.ref(young)
        del young
        c.tick()  # freezing first collects the young generations: garbage made since is not frozen
        assert young_ref() is None
    finally:
        c.stop()
    assert gc.get_threshold() == thresholds
    assert gc.get_freeze_count() == 0


def test_the_app_runs_the_policy_while_it_is_up(run, monkeypatch) -> None:
    from ui_helpers import FakeNode

    from sdschat.ui.app import ChatApp

    monkeypatch.setattr(collector_module, "FREEZE_EVERY_S", 0.05)
    monkeypatch.setattr("sdschat.ui.app.FREEZE_EVERY_S", 0.05)
    thresholds = gc.get_threshold()

    async def scenario():
        app = ChatApp(FakeNode(), blink=False)
        async with app.run_test(size=(100, 30)) as pilot:
            assert gc.get_threshold()[2] == NO_FULL_PASSES
            await pilot.pause(0.3)
            assert app.collector.freezes >= 2
        return app

    run(scenario())
    assert gc.get_threshold() == thresholds and gc.get_freeze_count() == 0
