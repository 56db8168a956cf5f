"""The engine's two builds (sdschat.sds.native): compiled by mypyc when current, else its Python sources."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import sdschat
from sdschat.cli import build_engine
from sdschat.sds import native

ROOT = Path(__file__).resolve().parents[2]
#: .ci/run sets it: the suite must run on the compiled engine, as people do after setup
REQUIRED = os.environ.get("SDSCHAT_REQUIRE_COMPILED") == "1"


def _child(code: str, pythonpath: Path) -> subprocess.CompletedProcess:
    """``python -c code`` importing sdschat from ``pythonpath``, on whichever build is current there."""
    env = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=pythonpath
    )


def test_the_suite_runs_the_compiled_engine_after_setup():
    """After ``.ci/setup`` (which compiles the engine) the compiled modules are the ones imported."""
    import sdschat.sds.channel as channel

    if REQUIRED or (build_engine.current() and not native.python_forced()):
        assert native.BUILD.compiled, native.BUILD
        assert Path(channel.__file__).parent == native.COMPILED_DIR and not channel.__file__.endswith(".py")
    else:  # no current build here: the Python sources run, and say why
        assert native.BUILD.kind == "python" and channel.__file__.endswith(".py")
        assert "build_engine" in native.BUILD.reason or native.PURE_ENV in native.BUILD.reason


@pytest.fixture
def fake_build(tmp_path, monkeypatch):
    """A compiled folder whose stamp the test writes (select() only reads the stamp)."""
    folder = tmp_path / "_compiled"
    folder.mkdir()
    monkeypatch.setattr(native, "COMPILED_DIR", folder)
    monkeypatch.delenv(native.PURE_ENV, raising=False)

    def write(**changes) -> list[str]:
        stamp = {"sources": native.sources_digest(), "cache_tag": sys.implementation.cache_tag, "mypy": "9.9"}
        stamp.update(changes)
        (folder / native.STAMP).write_text(json.dumps(stamp))
        return ["/the/package"]

    return folder, write


def test_a_build_is_used_only_while_its_stamp_matches_the_sources_and_the_interpreter(fake_build, monkeypatch):
    folder, write = fake_build
    path = write()
    build = native.select(path)
    assert build.compiled and build.reason == "mypyc 9.9" and path == [str(folder), "/the/package"]
    path = write(sources="0" * 64)
    build = native.select(path)
    assert not build.compiled and "sources changed" in build.reason and path == ["/the/package"]
    path = write(cache_tag="cpython-39")
    build = native.select(path)
    assert not build.compiled and "cpython-39" in build.reason and path == ["/the/package"]
    path = write()
    monkeypatch.setenv(native.PURE_ENV, "1")
    build = native.select(path)
    assert not build.compiled and native.PURE_ENV in str(build) and path == ["/the/package"]
    monkeypatch.setenv(native.PURE_ENV, "0")  # "0" means off
    assert native.select(write()).compiled
    (folder / native.STAMP).write_text("{not json")
    path = ["/the/package"]
    assert "unreadable" in native.select(path).reason and path == ["/the/package"]
    (folder / native.STAMP).unlink()
    assert "not compiled" in native.select(path).reason and path == ["/the/package"]


def test_the_digest_covers_every_compiled_module_and_c_helper(tmp_path):
    src = tmp_path / "sds"
    src.mkdir()
    files = [f"{name}.py" for name in native.MODULES] + [f"{name}.c" for name in native.C_HELPERS]
    for name in files:
        shutil.copy2(native.COMPILED_DIR.parent / name, src / name)
    assert native.sources_digest(src) == native.sources_digest()
    seen = {native.sources_digest()}
    for name in files:
        f = src / name
        before = f.read_bytes()
        f.write_bytes(before + b"\n/* edited */\n")
        seen.add(native.sources_digest(src))
        f.write_bytes(before)
    assert len(seen) == len(files) + 1


def test_the_build_has_the_c_helpers_on_linux():
    """``build.json`` names what was built besides the engine: the C helpers, on Linux."""
    stamp, why_not = native.current_stamp()
    assert stamp is not None or not REQUIRED, why_not
    if stamp is not None:
        want = [f"_{c}" for c in native.C_HELPERS] if sys.platform.startswith("linux") else []
        assert stamp["helpers"] == want
        assert all(list(native.COMPILED_DIR.glob(f"{h}.*")) for h in want)


def test_an_edited_engine_source_runs_as_python_not_the_stale_build(tmp_path):
    """A copy of the package with its build: compiled as is; after editing one engine file, its sources run."""
    built = "compiled" if build_engine.current() else "python"
    assert built == "compiled" or not REQUIRED
    shutil.copytree(
        Path(sdschat.__file__).parent,
        tmp_path / "sdschat",
        ignore=shutil.ignore_patterns("__pycache__", "_compiled.old"),
    )
    code = (
        "import sdschat.sds as s, sdschat.sds.channel as c; from sdschat.sds import MessageChannel; "
        "print(s.native.BUILD.kind, c.__file__.endswith('.py'), "
        "len(MessageChannel('c', 'a').send(b'x', 1).data) > 0)"
    )
    r = _child(code, tmp_path)
    assert r.returncode == 0 and r.stdout.split() == [built, str(built == "python"), "True"], r.stderr
    with open(tmp_path / "sdschat" / "sds" / "incoming.py", "a") as f:
        f.write("\n# a local edit\n")
    r = _child(code, tmp_path)
    assert r.returncode == 0 and r.stdout.split() == ["python", "True", "True"], r.stderr


def test_the_python_sources_pass_the_engine_tests_and_the_waku_vectors_too():
    """Both builds are the engine: the Python one runs the engine's tests and the @waku/sds vectors as well."""
    me = "tests/sds/test_engine_build.py::test_the_python_sources_pass_the_engine_tests_and_the_waku_vectors_too"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/sds/",
            "tests/test_vectors.py",
            "tests/test_wire.py",
            "--deselect",
            me,
        ],
        cwd=ROOT,
        env={**os.environ, native.PURE_ENV: "1", "SDSCHAT_REQUIRE_COMPILED": "0"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    tail = r.stdout.strip().splitlines()[-1]
    assert r.returncode == 0 and " passed" in tail and "failed" not in tail and "skipped" not in tail, r.stdout[-3000:]


def test_build_engine_says_current_and_refuses_bad_arguments_in_one_line():
    exe = [sys.executable, "-m", "sdschat.cli.build_engine"]
    r = subprocess.run([*exe, "--bogus"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    if build_engine.current():
        r = subprocess.run(exe, capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert r.returncode == 0 and "current" in r.stderr


def test_version_says_which_engine_runs():
    r = subprocess.run(
        [sys.executable, "-m", "sdschat", "--version"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert r.returncode == 0 and r.stdout.startswith("sdschat ") and f"engine: {native.BUILD.kind}" in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "sdschat", "--version"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={**os.environ, native.PURE_ENV: "1"},
    )
    assert r.returncode == 0 and f"engine: python ({native.PURE_ENV} is set)" in r.stdout


def test_receivers_of_one_frame_share_its_log_row_and_key_in_either_build():
    """The simulator's memory rests on this: a frame's log row and (lamport, id) key are one object for all its
    receivers. (Typed ``tuple[int, str]``, the compiled build copied the key into a C struct and boxed a new tuple
    and int for every member: +39% memory at 10,000 x 1,000.)"""
    from sdschat.sds import MessageChannel
    from sdschat.sds.frame import Frame
    from sdschat.sds.wire import parse_pb

    alice = MessageChannel("c", "alice")
    out = alice.send(b"hello", 1_000)
    frame = Frame(parse_pb(out.data))
    members = [MessageChannel("c", f"m{i}") for i in range(3)]
    for m in members:
        assert m.receive_parsed(frame, 1_010)
    keys = [m._clog.keys[-1] for m in members]
    rows = [m._clog.rows[out.message_id] for m in members]
    assert keys[0] == (out.lamport_timestamp, out.message_id)
    assert all(k is keys[0] for k in keys) and all(r is rows[0] for r in rows)
    assert all(k[0] is keys[0][0] for k in keys)
