"""One error policy at the command line's edge, as the installed ``sdschat`` meets it.

A failure a person can act on (a part's own error: a damaged profile, a bad token, a key file in the way, a
message id that is none, a yes/no variable that is neither) is one line ``sdschat: ...`` and exit status 2,
caught in one place. Anything else is an internal error: one line ``sdschat: internal error (Type: text); the
traceback is in PATH`` and exit status 70, the traceback in the log file (0600, in a 0700 folder).

The unexpected failure used here is an honest one: the command's output goes to ``/dev/full``, so writing it
fails with ``OSError`` (no space left on device), which no part of the project raises on purpose.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sdschat.cli.errors import EXIT_INTERNAL, USER_ERROR_BASES, CliError, user_errors
from sdschat.cli.main import COMMANDS, main

pytestmark = pytest.mark.timeout(120)

SDSCHAT = Path(sys.executable).with_name("sdschat")
INTERNAL = re.compile(r"^sdschat: internal error \((\w+): (.+)\); the traceback is in (.+)$")


def run(*argv, env: dict | None = None, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(SDSCHAT), *map(str, argv)],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})},
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def one_line(p: subprocess.CompletedProcess, code: int) -> str:
    """The one line ``p`` wrote on stderr (asserting it exited ``code`` with exactly that)."""
    lines = p.stderr.splitlines()
    assert p.returncode == code, (p.returncode, p.stderr)
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    return lines[0]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A profile with one channel (no broker needed: nothing here connects)."""
    home = tmp_path_factory.mktemp("policy") / "zed"
    assert run("init", "--name", "zed", "--broker", "mqtt://127.0.0.1:1", "--home", home).returncode == 0
    assert run("new", "team", "--home", home).returncode == 0
    return home


def test_project_errors_are_one_line_and_exit_2(home: Path, tmp_path: Path) -> None:
    # a part's error that used to be re-worded by hand, now said by the one catch: the same line
    line = one_line(run("join", "sdschat:" + "A" * 40, "--home", home), 2)
    assert line.startswith("sdschat: invite token")
    key = tmp_path / "k.key"
    assert run("keygen", key).returncode == 0
    assert one_line(run("keygen", key), 2) == f"sdschat: key file already exists: {key} (refusing to overwrite)"
    assert (
        one_line(run("inspect", "zz", "--home", home), 2)
        == "sdschat: 'zz' is not a message id (hex, at least 6 characters)"
    )
    assert one_line(run("search", 'a"', "--home", home), 2).startswith("sdschat: unclosed quote in the search")


