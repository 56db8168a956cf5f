"""The Spark JVM's class-data archive (sdschat.pipeline.spark.ClassArchive): made once, private, then mapped."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time

import pytest

from sdschat.pipeline.spark import ClassArchive, _end_jvm, spark_session
from sdschat.profile.settings import SPARK_CLASS_ARCHIVE_ENV, SettingError, spark_class_archive


def _archive(folder) -> ClassArchive:
    archive = ClassArchive.for_this_machine(folder)
    assert archive is not None, "pyspark and java are installed: the archive has a key"
    return archive


def test_the_first_session_makes_the_archive_privately_and_the_next_one_maps_it(tmp_path):
    folder = tmp_path / "cache" / "sdschat"
    archive = _archive(folder)
    folder.mkdir(parents=True, mode=0o755)
    stale = folder / f"spark-classes-{archive.where}-0123456789abcdef.jsa"  # an earlier Spark's or JDK's
    stale.write_bytes(b"old")
    with spark_session("sdschat-cds-make", log_dir=tmp_path / "one", class_archive=archive) as spark:
        assert spark.range(10).count() == 10
        assert archive.making and not archive.path.exists()  # written when the JVM exits, not before
    assert archive.path.is_file() and archive.path.stat().st_size > 1_000_000
    assert stat.S_IMODE(archive.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    # no temporary file, no stale archive left; the note of where its jars are
    note = f"spark-classes-{archive.where}.path"
    assert sorted(p.name for p in folder.iterdir()) == sorted([archive.path.name, note])
    assert (folder / note).read_text() == str(archive.jars)

    # the next session maps it: Spark's classes come from the archive ("shared objects file (top)": the dynamic
    # archive, over the JDK's own), not from the jars
    log = tmp_path / "classes.log"
    again = _archive(folder)
    conf = {"spark.driver.extraJavaOptions": f"-Xlog:class+load=info:file={log}"}
    with spark_session("sdschat-cds-use", log_dir=tmp_path / "two", class_archive=again, conf=conf) as spark:
        assert spark.range(10).count() == 10
        assert not again.making
        args = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
        assert f"-XX:SharedArchiveFile={archive.path}" in args
    loaded = [line for line in log.read_text().splitlines() if " org.apache.spark.SparkContext " in line]
    assert loaded and "shared objects file (top)" in loaded[0], loaded


def test_a_damaged_archive_is_ignored_by_the_jvm(tmp_path):
    archive = _archive(tmp_path)
    archive.path.write_bytes(b"not an archive" * 1000)
    os.chmod(archive.path, 0o600)
    with spark_session("sdschat-cds-damaged", log_dir=tmp_path / "log", class_archive=archive) as spark:
        assert spark.range(10).count() == 10  # the JVM checks the archive's header and runs without it
        assert not archive.making


def test_an_archive_someone_else_could_write_is_not_mapped(tmp_path):
    archive = _archive(tmp_path)
    archive.path.write_bytes(b"x" * 100)
    os.chmod(archive.path, 0o666)
    assert not archive.usable()
    options = archive.jvm_options()  # makes a new one instead
    assert "SharedArchiveFile" not in options and "-XX:ArchiveClassesAtExit=" in options and archive.making
    os.chmod(archive.path, 0o600)
    assert archive.usable() and archive.jvm_options().startswith(f"-XX:SharedArchiveFile={archive.path} ")
    archive.path.unlink()
    archive.path.symlink_to(tmp_path / "elsewhere.jsa")  # a link is not the file itself
    (tmp_path / "elsewhere.jsa").write_bytes(b"x" * 100)
    assert not archive.usable()


def test_a_failed_dump_leaves_nothing_behind(tmp_path):
    archive = _archive(tmp_path)
    old, recent = tmp_path / ".spark-classes-x.1.tmp", tmp_path / ".spark-classes-x.2.tmp"
    old.write_bytes(b"dump of a JVM that died")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    recent.write_bytes(b"another JVM still writing")
    assert "-XX:ArchiveClassesAtExit=" in archive.jvm_options()
    assert not old.exists() and recent.exists()  # an hour old: left behind; recent: maybe still being written
    recent.unlink()
    assert not archive.adopt()  # the JVM wrote nothing
    assert list(tmp_path.iterdir()) == []


def test_making_one_keeps_the_archives_of_other_live_installs_and_removes_the_rest(tmp_path):
    """Two checkouts (two virtualenvs, two pyspark installs) keep one archive each instead of removing each
    other's, which made every switch remake one (~10 s, 190 MB); archives of installs that are gone go."""
    archive = _archive(tmp_path)
    other_jars = tmp_path / "other-venv" / "jars"
    other_jars.mkdir(parents=True)
    other = ClassArchive(tmp_path, "1111111111111111", other_jars)
    gone = ClassArchive(tmp_path, "2222222222222222", tmp_path / "deleted-venv" / "jars")
    for a in (other, gone):
        a.path.write_bytes(b"archive")
        (tmp_path / f"spark-classes-{a.where}.path").write_text(str(a.jars))
    unnamed = tmp_path / "spark-classes-33333333-4444444444444444.jsa"  # no note of where its jars are
    earlier = tmp_path / f"spark-classes-{archive.where}-5555555555555555.jsa"  # this install, an earlier Spark
    legacy = tmp_path / "spark-classes-0123456789abcdef.jsa"  # named as before installs were told apart
    for f in (unnamed, earlier, legacy):
        f.write_bytes(b"archive")
    assert "-XX:ArchiveClassesAtExit=" in archive.jvm_options()
    archive._making.write_bytes(b"the JVM's dump")  # (what the JVM writes as it exits)
    assert archive.adopt()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == sorted(
        [archive.path.name, f"spark-classes-{archive.where}.path", other.path.name, f"spark-classes-{other.where}.path"]
    )
    assert other.where != archive.where != gone.where


