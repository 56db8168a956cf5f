"""Membership schedules, long: 200 seeded random schedules of joins, invites, kicks, rekeys, admin grants, members
offline, restarts and a store node on or off, over real nodes on mosquitto (tests/support/membership_model.py);
after each, the four invariants of that module's docstring must hold.

About an hour, so marked slow: ``pytest -m slow -s tests/harness/test_membership_schedules.py`` prints one line a
schedule and, per invariant, how many held and which seeds broke it. ``SDSCHAT_MEMBERSHIP_SEEDS`` replays some
seeds instead (``"4 17"``), with each schedule's steps and log. tests/reliability/test_rel_membership_model.py runs
chosen seeds in the default run.
"""

from __future__ import annotations

import os
import time
from collections import Counter

import membership_model as model
import pytest
from kit import Broker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(4 * 3600)]

SCHEDULES = 200
CONVERGE_S = 25.0  # seconds the honest members get to converge
WATCH_S = 4.0  # seconds resends are watched after convergence


def test_every_invariant_holds_in_two_hundred_seeded_schedules(tmp_path) -> None:
    replay = [int(s) for s in os.environ.get("SDSCHAT_MEMBERSHIP_SEEDS", "").split()]
    seeds = replay or list(range(1, SCHEDULES + 1))
    held: Counter = Counter()
    broke: dict[str, list[int]] = {k: [] for k in model.INVARIANTS}
    errors: dict[int, list[str]] = {}
    features: Counter = Counter()
    seconds: list[float] = []
    t0 = time.monotonic()
    broker = Broker(tmp_path / "broker")
    broker.start()
    try:
        for seed in seeds:
            try:
                r = model.run(seed, broker.url, tmp_path / f"seed-{seed}", converge_s=CONVERGE_S, watch_s=WATCH_S)
            except Exception as exc:  # noqa: BLE001 - the harness itself failed: a finding, not a schedule result
                errors[seed] = [f"{type(exc).__name__}: {exc}"]
                print(f"seed {seed}: harness error {type(exc).__name__}: {exc}", flush=True)
                continue
            seconds.append(r.seconds)
            features.update(r.features)
            if r.errors:
                errors[seed] = r.errors
            for k in model.INVARIANTS:
                if r.violations[k]:
                    broke[k].append(seed)
                else:
                    held[k] += 1
            print(r.summary(), flush=True)
            if replay:
                print("  " + str(r.schedule))
                for line in r.log:
                    print("   ", line)
                for k in r.broken:
                    for v in r.violations[k][:10]:
                        print(f"  {k}: {v}")
    finally:
        broker.close()
    print(
        f"\nschedules run {len(seconds)} of {len(seeds)} in {time.monotonic() - t0:.0f} s "
        f"({sum(seconds) / max(len(seconds), 1):.1f} s a schedule, longest {max(seconds, default=0):.1f} s)"
    )
    print(f"{'invariant':<24}{'held':>6}{'broke':>7}  seeds that broke it")
    for k in model.INVARIANTS:
        shown = " ".join(map(str, broke[k][:40])) + (f" ... ({len(broke[k])})" if len(broke[k]) > 40 else "")
        print(f"{k:<24}{held[k]:>6}{len(broke[k]):>7}  {shown or '-'}")
    print("features exercised: " + ", ".join(f"{f} {features[f]}" for f in model.FEATURES))
    assert not errors, "harness errors: " + "; ".join(f"seed {s}: {e[0]}" for s, e in errors.items())
    assert not any(broke.values()), {k: v for k, v in broke.items() if v}
