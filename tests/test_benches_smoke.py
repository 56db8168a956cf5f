"""Every bench in bench/ runs with --smoke (tiny sizes) and prints its figures: a bench that rots fails here.

The long runs themselves (minutes to hours) are the benches' default sizes, run by hand; see README. What checks
rather than measures (chaos, crash loops, broker faults, membership schedules, fuzzing) is a test: tests/harness
and tests/fuzz, marked slow.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
NUMBER = r"[\d,.]+"
#: bench -> what its smoke run must print (figures next to their labels) and must not
EXPECTED = {
    "alone_bytes.py": [
        rf"alice alone for 5 s after 1 line\(s\): {NUMBER} frames, {NUMBER} bytes on the broker",
        r"published: .*content 1",
        r"resends held while nobody was here: \d+",
    ],
    "db_size.py": [
        rf"events compaction off \(every event row kept\): file {NUMBER} B/message",
        rf"bounded parts scaled down to 40: file {NUMBER} B/message, beyond the bounded parts {NUMBER}",
        r"[1-9][\d,]* messages with compacted events",
    ],
    "engine_fanout.py": [
        rf"sync frame with a repair request +{NUMBER} us a copy median",
        r"^engine +(compiled|python) \(",
    ],
    "engine_throughput.py": [
        rf"sdschat +200 +{NUMBER} +{NUMBER}",
        rf"ratio sdschat 1,000 / 200 messages rate: {NUMBER}",
        r"^engine: (compiled|python) \(",
    ],
    # offline: checks pyproject's base dependencies against the chat-only imports (no venv, no network)
    "install_size.py": [
        r"chat-only imports: \d+ sdschat modules use \d+ distributions .*, 0 outside the base "
        r"dependencies' closure .*; pipeline packages loaded: 0",
        rf"estimated chat-only install .*: {NUMBER} MB",
        r"^PASS",
    ],
    "inspector.py": [
        rf"old message: key press to the inspector's frame {NUMBER} ms median .*, 2 timeline steps",
        rf"`sdschat inspect --db FILE ID`, a cold process: {NUMBER} ms median",
    ],
    "message_actions.py": [
        rf"edit to shown on the other member over 5 edits: p50 {NUMBER} ms, p99 {NUMBER} ms",
        rf"database after 40 reactions: {NUMBER} bytes, {NUMBER} bytes per reaction",
    ],
    "node_latency.py": [
        rf"send-to-delivered latency over \d+ deliveries: p50 {NUMBER} ms, p99 {NUMBER} ms",
        r"logs identical: True",
        rf"CPU per node while messages flow \({NUMBER} s\): median {NUMBER}% of one core",
        rf"this host: one Ed25519 check {NUMBER} us before the run and {NUMBER} us after it, load average {NUMBER} "
        rf"and {NUMBER}",
    ],
    "offline_catchup.py": [
        rf"kept session: 5 of 5 lines shown in every one of 1 runs; window start to the last line "
        rf"{NUMBER} ms median",
        r"no kept session \(keep_days = 0\): 0 of 5 lines after",
        rf"broker memory: -?{NUMBER} bytes per queued line",
    ],
    "padding.py": [rf"padding overhead on this chat: {NUMBER}% more bytes on the wire", r"message +\d+ +[\d,]+"],
    "receive_path.py": [
        rf"received frame: main thread {NUMBER} us median, process {NUMBER} us \(the database's thread included\)",
        rf"frame signatures checked: {NUMBER}% of the frames; the rest were taken on their author's content",
        rf"of which unpacking it with its signature checks \(frame when checked, content\): {NUMBER} us a frame",
        rf"envelope {NUMBER}, unpacking {NUMBER}, frame check {NUMBER}, decoding {NUMBER}, content check {NUMBER}, "
        rf"engine {NUMBER}; the node's own work .* -?{NUMBER}$",
        rf"one Ed25519 verification on this host: {NUMBER} us; a received message needs {NUMBER} on average, "
        rf"{NUMBER}% of",
        r"^run 1: .* [1-9]\d* in the log",
    ],
    "stack_floor.py": [
        r"^  m0: sent 30, received 30, refused 0; CPU while messages flow",
        r"^  m1: sent 30, received 30, refused 0; CPU while messages flow",
        rf"the stack alone, per member: median {NUMBER}% of one core \(main thread {NUMBER}%\)",
        rf"one Ed25519 check on this host: {NUMBER} us, one signature: {NUMBER} us",
    ],
    "report_scale.py": [rf"report wall time +{NUMBER} s for {NUMBER} events", r"delivery 1\.0+, converged True"],
    "search_history.py": [
        rf"common word +first results +{NUMBER} ms median",
        r"cold, as `sdschat search`",
        rf"the last page on screen {NUMBER} ms after start; engine ready after {NUMBER} ms",
        rf"one page up: {NUMBER} ms median",
        r"cursor on it: True",
    ],
    "sim_memory.py": [
        rf"traced at the last send .*: {NUMBER} MiB, {NUMBER} KiB per member",
        r"sdschat/sds/bloom\.py +[\d.,]+",
        r"converged True",
    ],
    "sim_scale.py": [r"converged +True", r"event kinds", r"^engine +(compiled|python) \("],
    "soak_nodes.py": [r"2 nodes over mosquitto, target 20 msg/s .*: sent \d+", r"latency sent -> delivered"],
    "store_batching.py": [r"writer stream +\w+ +200 ", rf"writes {NUMBER}x the rows/s of a commit per row"],
    "store_open_check.py": [
        rf"Store.open \+ close with the open checks: {NUMBER} ms median",
        rf"the checks at open: {NUMBER} ms",
        rf"PRAGMA quick_check of the whole file: {NUMBER} ms",
    ],
    "presence_bytes.py": [
        rf"chat: presence beats {NUMBER} of {NUMBER} bytes: {NUMBER}% of the channel's bytes",
        rf"first minute \(starts, joins, start beats and answers\): {NUMBER} bytes, presence {NUMBER}",
        rf"simulated: presence adds [+-]{NUMBER}% to the channel's bytes \(median of 2 seeds",
    ],
    "store_catchup.py": [rf"caught up 50 missed messages from the store in {NUMBER} s"],
    "sweep_example.py": [rf"sweep wall time +{NUMBER} s for 2 scenarios", rf"events written +{NUMBER}"],
    "ui_history.py": [
        rf"open: load \+ layout {NUMBER} ms",
        rf"app up with {NUMBER} messages from its database",
        rf"a sent message on screen {NUMBER} ms after the node emits it",
    ],
    "wire_bytes.py": [
        rf"[1-9][\d,]* frames, {NUMBER} bytes on the broker for 20 messages",
        rf"{NUMBER} bytes a message",
    ],
    "wire_view.py": [rf"recording a frame: {NUMBER} us per frame", rf"at 1,000 frames/s with the view open: {NUMBER}%"],
    "window_channels.py": [
        rf"whole process, `sdschat --home DIR` in a 140x40 pty, spawn to first paint .*: {NUMBER} ms "
        rf"median, {NUMBER} ms max over 2 runs",
        rf"first paint: {NUMBER} ms",
        rf"channel switch: {NUMBER} ms median",
        r"background channel: 3 messages arrived \(unread counted\), active view repainted 0 lines",
        rf"send-to-shown in the channel on screen p50 {NUMBER} ms, p99 {NUMBER} ms",
    ],
    "window_soak.py": [
        r"^idle window: [\d.]+% of a core over [\d.]+ s; RSS [\d.]+ MB",
        r"^ +\d+ +[\d,]+ +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ +[\d.]+ +-?[\d.]+ +[\d.]+$",
        (
            rf"^window: CPU {NUMBER}% of a core at {NUMBER} lines/s \({NUMBER} ms a line\), "
            rf"RSS {NUMBER} -> {NUMBER} MB, last-interval growth -?{NUMBER} KB/line"
        ),
        rf"RSS after 36,000 lines \(an hour at 10/s\): {NUMBER} MB",
        rf"CPU at 10 lines/s: {NUMBER}% of a core",
        r"last line on screen: True; exit status 0",
        r"targets not enforced in a smoke run \(it would be (PASS|FAIL)\)",
    ],
}


def test_every_bench_has_a_smoke_case() -> None:
    benches = {p.name for p in BENCH.glob("*.py")}  # bench/kit, what the benches share, is a package: not globbed
    assert benches == set(EXPECTED), f"add a --smoke case for: {sorted(benches - set(EXPECTED))}"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("bench", sorted(EXPECTED))
def test_bench_smoke_run(bench: str) -> None:
    p = subprocess.run(
        [sys.executable, str(BENCH / bench), "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=230
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    for pattern in EXPECTED[bench]:
        assert re.search(pattern, p.stdout, re.MULTILINE), (
            f"{bench} --smoke did not print /{pattern}/:\n{p.stdout[-3000:]}"
        )
