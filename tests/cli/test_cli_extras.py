"""A chat-only install: chat never imports the pipeline's packages; the pipeline's commands name the extra."""

from __future__ import annotations

import subprocess
import sys

import pytest

PIPELINE = ("numpy", "pyarrow", "pyspark", "matplotlib")

# runs the CLI as an install without the pipeline extra sees it: those imports fail
WITHOUT_PIPELINE = (
    "import sys\n"
    f"for m in {PIPELINE!r}: sys.modules[m] = None\n"
    "from sdschat.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def run_without_pipeline(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_PIPELINE, *argv], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--participants", "4", "--messages", "1", "--out", "{tmp}/sim"],
        ["simulate", "--latency-ms", "1:2", "--out", "{tmp}/sim"],
        ["report", "{tmp}/nothing", "--out", "{tmp}/rep"],
        ["sweep", "--grid", "{tmp}/grid.toml", "--out", "{tmp}/sw"],
        ["export", "--db", "{tmp}/x.db", "--format", "parquet", "--out", "{tmp}/x.parquet"],
    ],
)
def test_pipeline_commands_name_the_extra_in_one_line(tmp_path, argv) -> None:
    (tmp_path / "x.db").write_bytes(b"")
    result = run_without_pipeline(*[a.format(tmp=tmp_path) for a in argv])
    assert result.returncode == 2, result.stderr
    assert "pip install 'sdschat[pipeline]'" in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "sim").exists() and not (tmp_path / "rep").exists()


def test_chat_commands_work_without_the_pipeline() -> None:
    result = run_without_pipeline("--help")
    assert result.returncode == 0 and "demo" in result.stdout, result.stderr
    result = run_without_pipeline("demo", "--participants", "9")
    assert result.returncode == 2 and "between 1 and 8" in result.stderr


def test_the_chat_path_imports_none_of_the_pipeline() -> None:
    code = (
        "import sys\n"
        "import sdschat.cli, sdschat.cli.chat, sdschat.ui.app, sdschat.node, sdschat.storenode, sdschat.export\n"
        f"print(sorted(m for m in {PIPELINE!r} if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