def test_a_damaged_profile_is_one_line(home: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for name in ("profile.toml", "identity.key"):
        (damaged / name).write_bytes((home / name).read_bytes())
    (damaged / "channels.json").write_text('{"version": 1, "channels": [5]}')
    line = one_line(run("channels", "--home", damaged), 2)
    assert line == f"sdschat: {damaged / 'channels.json'} is damaged"


@pytest.mark.parametrize("name", ["SDSCHAT_PURE_ENGINE", "SDSCHAT_HUGE_PAGES", "SDSCHAT_SPARK_CLASS_ARCHIVE"])
def test_a_switch_that_is_neither_yes_nor_no_is_refused(name: str) -> None:
    line = one_line(run("--version", env={name: "maybe"}), 2)
    assert line == f"sdschat: {name}='maybe' is not yes or no: use 1/0, true/false, yes/no or on/off"
    ok = run("--version", env={name: "Off"})
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr


def test_an_empty_home_is_refused_once() -> None:
    line = one_line(run("channels", env={"SDSCHAT_HOME": " "}), 2)
    assert line == "sdschat: SDSCHAT_HOME is set but empty: name a folder, or unset it"


def _private(path: Path) -> None:
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, oct(path.stat().st_mode)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, oct(path.parent.stat().st_mode)


needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")


@needs_dev_full
def test_an_unexpected_failure_is_one_line_with_its_traceback_in_the_profiles_log(home: Path, tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        p = run("--home", home, "keygen", tmp_path / "k.key", stdout=full)
    m = INTERNAL.match(one_line(p, EXIT_INTERNAL))
    assert m is not None, p.stderr
    assert m[1] == "OSError" and "No space left on device" in m[2]
    log = Path(m[3])
    assert log == home / "sdschat.log"  # the profile's data folder (--home puts it in one folder)
    _private(log)
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "OSError" in text and "keygen_run" in text


@needs_dev_full
def test_the_traceback_goes_to_log_file_or_a_private_temporary_folder(tmp_path: Path) -> None:
    chosen = tmp_path / "logs" / "mine.log"
    with open("/dev/full", "w") as full:
        p = run("keygen", tmp_path / "a.key", "--log-file", chosen, stdout=full)
    m = INTERNAL.match(one_line(p, EXIT_INTERNAL))
    assert m is not None and Path(m[3]) == chosen
    _private(chosen)
    # no profile, no --log-file: a folder of this user's under the temporary folder
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with open("/dev/full", "w") as full:
        p = run(
            "keygen",
            tmp_path / "b.key",
            stdout=full,
            env={"TMPDIR": str(tmp), "SDSCHAT_HOME": str(tmp_path / "nobody")},
        )
    m = INTERNAL.match(one_line(p, EXIT_INTERNAL))
    assert m is not None, p.stderr
    log = Path(m[3])
    assert log.parent.parent == tmp and log.name == "sdschat.log"
    _private(log)
    assert "Traceback" in log.read_text()


# ------------------------------------------------------------------------------------------- in this process


@pytest.fixture
def restored_logging():
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
            h.close()
    root.setLevel(level)


def _command(monkeypatch, fail) -> None:
    """``keygen`` replaced by a command that calls ``fail``."""
    configure = COMMANDS["keygen"][0]

    def run_it(args):
        fail()

    monkeypatch.setitem(COMMANDS, "keygen", (configure, run_it, "a command that fails"))


def test_a_bug_is_reported_once_and_its_secrets_stay_out_of_the_log(
    monkeypatch, tmp_path, capsys, restored_logging
) -> None:
    monkeypatch.setenv("SDSCHAT_PASSPHRASE", "correct horse battery")

    def fail():
        raise RuntimeError("mqtt://zed:hunter22@broker.example sdschat:AbCdEfGhIjKlMnOpQrStUvWx correct horse battery")

    _command(monkeypatch, fail)
    log = tmp_path / "log" / "s.log"
    assert main(["keygen", str(tmp_path / "k"), "--log-file", str(log)]) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sdschat: internal error (RuntimeError: ")
    assert err.rstrip().endswith(f"the traceback is in {log}")
    text = log.read_text()
    assert "RuntimeError" in text and "Traceback" in text
    for secret in ("hunter22", "AbCdEfGhIjKlMnOpQrStUvWx", "correct horse battery"):
        assert secret not in text
    assert "mqtt://zed:***@broker.example" in text and "sdschat:***" in text


def test_every_parts_user_error_is_one_line(monkeypatch, tmp_path, capsys, restored_logging) -> None:
    from sdschat.crypto import CryptoError
    from sdschat.node import UserError
    from sdschat.store import StoreError
    from sdschat.transport import TransportError

    for error in (
        UserError("you cannot do that here"),
        StoreError("x.db is damaged"),
        CryptoError("a bad key\nfile"),
        TransportError("broker refused"),
        CliError("no", code=3),
    ):

        def fail(error=error):
            raise error

        _command(monkeypatch, fail)
        code = main(["keygen", str(tmp_path / "k")])
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert code == (3 if isinstance(error, CliError) else 2)
        assert err == "sdschat: " + " ".join(str(error).split("\n")) + "\n"


def test_the_list_of_user_errors_names_real_classes() -> None:
    import importlib

    for module, name in USER_ERROR_BASES:
        try:
            loaded = importlib.import_module(module)
        except ImportError:  # the pipeline extra is not installed
            continue
        assert issubclass(getattr(loaded, name), Exception), (module, name)
        assert getattr(loaded, name) in user_errors()
    assert not issubclass(ValueError, user_errors())
