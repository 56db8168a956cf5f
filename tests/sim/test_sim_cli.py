"""``sdschat simulate``: output, summary line, and one-line errors for bad input."""

from __future__ import annotations

import json

import pytest

from sdschat.cli import main


def test_simulate_writes_outputs_and_summary(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "simulate",
            "--participants",
            "8",
            "--messages",
            "6",
            "--loss",
            "0.1",
            "--latency-ms",
            "10:50",
            "--set",
            "repair_t_min_ms=1000",
            "--set",
            "repair_t_max_ms=3000",
            "--seed",
            "4",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    # the summary is the command's output (stdout); progress would be on stderr, and only on a terminal
    written = capsys.readouterr()
    assert written.out.startswith("simulated 8 participants, 6 messages") and f"to {out}\n" in written.out
    assert written.out.count("\n") == 2 and written.err == ""
    assert (out / "events-00000.parquet").is_file()
    assert (out / "frames.parquet").is_file() and (out / "logs.parquet").is_file()
    meta = json.loads((out / "meta.json").read_text())
    assert meta["params"]["latency_ms"] == [10, 50]
    assert meta["engine_config"]["repair"]["t_min_ms"] == 1000
    assert meta["engine_config"]["causal_history_size"] == 10
    # rerunning into the same directory replaces the output
    assert main(["simulate", "--participants", "4", "--messages", "2", "--quiet", "--out", str(out)]) == 0
    assert capsys.readouterr() == ("", "")
    assert json.loads((out / "meta.json").read_text())["participants"] == 4


def test_simulate_options_reach_the_engine(tmp_path):
    out = tmp_path / "run"
    assert (
        main(
            [
                "simulate",
                "--participants",
                "300",
                "--messages",
                "1",
                "--causal-history",
                "3",
                "--bloom-capacity",
                "500",
                "--no-repair",
                "--churn",
                "0.1:1000",
                "--duplicate",
                "0.2",
                "--settle",
                "clean",
                "--horizon-ms",
                "1000",
                "--workers",
                "1",
                "--quiet",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    meta = json.loads((out / "meta.json").read_text())
    cfg = meta["engine_config"]
    assert cfg["causal_history_size"] == 3 and cfg["bloom_capacity"] == 500 and cfg["repair"]["enabled"] is False
    assert cfg["repair"]["num_response_groups"] == 3  # 300 // 128 + 1
    assert meta["params"]["churn"] == [0.1, 1000] and meta["params"]["settle"] == "clean"


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--participants", "1"], "--participants: must be >= 2"),
        (["--loss", "1.2"], "--loss: must be between 0 and 1"),
        (["--loss", "x"], "--loss: not a number"),
        (["--latency-ms", "200:20"], "--latency-ms"),
        (["--latency-ms", "fast"], "--latency-ms"),
        (["--churn", "0.5"], "--churn"),
        (["--set", "nonsense=1"], "unknown engine setting 'nonsense'"),
        (["--set", "sync_interval_ms"], "NAME=VALUE"),
        (["--set", "sync_interval_ms=-5"], "sync_interval_ms must be >= 0"),
        (["--set", "repair_num_response_groups=3"], "--response-groups"),
        (["--senders", "50", "--participants", "10"], "senders must be between 1 and participants"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, argv, fragment):
    code = main(["simulate", *argv, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2
    assert fragment in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "run" / "meta.json").exists()


def test_missing_out_and_unusable_out(tmp_path, capsys):
    assert main(["simulate", "--participants", "3"]) == 2
    assert "--out" in capsys.readouterr().err
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert main(["simulate", "--out", str(other)]) == 2
    err = capsys.readouterr().err
    assert "non-empty directory" in err and err.count("\n") == 1
    afile = tmp_path / "file"
    afile.write_text("x")
    assert main(["simulate", "--out", str(afile)]) == 2
    assert "not a directory" in capsys.readouterr().err
