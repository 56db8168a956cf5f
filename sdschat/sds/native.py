"""Which build of the engine runs: the modules compiled to C by mypyc, or these Python sources.

The engine's Python sources are the only source. ``python -m
sdschat.cli.build_engine`` (run by ``.ci/setup``) compiles :data:`MODULES`
with mypyc into ``sdschat/sds/_compiled/`` and writes a stamp there: the
SHA-256 of the sources it compiled and the interpreter's tag. When this
package is imported, :func:`select` puts that folder first on the package's
search path only if the stamp matches the sources on disk and this
interpreter; otherwise the Python sources run, unchanged in behaviour, only
slower. So an engine file edited after a build never runs stale compiled
code, and ``SDSCHAT_PURE_ENGINE=1`` forces the sources (to compare, or to
debug with breakpoints in the engine).

The engine's two environment variables (:data:`PURE_ENV`, :data:`HUGE_PAGES_ENV`)
are yes/no switches read by :func:`env_flag`, by the rules every part of the
project uses for such a switch (``sdschat.profile.settings``, which the engine
may not import: it imports nothing outside its package): ``1``, ``true``,
``yes``, ``on`` and ``0``, ``false``, ``no``, ``off`` in any case; unset or
empty is the default; any other value is refused with one line naming the
variable, never read as the opposite of what was meant.

:data:`BUILD` says which build runs and why (``sdschat --version`` prints it).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = [
    "BUILD",
    "COMPILED_DIR",
    "C_HELPERS",
    "HUGE_PAGES_ENV",
    "MODULES",
    "PURE_ENV",
    "STAMP",
    "Build",
    "current_stamp",
    "env_flag",
    "huge_page_arenas",
    "huge_page_stats",
    "python_forced",
    "select",
    "sources_digest",
]

#: the engine modules compiled to C: all but the package itself, the protobuf code generated for the wire format,
#: its generator, this file, and ``config`` (validates settings people and the simulator's ``--set`` pass in: it
#: keeps Python's own type errors and messages)
MODULES = (
    "archive",
    "bloom",
    "channel",
    "events",
    "frame",
    "frozen",
    "hints",
    "incoming",
    "log",
    "outgoing",
    "repair",
    "state",
    "sync",
    "timers",
    "wire",
)
#: C sources built with them (``<name>.c`` -> module ``_<name>``; on Linux): not engine code, helpers for the
#: processes that run many engines (``hugearena``: :func:`huge_page_arenas`)
C_HELPERS = ("hugearena",)
#: where the compiled modules are written (not in git)
COMPILED_DIR = Path(__file__).resolve().with_name("_compiled")
#: the build's stamp, in :data:`COMPILED_DIR`
STAMP = "build.json"
#: the environment variable that forces the Python sources (yes/no; default no)
PURE_ENV = "SDSCHAT_PURE_ENGINE"
#: the environment variable that keeps a simulation worker's arenas on ordinary pages (yes/no; default yes)
HUGE_PAGES_ENV = "SDSCHAT_HUGE_PAGES"
#: the words of a yes/no variable (compared in lower case, blanks around ignored)
_YES = frozenset({"1", "true", "yes", "on"})
_NO = frozenset({"0", "false", "no", "off"})


class Build:
    """Which build of the engine runs: ``kind`` is ``"compiled"`` or ``"python"``, ``reason`` says why."""

    __slots__ = ("kind", "reason")

    def __init__(self, kind: str, reason: str) -> None:
        self.kind = kind
        self.reason = reason

    @property
    def compiled(self) -> bool:
        return self.kind == "compiled"

    def __str__(self) -> str:
        return f"{self.kind} ({self.reason})"

    __repr__ = __str__


def sources_digest(src_dir: Path | None = None) -> str:
    """SHA-256 of the compiled modules' sources (names and bytes, in :data:`MODULES` order, then the
    :data:`C_HELPERS`)."""
    src = src_dir or Path(__file__).resolve().parent
    h = hashlib.sha256()
    for name in (*MODULES, *(f"{c}.c" for c in C_HELPERS)):
        h.update(name.encode() + b"\0")
        h.update((src / (name if name.endswith(".c") else f"{name}.py")).read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def env_flag(name: str, default: bool) -> bool:
    """The yes/no environment variable ``name``, else ``default`` (unset or empty); ``ValueError`` naming the
    variable for a value that is neither yes nor no."""
    value = os.environ.get(name, "")
    word = value.strip().lower()
    if not word:
        return default
    if word in _YES:
        return True
    if word in _NO:
        return False
    raise ValueError(f"{name}={value!r} is not yes or no: use 1/0, true/false, yes/no or on/off")


def python_forced() -> bool:
    """``SDSCHAT_PURE_ENGINE`` asks for the Python sources (a yes; ``off``, ``0``, ``no`` or ``false`` do not)."""
    return env_flag(PURE_ENV, False)


def current_stamp() -> tuple[dict[str, Any] | None, str]:
    """The stamp of a build of these sources for this interpreter, or None and why there is none."""
    try:
        stamp = json.loads((COMPILED_DIR / STAMP).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, "not compiled: python -m sdschat.cli.build_engine"
    except (OSError, ValueError) as exc:
        return None, f"unreadable build stamp: {exc}"
    if stamp.get("cache_tag") != sys.implementation.cache_tag:
        return None, f"compiled for {stamp.get('cache_tag')}, this is {sys.implementation.cache_tag}"
    try:
        digest = sources_digest()
    except OSError as exc:
        return None, f"cannot read the sources: {exc}"
    if stamp.get("sources") != digest:
        return None, "the sources changed since the build: python -m sdschat.cli.build_engine"
    return stamp, ""


def select(package_path: list[str]) -> Build:
    """Put the compiled build first on ``package_path`` (the package's ``__path__``) if it matches; say which runs."""
    if python_forced():
        return Build("python", f"{PURE_ENV} is set")
    stamp, why_not = current_stamp()
    if stamp is None:
        return Build("python", why_not)
    package_path.insert(0, str(COMPILED_DIR))
    return Build("compiled", f"mypyc {stamp.get('mypy', '?')}")


def huge_page_arenas(dry_run: bool = False) -> str:
    """Put this process's Python arenas on transparent huge pages (``hugearena.c``); ``"on"``, or ``"off (why)"``.

    For a process that runs a simulation's shard and nothing else: every copy
    of a frame touches another member's engine, and at thousands of members
    most of those accesses miss the TLB (10,000 x 1,000: 13% less time; 30,000
    x 100: 11%). The memory of arenas Python frees stays with the process for
    reuse. Off when :data:`HUGE_PAGES_ENV` says so, when the engine runs as
    Python (the helper is built with the compiled engine), or when the kernel
    never gives huge pages; the simulation's events are the same either way.
    ``dry_run``: only say what it would do.
    """
    if not env_flag(HUGE_PAGES_ENV, True):
        return f"off ({HUGE_PAGES_ENV}={os.environ[HUGE_PAGES_ENV]})"
    helper = _helper()
    if helper is None:
        if not BUILD.compiled:
            return f"off (no compiled helper: the engine runs as Python, {BUILD.reason})"
        return "off (this build has no helper: it is built on Linux)"
    try:
        mode = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text(encoding="ascii")
    except OSError:
        return "off (this kernel has no transparent huge pages)"
    if "[never]" in mode:
        return "off (transparent huge pages: never)"
    if not dry_run:
        helper.install()
    return "on"


def huge_page_stats() -> dict[str, int] | None:
    """What the helper did in this process (installed, regions of 64 MiB, arenas in use), or None without it."""
    helper = _helper()
    return None if helper is None else helper.stats()


def _helper() -> ModuleType | None:
    if not BUILD.compiled:
        return None
    try:  # (built with the compiled engine, in COMPILED_DIR: no Python source of its own)
        return importlib.import_module(f"{__package__}._hugearena")
    except ImportError:
        return None


#: set by the package on import (:func:`select`)
BUILD: Build = Build("python", "not selected yet")
