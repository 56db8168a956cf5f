"""What a new user met in the first hour, as the real ``sdschat`` process over a real profile and databases (a bot
over mosquitto wrote the messages): a search word that starts with ``-``, and ``export`` on a profile of one
channel. (A closed pipe: test_cli_pipes.py; the first start without a channel: test_cli_first_run.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from brokers import Mosquitto, mosquitto_binary

pytestmark = pytest.mark.timeout(120)

SDSCHAT = [sys.executable, "-m", "sdschat"]
ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}


def sdschat(*argv) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*SDSCHAT, *map(str, argv)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A profile (``zed``) in one channel, #team, holding 3 messages ``make -deploy {i}`` and 2 ``lunch {i}``."""
    root = tmp_path_factory.mktemp("first-hour")
    broker = Mosquitto(mosquitto_binary(), root)
    broker.start()
    home = root / "zed"
    try:
        assert sdschat("init", "--name", "zed", "--broker", broker.url, "--home", home).returncode == 0
        assert sdschat("new", "team", "--home", home).returncode == 0
        for text, count in (("make -deploy {i}", 3), ("lunch {i}", 2)):
            # alone, nobody acknowledges: the bot gives up waiting (exit 3); its messages are stored
            p = sdschat(
                "bot",
                "--channel",
                "team",
                "--count",
                count,
                "--interval",
                0,
                "--max-runtime",
                1,
                "--quiet",
                "--text",
                text,
                "--home",
                home,
            )
            assert p.returncode == 3, p.stderr
        yield home
    finally:
        broker.close()


@pytest.mark.parametrize(
    "argv",
    [
        ["-deploy"],
        ["--", "-deploy"],
        ["-deploy", "--channel", "team"],
        ["--channel", "team", "-deploy", "--limit", "10"],
        ["--lim", "10", "-deploy"],  # an abbreviated option is still the option
    ],
    ids=lambda a: " ".join(a),
)
def test_search_takes_a_word_that_starts_with_a_dash(home, argv):
    p = sdschat("search", "--home", home, *argv)
    lines = p.stdout.splitlines()
    assert (p.returncode, p.stderr) == (0, "") and len(lines) == 3, (p.returncode, p.stderr)
    assert all(line.startswith("#team") and "make -deploy" in line for line in lines)


def test_search_options_stay_options_and_words_after_double_dash_are_words(home):
    p = sdschat("search", "-deploy", "--json", "--limit", 2, "--home", home)
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert p.returncode == 0 and len(rows) == 2 and all("-deploy" in r["text"] for r in rows)
    p = sdschat("search", "-hello", "--home", home)  # not -h (help) with "ello"
    assert (p.returncode, p.stdout) == (0, "") and "no messages match '-hello'" in p.stderr
    p = sdschat("search", "--home", home, "--", "lunch", "--json")  # --json after -- is a word: nothing has it
    assert (p.returncode, p.stdout) == (0, "") and "no messages match 'lunch --json'" in p.stderr
    p = sdschat("search", "--limit", "-deploy", "--home", home)  # an option's value is its value
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--limit" in p.stderr
    p = sdschat("search", "--help")
    assert p.returncode == 0 and "sdschat search -deploy" in " ".join(p.stdout.split())


def test_export_defaults_to_the_only_channel(home):
    named = sdschat("export", "--channel", "team", "--home", home)
    alone = sdschat("export", "--home", home)
    assert alone.returncode == 0 and alone.stdout == named.stdout and named.returncode == 0
    texts = [r["text"] for r in map(json.loads, alone.stdout.splitlines()) if r["text"]]  # (and zed's join)
    assert sorted(texts) == sorted([f"make -deploy {i}" for i in range(3)] + [f"lunch {i}" for i in range(2)])
    events = sdschat("export", "--events", "--home", home)
    kinds = [json.loads(line)["kind"] for line in events.stdout.splitlines()]
    assert events.returncode == 0 and kinds.count("sent") == len(alone.stdout.splitlines())  # one per message


def test_export_with_several_channels_or_none_says_which_in_one_line(home, tmp_path):
    two = tmp_path / "two"
    assert sdschat("init", "--name", "two", "--home", two).returncode == 0
    p = sdschat("export", "--home", two)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "sdschat new" in p.stderr and p.stdout == ""
    for name in ("alpha", "beta"):
        assert sdschat("new", name, "--home", two).returncode == 0
    p = sdschat("export", "--home", two)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1, p.stderr
    assert "alpha, beta" in p.stderr and "--channel" in p.stderr
    p = sdschat("export", "--channel", "alpha", "--home", two)  # joined, nothing stored yet
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "#alpha has nothing stored yet" in p.stderr
    p = sdschat("export", "--channel", "gamma", "--home", two)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "gamma" in p.stderr and "alpha, beta" in p.stderr
