"""A simulation worker's Python arenas on transparent huge pages (``hugearena.c``, ``native.huge_page_arenas``).

Each case runs in a child process: installing the arena allocator is for the whole of a process that does
nothing else, never for the test runner's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sdschat.sds import native

ROOT = Path(__file__).resolve().parents[2]

#: in the child: install, make ~200 MB of small objects, say where they are and what the kernel says of that memory
_PROBE = r"""
import json, sys
from sdschat.sds import native
status = native.huge_page_arenas()
objs = [(i, str(i)) for i in range(2_000_000)]
addr = id(objs[-1])
flags = eligible = None
with open("/proc/self/smaps") as f:
    inside = False
    for line in f:
        head = line.split()
        if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            inside = lo <= addr < hi
        elif inside and head[0] == "THPeligible:":
            eligible = int(head[1])
        elif inside and head[0] == "VmFlags:":
            flags = head[1:]
stats = native.huge_page_stats()
print(json.dumps({"status": status, "flags": flags, "eligible": eligible, "stats": stats,
                  "compiled": native.BUILD.compiled}))
"""


def _thp_mode() -> str | None:
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return None
    return text[text.index("[") + 1 : text.index("]")]


def _probe(**env_changes: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in (native.PURE_ENV, native.HUGE_PAGES_ENV)}
    env.update(env_changes)
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


#: .ci/run sets it: the compiled engine, and with it the helper, is there
REQUIRED = os.environ.get("SDSCHAT_REQUIRE_COMPILED") == "1"


def test_a_worker_s_objects_live_in_regions_advised_for_huge_pages():
    mode = _thp_mode()
    got = _probe()
    assert got["compiled"] or not REQUIRED, got
    if not got["compiled"]:  # (a checkout without a build: the Python engine, no helper, and it says why)
        assert got["status"].startswith("off (") and got["stats"] is None and "hg" not in got["flags"], got
        return
    if mode == "never":
        assert got["status"].startswith("off") and "never" in got["status"], got
        return
    assert got["status"] == "on", got
    assert "hg" in got["flags"], got  # the VMA holding a fresh object was advised MADV_HUGEPAGE
    assert got["eligible"] == 1, got  # and the kernel may back it with 2 MiB pages
    stats = got["stats"]
    assert stats["installed"] and stats["regions"] >= 2 and stats["arenas"] >= 100, stats  # ~200 MB in 1 MiB arenas


def test_the_environment_variable_keeps_ordinary_pages():
    got = _probe(**{native.HUGE_PAGES_ENV: "0"})
    assert got["status"] == f"off ({native.HUGE_PAGES_ENV}=0)", got
    assert "hg" not in got["flags"] and not (got["stats"] or {}).get("installed"), got


def test_the_python_engine_has_no_helper_and_says_so():
    got = _probe(**{native.PURE_ENV: "1"})
    assert got["status"].startswith("off") and native.PURE_ENV in got["status"], got
    assert got["stats"] is None and "hg" not in got["flags"], got
