"""Fuzzing, long: >= 100,000 generated and mutated frames and 2,000 mutated databases through every parser of the
receive path, over a real node on mosquitto (tests/support/fuzz_frames.py holds the targets and the mutator).

Several minutes, so marked slow and left out of the default run: ``pytest -m slow -s tests/fuzz`` (``-s`` shows the
tally). tests/reliability/test_rel_fuzz.py runs a few thousand inputs of the same code in the default run.
``SDSCHAT_FUZZ_SEED`` picks another seed (1 by default), so a long run can explore new inputs and still be replayed.
"""

from __future__ import annotations

import logging
import os
import time

import fuzz_frames
import pytest
from kit import Broker

pytestmark = [pytest.mark.slow, pytest.mark.timeout(4 * 3600)]


def test_a_hundred_thousand_fuzzed_inputs_raise_nothing_undocumented(tmp_path) -> None:
    seed = int(os.environ.get("SDSCHAT_FUZZ_SEED", "1"))
    frames, rows, hyp = 100_000, 2_000, 2_000
    # the node and store log each failure they survive (Python's last-resort handler would print them all)
    quiet = logging.getLogger("sdschat")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    broker = Broker(tmp_path / "broker")
    broker.start()
    t0 = time.monotonic()
    try:
        tally = fuzz_frames.run(frames, rows, hyp, seed, tmp_path, broker.url)
    finally:
        broker.close()
        quiet.propagate = True
    print(
        f"fuzzed {tally.total():,} inputs in {time.monotonic() - t0:.0f} s (seed {seed}; frames {frames:,}, "
        f"mutated databases {rows:,}, hypothesis {hyp:,} per strategy)"
    )
    tally.print()
    by = tally.by_target()
    assert tally.bug_count == 0, tally.bugs
    # every target was reached, so a silent skip cannot pass for a clean run
    assert {"open", "decode", "receive", "node", "rows"} <= set(by), sorted(by)
    assert tally.total() >= frames
