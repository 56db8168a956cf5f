"""``sdschat simulate``'s options come from the :class:`SimParams` fields: one default, one help, one flag each."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from sdschat.cli import main
from sdschat.cli.main import build_parser
from sdschat.sim import SimParams
from sdschat.sim.params import OPTION, command_line_fields


def _parse(*argv: str):
    from sdschat.cli.pipeline import _sim_params

    args = build_parser().parse_args(["simulate", *argv, "--out", "unused"])
    return args, _sim_params(args)


def test_every_scenario_field_has_an_option_and_the_parsed_defaults_are_the_fields():
    fields = {f.name for f, _ in command_line_fields()}
    # what a run is, less what only a program sets (the channel's name and the virtual clock's start)
    assert fields == {f.name for f in dataclasses.fields(SimParams)} - {"channel_id", "start_ms"}
    _args, params = _parse()
    assert params == SimParams()


def test_each_option_sets_its_field():
    _args, params = _parse(
        "--participants",
        "7",
        "--rate",
        "2.5",
        "--senders",
        "3",
        "--loss",
        "0.25",
        "--latency-ms",
        "5:9",
        "--churn",
        "0.1:3000",
        "--stores",
        "1",
        "--store-latency-ms",
        "6:8",
        "--store-outages",
        "0.2:1000",
        "--no-repair",
        "--response-groups",
        "2",
        "--set",
        "sync_interval_ms=1000",
        "--set",
        "repair_t_min_ms=500",
        "--settle",
        "clean",
        "--horizon-ms",
        "0",
        "--seed",
        "9",
    )
    assert params == SimParams(
        participants=7,
        rate=2.5,
        senders=3,
        loss=0.25,
        latency_ms=(5, 9),
        churn=(0.1, 3000),
        stores=1,
        store_latency_ms=(6, 8),
        store_outages=(0.2, 1000),
        repair=False,
        response_groups=2,
        overrides={"sync_interval_ms": "1000", "repair_t_min_ms": "500"},
        settle="clean",
        horizon_ms=0,
        seed=9,
    )


def test_the_help_shows_each_fields_own_default(capsys):
    with pytest.raises(SystemExit) as done:
        main(["simulate", "--help"])
    assert done.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    for needle in (
        "group size (default 100)",
        "(default 20:200)",
        "(default 10, as the node)",
        "(default 10000: 18,752-byte filters)",
        "SDS-R repair (default on)",
        "(default: everyone)",
        "(default 600000)",
        "(default continue)",
    ):
        assert needle in help_text, needle
    # a changed default shows in the help at once: it is read from the field
    participants = next(f for f, _ in command_line_fields() if f.name == "participants")
    assert f"group size (default {participants.default})" in help_text
    assert participants.metadata[OPTION].minimum == 2


def test_other_commands_neither_import_the_simulator_nor_get_its_options():
    code = (
        "import sys\n"
        "from sdschat.cli.main import build_parser\n"
        "build_parser().parse_args(['channels'])\n"
        "print('sdschat.sim' in sys.modules, 'numpy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "False"], out.stderr
