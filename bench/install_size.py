"""Chat-only install: the size of a fresh ``pip install .`` venv against the 150 MB target (issue 14).

    .venv/bin/python bench/install_size.py [--pipeline] [--keep] [--smoke]

Full run (needs the package index; a minute or two): creates a venv in a
temporary folder, ``pip install`` s this project into it without extras (the
chat-only install) and prints the venv's size (every file, pip included) in MB
(10^6 bytes) and MiB, the largest distributions in it, and whether the pipeline
packages stayed out and ``sdschat --version`` runs. With ``--pipeline``, a
second venv with ``.[pipeline]`` for comparison.

``--smoke`` (what tests/test_benches_smoke.py runs) needs no network and builds no
venv: it reads the base dependencies and the ``pipeline`` extra from
pyproject.toml, imports every chat-only module of sdschat in a fresh interpreter
(all but ``sdschat.pipeline`` and ``sdschat.sim``, which ``simulate``/``report``/
``sweep`` need) and checks that (a) every third-party distribution they import is
a base dependency or required by one, (b) no pipeline package is imported or in
the base closure; and it estimates the chat-only install from the installed size
(RECORD) of the base dependencies' closure in this venv. Exit 1 if a check fails.
The default run does the same checks first.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
TARGET_MB = 150.0
#: sdschat's packages that only the pipeline commands (simulate, report, sweep) import
PIPELINE_ONLY = ("sdschat.pipeline", "sdschat.sim")

# run in a fresh interpreter: which top-level modules the chat-only part of sdschat imports
IMPORT_CLOSURE = r"""
import importlib, json, pkgutil, sys
import sdschat
skip = tuple(sys.argv[1:])
failed = {}

def walk(path, prefix):  # (not pkgutil.walk_packages: it imports the skipped packages to look inside)
    for info in pkgutil.iter_modules(path, prefix):
        if info.name.startswith(skip) or info.name == "sdschat.__main__":
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception as exc:
            failed[info.name] = f"{type(exc).__name__}: {exc}"
            continue
        if info.ispkg:
            walk(module.__path__, info.name + ".")

walk(sdschat.__path__, "sdschat.")
print(json.dumps({"modules": sorted({m.split(".")[0] for m in sys.modules}), "failed": failed,
                  "imported": sum(1 for m in sys.modules if m.startswith("sdschat.")),
                  "stdlib": sorted(sys.stdlib_module_names)}))
