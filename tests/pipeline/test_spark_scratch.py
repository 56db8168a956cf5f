"""What a Spark session leaves in the temporary directory: nothing once ``sdschat report`` has exited (as the real
process: Spark's JVM and the report's background stop end with it), nothing at all when the command refuses a
setting before Spark starts, and only the log its error names when a session does not start."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sdschat.sim import SimParams, simulate

pytestmark = pytest.mark.timeout(300)

#: the names of what a Spark session puts in a temporary directory: our scratch folder (log settings, local dir)
#: and Spark's own (the driver's files, the block manager's, pyspark's)
SPARK_NAMES = ("sdschat-spark-", "spark-", "blockmgr-", "pyspark-")


def _report(run: Path, out: Path, tmpdir: Path, cache: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "TMPDIR": str(tmpdir), "XDG_CACHE_HOME": str(cache), **env}
    return subprocess.run(
        [sys.executable, "-m", "sdschat", "report", str(run), "--out", str(out), "--quiet"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=280,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _spark_leftovers(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.name.startswith(SPARK_NAMES))


@pytest.fixture
def run(tmp_path) -> Path:
    out = tmp_path / "run"
    simulate(SimParams(participants=4, messages=3, loss=0.1, seed=2, horizon_ms=30_000), out)
    return out


def test_a_report_leaves_no_spark_folders_in_the_temporary_directory(tmp_path, run):
    """The report writes its files while Spark stops in the background; once the command has exited, the
    temporary directory it was given holds none of the session's folders. The class archive is off (the
    command line's reading of ``SDSCHAT_SPARK_CLASS_ARCHIVE``): the cache folder gets none either."""
    tmpdir, cache = tmp_path / "tmp", tmp_path / "cache"
    tmpdir.mkdir()
    cache.mkdir()
    p = _report(run, tmp_path / "report", tmpdir, cache, SDSCHAT_SPARK_CLASS_ARCHIVE="off")
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith(f"wrote {tmp_path / 'report' / 'report.md'}"), p.stdout
    assert _spark_leftovers(tmpdir) == [] and list(tmpdir.iterdir()) == [], sorted(tmpdir.rglob("*"))
    assert (tmp_path / "report" / "spark-jvm.log").is_file()  # the JVM's log is the report's, in --out
    assert list(cache.rglob("spark-classes-*")) == [], sorted(cache.rglob("*"))


def test_a_bad_archive_switch_is_refused_in_one_line_before_spark_starts(tmp_path, run):
    tmpdir, cache = tmp_path / "tmp", tmp_path / "cache"
    tmpdir.mkdir()
    cache.mkdir()
    p = _report(run, tmp_path / "report", tmpdir, cache, SDSCHAT_SPARK_CLASS_ARCHIVE="maybe")
    assert p.returncode == 2, p.stderr
    assert p.stderr == (
        "sdschat: SDSCHAT_SPARK_CLASS_ARCHIVE='maybe' is not yes or no: use 1/0, true/false, yes/no or on/off\n"
    )
    assert p.stdout == ""
    assert not (tmp_path / "report").exists()  # refused before the command ran
    assert list(tmpdir.iterdir()) == [] and list(cache.iterdir()) == []  # no Spark was started


def test_a_session_that_does_not_start_keeps_only_the_log_its_error_names(tmp_path, monkeypatch):
    from sdschat.pipeline.spark import SparkJobError, launch

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(SparkJobError) as failed:
        launch("sdschat-no-start", driver_memory="lots", class_archive=False)
    (scratch,) = tmp_path.iterdir()
    assert scratch.name.startswith("sdschat-spark-")
    assert [p.name for p in scratch.iterdir()] == ["spark-jvm.log"]  # no log settings, no local dir
    assert str(scratch / "spark-jvm.log") in str(failed.value)
