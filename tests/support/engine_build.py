"""Tests that patch the engine's internals run on its Python sources.

A class compiled by mypyc keeps its methods and its module's constants in C:
``monkeypatch`` cannot reach them. Under the compiled build (``sdschat.sds.native``),
a test decorated with :func:`on_python_engine` runs in a child pytest with
``SDSCHAT_PURE_ENGINE=1`` and passes only if it passed there; under the Python
build it runs here.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys

from sdschat.sds import native


def on_python_engine(test):
    @functools.wraps(test)
    def run(*args, **kwargs):
        if not native.BUILD.compiled:
            return test(*args, **kwargs)
        # (under pytest-xdist's loadgroup a grouped test's id ends in "@group": not a node id)
        nodeid = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0].split("@", 1)[0]
        env = {**os.environ, native.PURE_ENV: "1"}
        r = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", nodeid],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0 and re.search(r"\b1 passed\b", r.stdout), r.stdout[-4000:] + r.stderr[-2000:]
        return None

    return run
