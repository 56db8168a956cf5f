"""The garbage-collector policy (sdschat.ui.collector): the app's (survivors frozen, no automatic full passes,
frozen cyclic garbage reclaimed on schedule, everything put back at the end), a bulk build (no collections
while it is made, frozen after) and the commands' "long-lived from here"."""

from __future__ import annotations

import gc
import weakref

from sdschat.ui import collector as collector_module
from sdschat.ui.collector import NO_FULL_PASSES, RECLAIM_EVERY_S, Collector, bulk_build, long_lived_from_here


class Cycle:
    def __init__(self) -> None:
        self.me = self


def dead_cycle() -> weakref.ref:
    """A weak reference to a cycle nobody holds: only the cyclic collector frees it."""
    return weakref.ref(Cycle())


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


def test_a_bulk_build_runs_without_collections_and_freezes_what_it_built() -> None:
    assert gc.isenabled() and gc.get_freeze_count() == 0
    try:
        with bulk_build():
            assert not gc.isenabled()
            built = [Cycle() for _ in range(3000)]  # past the young threshold: no collection comes
            dead = dead_cycle()
            for _ in range(3000):
                Cycle()
            assert dead() is not None
            ref = weakref.ref(built[0])
        assert gc.isenabled() and gc.get_freeze_count() > 0
        del built
        gc.collect()  # what was built is frozen: not collected, even once dead
        assert ref() is not None
    finally:
        gc.unfreeze()
        gc.enable()
    gc.collect()
    assert ref() is None


def test_a_bulk_build_leaves_a_paused_collector_paused_and_freezes_nothing() -> None:
    gc.disable()
    try:
        with bulk_build():
            assert not gc.isenabled()
        assert not gc.isenabled() and gc.get_freeze_count() == 0
        try:
            with bulk_build():
                raise KeyError("the build failed")
        except KeyError:
            pass
        assert not gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.enable()
    try:
        with bulk_build():
            raise KeyError("the build failed")
    except KeyError:
        pass
    try:
        assert gc.isenabled() and gc.get_freeze_count() > 0  # a failed build is frozen too (and collecting again)
    finally:
        gc.unfreeze()


def test_long_lived_from_here_moves_what_exists_out_of_the_collectors_way() -> None:
    dead = Cycle()
    ref = weakref.ref(dead)
    del dead
    try:
        long_lived_from_here()
        assert gc.get_freeze_count() > 0 and gc.isenabled()
        gc.collect()
        assert ref() is not None  # frozen: the full collection did not walk it
    finally:
        gc.unfreeze()
    gc.collect()
    assert ref() is None