"""


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> tuple[list[Requirement], list[Requirement], set[str]]:
    """pyproject.toml's base dependencies, its ``pipeline`` extra, and the names of the tools (the ``dev`` extra,
    the build system's requirements) that a developer's command may import lazily (``build_engine``)."""
    toml = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = toml["project"]
    tools = [*project["optional-dependencies"].get("dev", []), *toml["build-system"]["requires"]]
    return (
        [Requirement(r) for r in project["dependencies"]],
        [Requirement(r) for r in project["optional-dependencies"]["pipeline"]],  # (no markers of ours)
        {norm(Requirement(r).name) for r in tools},
    )


def closure(requirements: list[Requirement]) -> dict[str, md.Distribution]:
    """The installed distributions ``requirements`` pull in, transitively (markers evaluated for this
    interpreter, and for the extras asked for), by normalized name."""
    found: dict[str, md.Distribution] = {}
    seen: set[tuple[str, frozenset]] = set()
    todo = list(requirements)
    while todo:
        req = todo.pop()
        key = (norm(req.name), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            raise SystemExit(
                f"install_size: {req.name} is not installed in this venv (pip install -e '.[dev]')"
            ) from None
        found[key[0]] = dist
        for sub in map(Requirement, dist.requires or []):
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in ("", *req.extras)):
                todo.append(sub)
    return found


def source_imports() -> dict[str, set[str]]:
    """Every top-level module the chat-only sources name in an import statement, at load time or inside a
    function (a lazy import): module -> the files that import it."""
    found: dict[str, set[str]] = {}
    pkg = ROOT / "sdschat"
    for path in sorted(pkg.rglob("*.py")):
        dotted = ".".join(("sdschat", *path.relative_to(pkg).with_suffix("").parts))
        if dotted.startswith(PIPELINE_ONLY):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def installed_bytes(dist: md.Distribution) -> int:
    total = 0
    for f in dist.files or []:
        if f.size is not None:
            total += f.size
        else:
            p = Path(dist.locate_file(f))
            if p.is_file():
                total += p.stat().st_size
    return total


def check_closure() -> bool:
    """The offline checks (see the module docstring); prints what it found, returns whether all passed."""
    base, pipeline, tools = declared()
    base_names, pipeline_names = {norm(r.name) for r in base}, {norm(r.name) for r in pipeline}
    base_closure = closure(base)
    pipeline_closure = closure(pipeline)
    ok = True

    p = subprocess.run(
        [sys.executable, "-c", IMPORT_CLOSURE, *PIPELINE_ONLY], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    if p.returncode != 0:
        raise SystemExit(f"install_size: importing sdschat failed:\n{p.stderr[-2000:]}")
    got = json.loads(p.stdout.strip().splitlines()[-1])
    if got["failed"]:
        ok = False
        print(f"FAIL chat-only modules that do not import: {got['failed']}")
    by_module = md.packages_distributions()
    stdlib = set(got["stdlib"])

    def distributions(modules) -> set[str]:
        out = set()
        for module in modules:
            if module in stdlib or module in ("sdschat", "__main__") or module.startswith("_"):
                continue
            out.update(norm(d) for d in by_module.get(module, ()) if norm(d) != "sdschat")
        return out  # (a module of no distribution: a compiled part of sdschat's engine, say)

    loaded = distributions(got["modules"])  # imported when the chat-only modules load
    named = source_imports()
    lazy = {
        d: sorted({f for m, files in named.items() if d in distributions([m]) for f in files})
        for d in distributions(named) - loaded
    }
    outside = sorted(loaded - set(base_closure)) + sorted(set(lazy) - set(base_closure) - pipeline_names - tools)
    pipeline_loaded = sorted((loaded | set(base_closure)) & pipeline_names)
    pipeline_lazy = {d: files for d, files in lazy.items() if d in pipeline_names}
    tools_lazy = {d: files for d, files in lazy.items() if d in tools and d not in base_closure}
    if outside:
        ok = False
        print(f"FAIL used by chat-only modules but not in the base dependencies' closure: {', '.join(outside)}")
    if pipeline_loaded:
        ok = False
        print(f"FAIL pipeline packages loaded by (or required for) chat: {', '.join(pipeline_loaded)}")
    if base_names & pipeline_names:
        ok = False
        print(f"FAIL in both the base dependencies and the pipeline extra: {sorted(base_names & pipeline_names)}")
    unused = sorted(base_names - loaded - set(lazy))
    used = loaded | set(lazy)
    print(
        f"chat-only imports: {got['imported']} sdschat modules use {len(used)} distributions "
        f"({len(loaded)} when loaded, {len(lazy) - len(pipeline_lazy) - len(tools_lazy)} more in lazy imports), "
        f"{len(outside)} "
        f"outside the base dependencies' closure ({len(base_names)} declared, {len(base_closure)} with what they "
        f"pull in); pipeline packages loaded: {len(pipeline_loaded)}"
        + (f"; declared but never imported: {', '.join(unused)}" if unused else "")
    )
    if pipeline_lazy:
        print(
            "  pipeline packages imported lazily (behind require_pipeline): "
            + "; ".join(f"{d} in {', '.join(files)}" for d, files in sorted(pipeline_lazy.items()))
        )
    if tools_lazy:
        print(
            "  developer tools imported lazily (the dev extra, the build system): "
            + "; ".join(f"{d} in {', '.join(files)}" for d, files in sorted(tools_lazy.items()))
        )

    sizes = {name: installed_bytes(d) for name, d in base_closure.items()}
    extra_only = {n: d for n, d in pipeline_closure.items() if n not in base_closure}
    pipe_mb = sum(installed_bytes(d) for d in extra_only.values()) / 1e6
    top = sorted(sizes.items(), key=lambda kv: -kv[1])[:6]
    print(
        f"estimated chat-only install (the base closure as installed in this venv, without pip and sdschat): "
        f"{sum(sizes.values()) / 1e6:.1f} MB [target for the whole venv < {TARGET_MB:.0f} MB]; largest: "
        + ", ".join(f"{n} {b / 1e6:.1f}" for n, b in top)
    )
    print(f"the pipeline extra adds {len(extra_only)} distributions, {pipe_mb:.1f} MB as installed here")
    return ok


def tree_bytes(root: Path) -> tuple[int, int]:
    """(apparent bytes of every file, bytes on disk) under ``root``; symlinks not followed."""
    apparent = disk = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            st = os.lstat(os.path.join(dirpath, f))
            apparent += st.st_size
            disk += st.st_blocks * 512
    return apparent, disk


def fresh_venv(where: Path, spec: str) -> dict:
    """``python -m venv`` + ``pip install SPEC`` in ``where``; its size and what is in it."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    py = where / "bin" / "python"
    p = subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", spec],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        raise SystemExit(f"install_size: pip install {spec} failed (no package index?):\n{p.stderr[-2000:]}")
    seconds = time.perf_counter() - t
    apparent, disk = tree_bytes(where)
    site = next((where / "lib").glob("python3*/site-packages"))
    dirs = sorted(
        (
            (tree_bytes(d)[0], d.name)
            for d in site.iterdir()
            if d.is_dir() and not d.name.endswith((".dist-info", "__pycache__"))
        ),
        reverse=True,
    )[:8]
    probe = subprocess.run(
        [
            str(py),
            "-c",
            "import importlib.util, json; print(json.dumps([m for m in "
            "('pyspark', 'pyarrow', 'matplotlib', 'numpy') if importlib.util.find_spec(m)]))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    version = subprocess.run([str(where / "bin" / "sdschat"), "--version"], capture_output=True, text=True)
    return {
        "seconds": seconds,
        "apparent": apparent,
        "disk": disk,
        "top": dirs,
        "pipeline": json.loads(probe.stdout),
        "version_ok": version.returncode == 0,
        "version": (version.stdout or version.stderr).strip().splitlines()[:1],
    }


def report(label: str, r: dict, target: float | None) -> None:
    mb = r["apparent"] / 1e6
    verdict = "" if target is None else f" [target < {target:.0f} MB: {'met' if mb < target else 'MISSED'}]"
    print(
        f"{label}: {mb:.1f} MB ({r['apparent'] / 2**20:.1f} MiB; {r['disk'] / 2**20:.1f} MiB on disk), "
        f"installed in {r['seconds']:.0f} s{verdict}"
    )
    print("  largest: " + ", ".join(f"{name} {b / 1e6:.1f}" for b, name in r["top"]))
    print(
        f"  pipeline packages present: {', '.join(r['pipeline']) or 'none'}; `sdschat --version`: "
        f"{'runs' if r['version_ok'] else 'FAILS'} {r['version']}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipeline", action="store_true", help="also measure a venv with the pipeline extra")
    ap.add_argument("--keep", action="store_true", help="keep the venvs (their folder is printed)")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="offline: check the base dependencies against the chat-only imports, estimate the size "
        "(the test suite runs this)",
    )
    a = ap.parse_args()
    ok = check_closure()
    if a.smoke:
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1
    tmp = Path(tempfile.mkdtemp(prefix="sdschat-install-size-"))
    try:
        chat = fresh_venv(tmp / "chat", str(ROOT))
        report("fresh venv, pip install . (chat only)", chat, TARGET_MB)
        ok = ok and not chat["pipeline"] and chat["version_ok"] and chat["apparent"] / 1e6 < TARGET_MB
        if a.pipeline:
            report("fresh venv, pip install '.[pipeline]'", fresh_venv(tmp / "pipeline", f"{ROOT}[pipeline]"), None)
    finally:
        if a.keep:
            print(f"venvs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