@pytest.mark.parametrize(
    "value,wanted", [("off", False), ("0", False), ("No", False), ("on", True), ("1", True), (" yes ", True)]
)
def test_the_command_line_reads_the_archive_switch_with_the_projects_yes_no_words(value, wanted):
    assert spark_class_archive({SPARK_CLASS_ARCHIVE_ENV: value}) is wanted


@pytest.mark.parametrize("environ", [{}, {SPARK_CLASS_ARCHIVE_ENV: ""}])
def test_the_archive_is_on_when_the_switch_is_unset(environ):
    assert spark_class_archive(environ) is True


def test_a_switch_that_is_neither_yes_nor_no_is_refused_in_one_line():
    with pytest.raises(SettingError) as refused:
        spark_class_archive({SPARK_CLASS_ARCHIVE_ENV: "maybe"})
    assert str(refused.value) == (
        "SDSCHAT_SPARK_CLASS_ARCHIVE='maybe' is not yes or no: use 1/0, true/false, yes/no or on/off"
    )


class _Launched:
    """What :func:`_end_jvm` uses of the gateway py4j launched: its process (here a Python one that writes the
    archive as the JVM does at exit) and a shutdown that has nothing to do."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc

    def shutdown(self) -> None:
        pass


#: a stand-in for the JVM making the archive: writes part of it, says so, and then either finishes it and exits
#: at the end of its stdin (as the JVM does) or hangs
_DUMPER = """
import sys, time
path, hang = sys.argv[1], sys.argv[2] == "hang"
with open(path, "wb") as f:
    f.write(b"half of an archive")
    f.flush()
    print("writing", flush=True)
    if hang:
        time.sleep(600)
    sys.stdin.read()
    f.write(b" and the rest")
"""


def _dumping(archive: ClassArchive, hang: bool) -> subprocess.Popen:
    assert "-XX:ArchiveClassesAtExit=" in archive.jvm_options() and archive.making
    proc = subprocess.Popen(
        [sys.executable, "-c", _DUMPER, str(archive._making), "hang" if hang else "exit"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"writing\n"
    assert archive._making.is_file()
    return proc


def test_a_jvm_that_writes_its_archive_in_time_has_it_put_in_place(tmp_path):
    archive = _archive(tmp_path)
    proc = _dumping(archive, hang=False)
    _end_jvm(_Launched(proc), archive, wait_s=30)
    assert proc.returncode == 0
    assert archive.path.read_bytes() == b"half of an archive and the rest"
    assert not archive._making.exists()


def test_a_jvm_that_outlives_the_wait_is_ended_and_its_half_written_archive_removed(tmp_path):
    archive = _archive(tmp_path)
    proc = _dumping(archive, hang=True)
    t0 = time.monotonic()
    _end_jvm(_Launched(proc), archive, wait_s=1)
    assert time.monotonic() - t0 < 15
    assert proc.poll() is not None  # ended: it cannot go on writing the file
    assert not archive.path.exists()
    assert [p.name for p in tmp_path.iterdir()] == []  # no half-written archive left in the cache folder
