"""One way to log: ``--log-level`` and ``--log-file`` on every command (before or after its name), set up once.

Records go to standard error by default (``sdschat: level: logger: text``), to ``--log-file`` when it is given
(0600, its folder made 0700), and for the window to ``sdschat.log`` in the profile's data folder. No secret reaches
a log.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sdschat.cli.logs import LOG_NAME, redact, setup_logging
from sdschat.cli.main import COMMANDS, build_parser

pytestmark = pytest.mark.timeout(120)

SDSCHAT = Path(sys.executable).with_name("sdschat")


def broker(*argv, tmp_path: Path) -> tuple[str, str]:
    """Run ``sdschat ARGV`` (an embedded broker on a free port) until it listens, stop it with Ctrl-C; its stdout
    and stderr."""
    out, err = tmp_path / "out", tmp_path / "err"
    with open(out, "w") as o, open(err, "w") as e:
        p = subprocess.Popen(
            [str(SDSCHAT), *map(str, argv)],
            stdout=o,
            stderr=e,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        try:
            deadline = time.monotonic() + 30
            while "listening" not in out.read_text() and time.monotonic() < deadline and p.poll() is None:
                time.sleep(0.05)
            assert "listening" in out.read_text(), err.read_text()
        finally:
            p.send_signal(signal.SIGINT)
            p.wait(timeout=30)
    return out.read_text(), err.read_text()


def test_debug_to_standard_error_by_default(tmp_path: Path) -> None:
    _, err = broker("broker", "--port", "0", "--log-level", "debug", tmp_path=tmp_path)
    assert "sdschat: debug: sdschat.transport.broker: embedded broker listening on 127.0.0.1:" in err
    _, err = broker("broker", "--port", "0", tmp_path=tmp_path)  # warning and up only
    assert "embedded broker listening" not in err


@pytest.mark.parametrize("where", ["before", "after"])
def test_log_file_before_or_after_the_command(tmp_path: Path, where: str) -> None:
    log = tmp_path / "new" / "folder" / "s.log"
    flags = ["--log-file", log, "--log-level", "DEBUG"]
    argv = [*flags, "broker", "--port", "0"] if where == "before" else ["broker", "--port", "0", *flags]
    _, err = broker(*argv, tmp_path=tmp_path)
    assert err == ""
    text = log.read_text()
    assert "DEBUG sdschat.transport.broker: embedded broker listening on 127.0.0.1:" in text
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700


def test_a_bad_level_is_one_line(tmp_path: Path) -> None:
    p = subprocess.run(
        [str(SDSCHAT), "keygen", str(tmp_path / "k"), "--log-level", "loud"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert p.returncode == 2
    assert p.stderr == (
        "sdschat keygen: argument --log-level: one of debug, info, warning, error, not 'loud' (see --help)\n"
    )


def test_every_command_takes_the_flags() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(COMMANDS)
    for name, command in sub.choices.items():
        assert {"--log-level", "--log-file"} <= set(command._option_string_actions), name
    args = parser.parse_args(["keygen", "k", "--log-level", "info", "--log-file", "x.log"])
    assert (args.log_level, args.log_file) == (logging.INFO, Path("x.log"))
    args = parser.parse_args(["--log-level", "error", "keygen", "k"])
    assert args.log_level == logging.ERROR and not hasattr(args, "log_file")


@pytest.fixture
def restored_logging():
    from sdschat.cli.logs import _LIBRARIES

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in _LIBRARIES}
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
            h.close()
    root.setLevel(level)
    for name, was in levels.items():
        logging.getLogger(name).setLevel(was)


def test_the_window_logs_to_the_profiles_data_folder(tmp_path: Path, restored_logging) -> None:
    home = tmp_path / "home"
    home.mkdir()
    setup_logging(argparse.Namespace(command=None, home=home))
    logging.getLogger("sdschat.node").warning("a warning for %s", "the window")
    logging.getLogger("sdschat.node").info("not at the default level")
    for h in logging.getLogger().handlers:
        h.flush()
    log = home / LOG_NAME
    text = log.read_text()
    assert "WARNING sdschat.node: a warning for the window" in text and "not at the default level" not in text
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_configured_once_per_run(tmp_path: Path, restored_logging) -> None:
    for _ in range(3):
        setup_logging(argparse.Namespace(command="bot", log_file=tmp_path / "x.log", log_level=logging.INFO))
    mine = [h for h in logging.getLogger().handlers if getattr(h, "_sdschat", False)]
    assert len(mine) == 1
    assert logging.getLogger("sdschat.node").getEffectiveLevel() == logging.INFO
    assert logging.getLogger("aiosqlite").getEffectiveLevel() == logging.WARNING  # the libraries stay quiet


def test_secrets_are_masked(monkeypatch) -> None:
    monkeypatch.setenv("SDSCHAT_IDENTITY_PASSPHRASE", "s3cret-phrase")
    assert redact("connect mqtts://zed:pa55w0rd@example.org:8883/x") == "connect mqtts://zed:***@example.org:8883/x"
    assert redact("join sdschat:AbCdEfGhIjKlMnOpQrStUv_-09 now") == "join sdschat:*** now"
    assert redact("sdschat: an ordinary line") == "sdschat: an ordinary line"
    assert redact("unlock with s3cret-phrase") == "unlock with ***"
    assert redact("mqtt://127.0.0.1:1883") == "mqtt://127.0.0.1:1883"


@pytest.mark.parametrize("command", ["bot", "store"])
def test_bot_and_store_log_where_they_are_told(tmp_path: Path, command: str) -> None:
    """The headless commands log too (before, nothing set their logging up): here, a broker that is not there."""
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"mqtt://127.0.0.1:{s.getsockname()[1]}"
    log = tmp_path / "logs" / f"{command}.log"
    key = tmp_path / "k.key"
    assert subprocess.run([str(SDSCHAT), "keygen", str(key)], capture_output=True, timeout=60).returncode == 0
    argv = ["bot", "--name", "ann", "--key-file", key, "--count", "1"] if command == "bot" else ["store"]
    p = subprocess.run(
        [
            str(SDSCHAT),
            *map(str, argv),
            "--broker",
            url,
            "--db",
            str(tmp_path / "x.db"),
            "--log-level",
            "debug",
            "--log-file",
            str(log),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert p.returncode == 2 and p.stderr == f"sdschat: cannot reach MQTT broker at {url[7:]}: Connection refused\n"
    assert f"DEBUG sdschat.transport: transport state: connecting (connecting to {url[7:]})" in log.read_text()
