"""``python -m sdschat.cli.build_engine``: compile the SDS engine to C with mypyc.

Compiles :data:`sdschat.sds.native.MODULES` (mypyc, then the C compiler, on
every core) and, on Linux, the C helpers (:data:`sdschat.sds.native.C_HELPERS`)
in a temporary folder and puts the extension modules in
``sdschat/sds/_compiled/`` with a stamp of the sources they came from; the
package loads them from there only while the stamp matches (see
:mod:`sdschat.sds.native`). Nothing is written next to the sources. Does
nothing when the build is current (``--force`` rebuilds). Needs the ``dev``
extra (mypy, which includes mypyc) and a C compiler; without them the engine
runs as Python.

Exit status: 0 built or current, 1 the build failed (one line on stderr; the
engine keeps running as Python), 2 bad arguments.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from sdschat.sds import native

from .args import Parser
from .errors import CliError

__all__ = ["BuildError", "build", "main"]


class BuildError(Exception):
    """The engine could not be compiled (one line)."""


def current() -> bool:
    """A build of these sources, for this interpreter, is in place."""
    return native.current_stamp()[0] is not None


def build(out_dir: Path = native.COMPILED_DIR, *, verbose: bool = False) -> dict:
    """Compile the engine into ``out_dir`` (replaced whole once everything compiled); returns the stamp."""
    try:
        import mypy.version
        from mypyc.build import mypycify
        from setuptools import Distribution, Extension  # type: ignore[import-untyped]  # (no type information here)
        from setuptools.command.build_ext import build_ext  # type: ignore[import-untyped]  # (the same package)
    except ImportError as exc:
        raise BuildError(f"mypyc is not installed ({exc.name}): pip install -e '.[dev]'") from None
    src = native.COMPILED_DIR.parent
    digest = native.sources_digest()
    out_dir = Path(out_dir)
    with tempfile.TemporaryDirectory(prefix="sdschat-engine-build-") as tmp:
        work = Path(tmp)
        args = [
            "--ignore-missing-imports",
            "--cache-dir",
            str(work / "mypy-cache"),
            *(str(src / f"{m}.py") for m in native.MODULES),
        ]
        cwd = os.getcwd()
        try:
            os.chdir(src.parents[1])  # mypy names the modules from the package folders: sdschat.sds.<module>
            try:
                exts = mypycify(
                    args, opt_level="3", group_name="sdschat.sds._engine", target_dir=str(work / "c"), verbose=verbose
                )
            except SystemExit as exc:  # mypy's type errors end in sys.exit
                raise BuildError(
                    f"mypyc refused the engine's sources (exit {exc.code}); run mypy on sdschat/sds for the errors"
                ) from None
            if sys.platform.startswith("linux"):  # the C helpers (mmap, madvise)
                exts += [
                    Extension(f"sdschat.sds._{c}", [str(src / f"{c}.c")], extra_compile_args=["-O2"])
                    for c in native.C_HELPERS
                ]
            dist = Distribution({"name": "sdschat-engine", "ext_modules": exts})
            cmd = build_ext(dist)
            cmd.build_lib = str(work / "lib")
            cmd.build_temp = str(work / "obj")
            cmd.parallel = os.cpu_count() or 1
            cmd.ensure_finalized()
            try:
                cmd.run()
            except Exception as exc:  # the C compiler's errors (CompileError, LinkError...) are on stderr already
                raise BuildError(f"the C build failed: {type(exc).__name__}: {exc}") from None
        finally:
            os.chdir(cwd)
        built = sorted((work / "lib" / "sdschat" / "sds").glob("*.so")) + sorted(
            (work / "lib" / "sdschat" / "sds").glob("*.pyd")
        )
        names = {p.name.split(".")[0] for p in built}
        missing = [m for m in native.MODULES if m not in names]
        if missing:
            raise BuildError(f"mypyc built no module for {', '.join(missing)}")
        stage = work / "out"
        stage.mkdir()
        for p in built:
            shutil.copy2(p, stage / p.name)
        stamp = {
            "sources": digest,
            "cache_tag": sys.implementation.cache_tag,
            "mypy": mypy.version.__version__,
            "modules": list(native.MODULES),
            "helpers": [f"_{c}" for c in native.C_HELPERS if f"_{c}" in names],
        }
        (stage / native.STAMP).write_text(json.dumps(stamp, indent=1) + "\n", encoding="utf-8")
        old = out_dir.with_name(out_dir.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if out_dir.exists():
            out_dir.rename(old)
        shutil.copytree(stage, out_dir)
        shutil.rmtree(old, ignore_errors=True)
    return stamp


def main(argv: list[str] | None = None) -> int:
    ap = Parser(
        prog="python -m sdschat.cli.build_engine",
        description="Compile the SDS engine to C with mypyc (sdschat/sds/_compiled).",
    )
    ap.add_argument("--force", action="store_true", help="rebuild even if the build is current")
    ap.add_argument("--verbose", action="store_true", help="show mypyc's and the C compiler's output")
    try:
        args = ap.parse_args(argv)
    except CliError as exc:
        print(exc, file=sys.stderr)
        return exc.code
    if not args.force and current():
        print(f"engine: compiled build current ({native.COMPILED_DIR})", file=sys.stderr)
        return 0
    t0 = time.perf_counter()
    try:
        if args.verbose:
            stamp = build(verbose=True)
        else:  # mypyc and the compiler are chatty: their output only when something fails
            with tempfile.TemporaryFile("w+") as log:
                saved = os.dup(1), os.dup(2)
                try:
                    os.dup2(log.fileno(), 1)
                    os.dup2(log.fileno(), 2)
                    try:
                        stamp = build()
                    finally:
                        sys.stdout.flush()
                        sys.stderr.flush()
                        os.dup2(saved[0], 1)
                        os.dup2(saved[1], 2)
                except (BuildError, OSError):
                    log.seek(0)
                    sys.stderr.write(log.read()[-4000:])
                    raise
                finally:
                    os.close(saved[0])
                    os.close(saved[1])
    except (BuildError, OSError) as exc:  # OSError: e.g. an installed package's folder this user cannot write
        print(f"engine: not compiled, it runs as Python: {exc}", file=sys.stderr)
        return 1
    print(
        f"engine: compiled {len(stamp['modules'])} modules with mypyc {stamp['mypy']} in "
        f"{time.perf_counter() - t0:.0f} s ({native.COMPILED_DIR})",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
