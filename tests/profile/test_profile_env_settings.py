"""Settings from the environment: one reader of ``$SDSCHAT_HOME``, one set of yes/no words, the engine's reader
held to the same answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from sdschat.profile import ProfileError, resolve_paths
from sdschat.profile.settings import (
    ENGINE_FLAGS,
    FLAG_VARIABLES,
    NO_WORDS,
    YES_WORDS,
    SettingError,
    check_flags,
    env_flag,
    env_home,
    parse_flag,
)
from sdschat.sds import native

WORDS = [*sorted(YES_WORDS), *sorted(NO_WORDS), "ON", "Off", " yes ", "TRUE", "False", "No", "", "  "]
BAD = ["maybe", "2", "enabled", "y", "n", "-1", "offf", "python"]


@pytest.mark.parametrize("value", WORDS)
def test_yes_and_no_in_any_case(value: str) -> None:
    word = value.strip().lower()
    expected = None if not word else word in YES_WORDS
    assert parse_flag("SDSCHAT_X", value) is expected
    assert env_flag("SDSCHAT_X", True, {"SDSCHAT_X": value}) is (True if expected is None else expected)
    assert env_flag("SDSCHAT_X", False, {}) is False


@pytest.mark.parametrize("value", BAD)
def test_anything_else_is_refused_naming_the_variable(value: str) -> None:
    with pytest.raises(SettingError, match=r"^SDSCHAT_X=.* is not yes or no") as caught:
        env_flag("SDSCHAT_X", False, {"SDSCHAT_X": value})
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value, ProfileError)  # so the command line says it in one line


@pytest.mark.parametrize("value", [*WORDS, *BAD])
def test_the_engine_reads_its_variables_by_the_same_words(value: str, monkeypatch) -> None:
    for name in ENGINE_FLAGS:
        monkeypatch.setenv(name, value)
        for default in (False, True):
            try:
                ours: bool | str = env_flag(name, default)
            except SettingError as exc:
                ours = str(exc)
            try:
                engines: bool | str = native.env_flag(name, default)
            except ValueError as exc:
                engines = str(exc)
            assert ours == engines


def test_pure_engine_off_no_longer_turns_it_on(monkeypatch) -> None:
    """``SDSCHAT_PURE_ENGINE=off`` used to force the Python sources (any value but 0, no, false did)."""
    for off in ("off", "OFF", "0", "no", "false", ""):
        monkeypatch.setenv(native.PURE_ENV, off)
        assert native.python_forced() is False
    for on in ("on", "1", "yes", "TRUE"):
        monkeypatch.setenv(native.PURE_ENV, on)
        assert native.python_forced() is True
    monkeypatch.delenv(native.PURE_ENV)
    assert native.python_forced() is False


def test_huge_pages_are_switched_off_by_a_no(monkeypatch) -> None:
    for off in ("0", "no", "Off", "false"):
        monkeypatch.setenv(native.HUGE_PAGES_ENV, off)
        assert native.huge_page_arenas(dry_run=True).startswith(f"off ({native.HUGE_PAGES_ENV}=")
    monkeypatch.setenv(native.HUGE_PAGES_ENV, "sometimes")
    with pytest.raises(ValueError, match="SDSCHAT_HUGE_PAGES='sometimes' is not yes or no"):
        native.huge_page_arenas(dry_run=True)


def test_check_flags_names_the_first_bad_variable() -> None:
    check_flags({})
    check_flags({name: "on" for name in FLAG_VARIABLES})
    with pytest.raises(SettingError, match="SDSCHAT_SPARK_CLASS_ARCHIVE"):
        check_flags({"SDSCHAT_PURE_ENGINE": "0", "SDSCHAT_SPARK_CLASS_ARCHIVE": "nope"})


def test_home_is_read_in_one_place(tmp_path: Path, monkeypatch) -> None:
    from sdschat.cli.wiring import data_dir

    assert env_home({}) is None
    assert env_home({"SDSCHAT_HOME": str(tmp_path)}) == tmp_path
    for empty in ("", "   "):
        with pytest.raises(SettingError, match="SDSCHAT_HOME is set but empty"):
            env_home({"SDSCHAT_HOME": empty})
    monkeypatch.setenv("SDSCHAT_HOME", str(tmp_path))
    assert resolve_paths() == resolve_paths(tmp_path)
    assert data_dir() == resolve_paths().data == tmp_path  # the databases outside a profile agree
    assert resolve_paths(tmp_path / "other").data == tmp_path / "other"  # --home wins
    monkeypatch.setenv("SDSCHAT_HOME", "")
    with pytest.raises(SettingError):
        resolve_paths()
    with pytest.raises(SettingError):
        data_dir()  # (it used to fall back to the platform's folder silently)
    monkeypatch.delenv("SDSCHAT_HOME")
    assert data_dir() == resolve_paths().data
