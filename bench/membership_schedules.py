"""Membership schedules: N seeded random schedules of joins, invites, kicks, rekeys, admin grants, members offline,
restarts and a store node on or off, over real nodes on mosquitto; per invariant, how many held and which seeds
broke it.

Each schedule is tests/reliability/membership_model.py's (3-5 members, 10-25 steps, ~10-30 s): the same seed,
the same schedule. The four invariants (that module's docstring): ``epoch_confidentiality`` (nobody holds a line
of an epoch it was not a member of), ``convergence`` (every honest member ends on the newest key and holds every
line of its epochs), ``non_member_refused`` (no honest member holds a line of a removed member or refused
newcomer written once everyone knew), ``resends_stop`` (no honest member keeps resending after convergence).

    .venv/bin/python bench/membership_schedules.py [--schedules 200] [--first-seed 1] [--converge 25] [--verbose]
    .venv/bin/python bench/membership_schedules.py --seeds 4 17 --verbose   # replay some seeds, with their logs

Exit status: 0 when it ran (whatever the invariants say; ``--strict``: 1 if one broke), 1 on a harness error.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import chaos_harness as H


def load_model():
    """tests/reliability/membership_model.py, by path (the test suite runs the same module)."""
    spec = importlib.util.spec_from_file_location("membership_model", ROOT / "tests" / "reliability" / "membership_model.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["membership_model"] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schedules", type=int, default=200, help="how many schedules (seeds first-seed, first-seed+1, ...)")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--seeds", type=int, nargs="*", help="run these seeds instead")
    ap.add_argument("--converge", type=float, default=25.0, help="seconds the honest members get to converge")
    ap.add_argument("--watch", type=float, default=4.0, help="seconds resends are watched after convergence")
    ap.add_argument("--smoke", action="store_true", help="2 schedules (the test suite runs this)")
    ap.add_argument("--verbose", action="store_true", help="each schedule's steps and what broke")
    ap.add_argument("--strict", action="store_true", help="exit 1 if an invariant broke")
    args = ap.parse_args()
    seeds = args.seeds or list(range(args.first_seed, args.first_seed + (2 if args.smoke else args.schedules)))
    model = load_model()
    held: Counter = Counter()
    broke: dict[str, list[int]] = {k: [] for k in model.INVARIANTS}
    errors: dict[int, list[str]] = {}
    features: Counter = Counter()
    seconds: list[float] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sdschat-membership-") as tmp:
        work = Path(tmp)
        broker = H.Broker(work / "broker")
        broker.start()
        try:
            for seed in seeds:
                try:
                    r = model.run(seed, broker.url, work / f"seed-{seed}", converge_s=args.converge,
                                  watch_s=args.watch)
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
                if args.verbose:
                    print("  " + str(r.schedule))
                    for line in r.log:
                        print("   ", line)
                    for k in r.broken:
                        for v in r.violations[k][:10]:
                            print(f"  {k}: {v}")
                    for e in r.errors:
                        print(f"  error: {e}")
        finally:
            broker.close()
    ran = len(seconds)
    print()
    print(f"schedules run {ran} of {len(seeds)} in {time.monotonic() - t0:.0f} s "
          f"({sum(seconds) / max(ran, 1):.1f} s a schedule, longest {max(seconds, default=0):.1f} s)")
    print(f"{'invariant':<24}{'held':>6}{'broke':>7}  seeds that broke it")
    for k in model.INVARIANTS:
        seeds_k = broke[k]
        shown = " ".join(map(str, seeds_k[:40])) + (f" ... ({len(seeds_k)})" if len(seeds_k) > 40 else "")
        print(f"{k:<24}{held[k]:>6}{len(seeds_k):>7}  {shown or '-'}")
    print("features exercised: " + ", ".join(f"{f} {features[f]}" for f in model.FEATURES))
    if errors:
        print(f"harness errors in {len(errors)} schedules: " + "; ".join(f"seed {s}: {e[0]}" for s, e in errors.items()))
        return 1
    any_broke = any(broke.values())
    print("FAIL: an invariant broke" if any_broke else "PASS: every invariant held in every schedule")
    return 1 if (args.strict and any_broke) else 0


if __name__ == "__main__":
    sys.exit(main())
