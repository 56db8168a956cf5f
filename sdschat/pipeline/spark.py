"""A quiet Spark session for the pipeline jobs.

* ``local[*]`` (an embedded Spark on every core) unless a master URL is given.
* ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` = ``sys.executable``, so
  Python workers run in this interpreter's environment (the venv).
* Quiet terminal: log4j2 at ERROR (no banner, no "Setting default log level"
  or native-hadoop warnings), ``spark.ui.showConsoleProgress=false``, and the
  JVM's own stdout/stderr (e.g. the JDK's incubator-module warning) go to a
  log file instead of the terminal.
* Embedded, the JVM collects garbage with the parallel (throughput)
  collector: a batch job on few cores, where G1's concurrent threads take
  time from the tasks; and its optimizing JIT compiler waits for really hot
  code (:data:`_LATE_C2`). For a short job (``quick_jit``: a report of at
  most :data:`QUICK_JIT_EVENTS` events) the JVMs -- embedded, or a
  cluster's driver and executors -- do without it (:data:`_QUICK_JIT`).
* Spark's JVM starts from a class-data archive (:class:`ClassArchive`,
  the JDK's dynamic CDS): the first session on a machine records the
  classes it loaded into ``<user cache>/sdschat/spark-classes-<key>.jsa``
  (0600, folder 0700) as its JVM exits; later sessions map it instead of
  loading and verifying those classes again (the report's 2 million events:
  Spark start 4.2 s -> 2.3 s, and its first queries faster).
  ``launch(class_archive=False)`` starts without it: the command line reads
  ``SDSCHAT_SPARK_CLASS_ARCHIVE`` (yes/no, by the project's one reader of such
  switches) and passes its answer in; this package reads no environment switch.
* A session's scratch (its log settings and ``spark.local.dir``, where
  Spark keeps its ``spark-*``, ``blockmgr-*`` and ``pyspark-*`` folders) is a
  ``sdschat-spark-*`` folder in the temporary directory that its stop removes
  (:meth:`RunningSpark.stop`), whichever thread stops it.
* Spark failures become :class:`SparkJobError` with one line; the JVM log
  file holds the detail.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = [
    "SparkJobError",
    "spark_session",
    "launch",
    "session_settings",
    "RunningSpark",
    "one_line",
    "DRIVER_MEMORY",
    "ClassArchive",
    "ARCHIVE_WAIT_S",
    "QUICK_JIT_EVENTS",
    "embedded",
]

#: the driver JVM's heap in local mode, where it runs the executors too: the report collects nothing per event,
#: so its 50-million-event runs fit in this (bench/report_scale.py) as its 2-million ones do
DRIVER_MEMORY = "1200m"

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
"""


#: the longest a session's stop waits for its JVM to write the class archive as it exits: the dump takes a few
#: seconds, once per machine (~10 s for the report's JVM on a loaded two-core machine, where the whole first stop
#: took tens of seconds), so this leaves ten times that, while a JVM that hangs at exit cannot hold the command for
#: ever. A JVM still running then is ended and its half-written archive removed (:func:`_end_jvm`).
ARCHIVE_WAIT_S = 120.0


class SparkJobError(Exception):
    """A Spark job failed (one line; details in the JVM log)."""


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The first meaningful line of an exception (Py4J/Spark errors carry a JVM stack trace)."""
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("An error occurred while calling", "Traceback")):
            text = line
            break
    return text[:limit]


class ClassArchive:
    """The Spark JVM's class-data archive (JDK dynamic CDS): where it is, and the JVM options that use or make it.

    The archive's name carries where the pyspark jars are (each install,
    e.g. each virtualenv, has its own: the JVM checks the class path it was
    made with) and a key of what it was made from (those jars, the ``java``
    found on PATH or in JAVA_HOME), so another Spark or JDK makes its own; the
    JVM checks it again and runs without it (silently) if it does not match.
    Making one removes the earlier archives of the same install and those of
    installs that are gone (``spark-classes-WHERE.path`` names each one's
    jars), never another live install's. It is used only if it is a regular
    file owned by this user and writable by no one else: the JVM maps it as
    code.

    The session that makes it passes ``-XX:ArchiveClassesAtExit`` with a
    temporary name, waits for its JVM to exit (the dump takes a few seconds,
    once) and renames the file into place (:meth:`adopt`), or removes it when
    the JVM did not exit in time (:meth:`discard`).

    Whether a session uses one is its caller's choice (``launch(class_archive=...)``): the command line decides
    it from ``SDSCHAT_SPARK_CLASS_ARCHIVE``.
    """

    def __init__(self, folder: Path, key: str, jars: Path) -> None:
        self.folder = folder
        self.jars = jars
        self.where = hashlib.sha256(str(jars).encode()).hexdigest()[:8]
        self.path = folder / f"spark-classes-{self.where}-{key}.jsa"
        self._making = folder / f".spark-classes-{self.where}-{key}.{os.getpid()}.tmp"
        self.making = False

    @classmethod
    def for_this_machine(cls, folder: Path | None = None) -> ClassArchive | None:
        """The archive for this pyspark and JDK, or None when the JDK cannot be told."""
        found = _runtime_key()
        if found is None:
            return None
        jars, key = found
        if folder is None:
            from platformdirs import user_cache_dir

            folder = Path(user_cache_dir("sdschat"))
        return cls(folder, key, jars)

    def usable(self) -> bool:
        """The archive exists as a regular file of this user that no one else can write."""
        try:
            st = os.lstat(self.path)
        except OSError:
            return False
        return (
            stat.S_ISREG(st.st_mode)
            and st.st_uid == os.getuid()
            and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            and st.st_size > 0
        )

    def jvm_options(self) -> str:
        """Options for the driver JVM: map the archive, or (when there is none yet) make it at exit."""
        quiet = "-Xlog:cds=off -Xlog:cds+dynamic=off"
        if self.usable():
            self.making = False
            return f"-XX:SharedArchiveFile={self.path} {quiet}"
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(self.folder, 0o700)
        except OSError:
            return ""
        self.making = True
        for left in self.folder.glob(".spark-classes-*.tmp"):  # a JVM that died or outlived its wait an hour ago
            with contextlib.suppress(OSError):
                if time.time() - left.stat().st_mtime > 3600:
                    left.unlink()
        return f"-XX:ArchiveClassesAtExit={self._making} {quiet}"

    def adopt(self) -> bool:
        """After the JVM that made it exited: the archive, private, under its final name (see the class for what
        it removes). Returns whether it is."""
        try:
            if self._making.is_file() and self._making.stat().st_size > 0:
                mine = self._note(self.where)  # (before the archive: it is live)
                mine.write_text(str(self.jars), encoding="utf-8")
                os.chmod(mine, 0o600)
                os.chmod(self._making, 0o600)
                os.replace(self._making, self.path)
                self._remove_others()
                return True
        except OSError:
            pass
        self.discard()
        return False

    def discard(self) -> None:
        """Remove the archive this session's JVM was writing (whole, half-written, or never begun)."""
        with contextlib.suppress(OSError):
            self._making.unlink()

    def _note(self, where: str) -> Path:
        """The file that names the pyspark jars of install ``where``'s archives."""
        return self.folder / f"spark-classes-{where}.path"

    def _remove_others(self) -> None:
        """The earlier archives of this install, those of installs whose jars are gone, and those named the way
        earlier versions of sdschat named them (no install in the name)."""
        live: dict[str | None, bool] = {self.where: True}  # (None: an archive named the earlier way)
        for old in self.folder.glob("spark-classes-*.jsa"):
            if old == self.path:
                continue
            parts = old.name[len("spark-classes-") : -len(".jsa")].split("-")
            where = parts[0] if len(parts) == 2 else None
            if where is not None and where not in live:
                try:
                    named = Path(self._note(where).read_text(encoding="utf-8"))
                    live[where] = named.is_dir()
                except (OSError, ValueError):
                    live[where] = False
            if where == self.where or not live.get(where, False):
                with contextlib.suppress(OSError):
                    old.unlink()
        for note in self.folder.glob("spark-classes-*.path"):  # (what names the jars of an archive left)
            where = note.name[len("spark-classes-") : -len(".path")]
            if where != self.where and not any(self.folder.glob(f"spark-classes-{where}-*.jsa")):
                with contextlib.suppress(OSError):
                    note.unlink()


def _runtime_key() -> tuple[Path, str] | None:
    """Where the pyspark jars are, and a key of what a class archive depends on: those jars (names, sizes,
    times) and the java binary (path, time)."""
    try:
        import pyspark

        jars = (Path(pyspark.__file__).parent / "jars").resolve()
        java_home = os.environ.get("JAVA_HOME")
        java = Path(java_home) / "bin" / "java" if java_home else None
        if java is None or not java.exists():
            found = shutil.which("java")
            if found is None:
                return None
            java = Path(found)
        java = java.resolve()
        h = hashlib.sha256(f"{pyspark.__version__}\n{java}\n{java.stat().st_mtime_ns}\n".encode())
        for jar in sorted(jars.iterdir()):
            st = jar.stat()
            h.update(f"{jar.name} {st.st_size} {st.st_mtime_ns}\n".encode())
    except OSError:
        return None
    return jars, h.hexdigest()[:16]


#: the JIT's optimizing compiler (C2) takes a method at ten times the calls and loops it does by default: in a
#: report's first seconds C2 compiled Spark's parser, Janino, serialization and every query's generated code,
#: ~26 s of CPU on a two-core machine for 18 s of queries; the quick compiler (C1) still takes them at once.
#: Measured (bench/report_scale.py): 2.3 M events 21.7 s against 23.3 s, 12 M events 42.4 s against 43-44.5 s
#: (C1 alone, ``-XX:TieredStopAtLevel=1``, is faster at 2 M but 50% slower at 12 M: its code runs hot loops slowly)
_LATE_C2 = (
    "-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 -XX:Tier4CompileThreshold=150000"
    " -XX:Tier4BackEdgeThreshold=400000"
)

#: C1 alone: a short job's JVM spends most of its CPU compiling -- a report of 1,672 events, cold: 768 C2 compilations
#: took 12.4 s and 9,915 profiled C1 ones 5.7 s, of ~30 s of CPU in 19-21 s of wall time (Spark's SQL parser, Janino,
#: the Java serialization of tasks); with C1 alone the report takes 13-14 s. C1's code runs hot loops slower, so only
#: up to QUICK_JIT_EVENTS (bench/report_scale.py, paired runs on 2 cores, C1 alone against _LATE_C2: 1,672 events
#: x0.735, 2.26 M x0.89-0.94, 4.05 M x1.065, 10.4 M x1.62)
_QUICK_JIT = "-XX:TieredStopAtLevel=1"

#: the events up to which a report's embedded JVM runs with C1 alone (:data:`_QUICK_JIT`): below the measured crossing
#: (between 2.26 and 4.05 million events, nearer the latter)
QUICK_JIT_EVENTS = 2_500_000

#: settings whose value is a list of JVM options: a ``conf`` value is appended to the session's own
_JVM_OPTIONS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def embedded(master: str | None) -> bool:
    """Whether a session with this master runs Spark in this machine's one JVM (``local[...]``, or no master)."""
    return master is None or master.startswith("local")


def session_settings(
    app: str,
    *,
    master: str | None = None,
    driver_memory: str | None = None,
    conf: dict[str, str] | None = None,
    java_options: str = "",
    driver_options: str = "",
    local_dir: Path | None = None,
    quick_jit: bool = False,
    cores: int | None = None,
) -> dict[str, str]:
    """The Spark settings of a session, computed and nothing started: a function of its arguments alone, so that
    what a session asks of Spark can be read and tested without a JVM.

    ``java_options`` go to every JVM (the log settings), ``driver_options`` to the driver's alone (the class
    archive's); ``cores`` is this machine's (embedded sessions size their partitions by it). ``conf`` overrides
    the rest, except the JVM options (``spark.driver.extraJavaOptions``, ``spark.executor.extraJavaOptions``),
    which are added after the session's own."""
    cores = cores or os.cpu_count() or 1
    driver_opts = f"{java_options} {driver_options}".strip()
    settings = {
        "spark.app.name": app,
        "spark.master": master or "local[*]",
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": driver_opts,
        "spark.executor.extraJavaOptions": java_options,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
    }
    if local_dir is not None:
        settings["spark.local.dir"] = str(local_dir)
    if embedded(master):
        # the driver runs the executors: the throughput collector, not G1 (whose concurrent work competes with the
        # tasks for the cores) -- 10-13% less wall time for the report at 2 and 9.6 million events
        # (bench/report_scale.py, paired runs)
        jit = _QUICK_JIT if quick_jit else _LATE_C2
        settings["spark.driver.extraJavaOptions"] = f"{driver_opts} -XX:+UseParallelGC {jit}"
        settings["spark.driver.memory"] = driver_memory or DRIVER_MEMORY
        settings["spark.sql.shuffle.partitions"] = str(max(4, 2 * cores))
        settings["spark.default.parallelism"] = str(cores)
        # on one machine adaptive execution re-plans each query after every stage for little: the report's
        # 2.3 M events 20.1-21.1 s against 21.6-22.1 s, 12 M and 52 M events unchanged (bench/report_scale.py)
        settings["spark.sql.adaptive.enabled"] = "false"
    elif quick_jit:
        # a short job on a cluster: the driver (planning, code generation) and the executors (a few tasks each) are
        # JVMs that end before C2's compiling pays (a report of 2.26 M events on a two-core worker: 37 s against 54)
        for key in _JVM_OPTIONS:
            settings[key] = f"{settings[key]} {_QUICK_JIT}"
    for key, value in (conf or {}).items():
        if key in _JVM_OPTIONS and key in settings:
            # the JVM options are added to ours (the log settings, the collector), not put in their place: a
            # later option wins over an earlier one of the same name
            value = f"{settings[key]} {value}"
        settings[key] = value
    return settings


class RunningSpark:
    """A session this process launched, and what its end needs: the gateway JVM, the class archive it may be
    making, the log file and the session's scratch folder. :meth:`stop` ends it once, from whichever thread
    calls it first (a job may stop Spark in a thread of its own while it goes on with work that needs no Spark)."""

    def __init__(
        self,
        session: Any,
        gateway: Any,
        archive: ClassArchive | None,
        log: IO[bytes],
        scratch: Path | None = None,
        keep: Path | None = None,
    ) -> None:
        self.session = session
        self._gateway = gateway
        self._archive = archive
        self._log = log
        self._scratch = scratch
        self._keep = keep
        self._lock = threading.Lock()
        self._stopped = False

    def stop(self) -> None:
        """Stop the session and let its JVM exit (waiting for it only while it writes the class archive), then
        remove its scratch folder (but ``keep``, the log a failed start names)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            try:
                if self.session is not None:
                    with contextlib.suppress(Exception):
                        self.session.stop()
                with contextlib.suppress(Exception):
                    # a new session in this process needs a new gateway (we launched this one ourselves)
                    from pyspark import SparkContext

                    SparkContext._gateway = None
                    SparkContext._jvm = None
                _end_jvm(self._gateway, self._archive)
            finally:
                self._log.close()
                if self._scratch is not None:
                    _remove_scratch(self._scratch, self._keep)


def _remove_scratch(folder: Path, keep: Path | None) -> None:
    """Remove a session's scratch folder: its log settings and ``spark.local.dir`` (the JVM removes its own
    ``spark-*`` and ``blockmgr-*`` folders as it exits, not always before this process does: what it left, or had
    not removed yet, goes here), and the JVM log when it is there, unless it is ``keep``."""
    if keep is None or keep.parent != folder:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for entry in folder.iterdir() if folder.is_dir() else ():
        if entry != keep:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    entry.unlink()


def launch(
    app: str,
    *,
    master: str | None = None,
    driver_memory: str | None = None,
    conf: dict[str, str] | None = None,
    log_dir: Path | None = None,
    class_archive: ClassArchive | None | bool = True,
    quick_jit: bool = False,
) -> RunningSpark:
    """Start a SparkSession with :func:`session_settings`; the JVM output goes to ``log_dir/spark-jvm.log``.

    ``class_archive``: True (default) the driver JVM uses this machine's :class:`ClassArchive` (made by
    the first session), False none, or the one given. ``quick_jit``: the JVMs compile with C1 alone
    (:data:`_QUICK_JIT`, for a short job: the embedded one, or on a cluster the driver and the executors); else an
    embedded JVM's C2 waits for really hot code (:data:`_LATE_C2`). Raises :class:`SparkJobError` (one line)
    when Spark does not start."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if master is None:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # embedded: no network interface lookup
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    tmp = Path(tempfile.mkdtemp(prefix="sdschat-spark-"))
    log4j = tmp / "log4j2.properties"
    log4j.write_text(_LOG4J)
    log_path = (log_dir or tmp) / "spark-jvm.log"
    archive = ClassArchive.for_this_machine() if class_archive is True else class_archive or None
    settings = session_settings(
        app,
        master=master,
        driver_memory=driver_memory,
        conf=conf,
        quick_jit=quick_jit,
        local_dir=tmp / "local",
        java_options=f"-Dlog4j2.configurationFile=file:{log4j} -Dlog4j.configurationFile=file:{log4j}",
        driver_options=archive.jvm_options() if archive is not None else "",
    )
    sconf = SparkConf()
    for k, v in settings.items():
        sconf.set(k, v)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    logf = open(log_path, "ab")
    gateway = None
    try:
        gateway = launch_gateway(sconf, popen_kwargs={"stdout": logf, "stderr": logf})
        on_interrupt = signal.getsignal(signal.SIGINT)
        sc = SparkContext(gateway=gateway, conf=sconf)
        if threading.current_thread() is threading.main_thread():
            # SparkContext puts in a Ctrl+C handler of its own and leaves it after the session stops, when it
            # fails on the stopped context (an AttributeError in place of the KeyboardInterrupt): the process's
            # own handler stays. A Ctrl+C still ends the command, and the JVM with it
            signal.signal(signal.SIGINT, on_interrupt)
        sc.setLogLevel("ERROR")
        return RunningSpark(SparkSession(sc), gateway, archive, logf, tmp)
    except BaseException as exc:
        RunningSpark(None, gateway, archive, logf, tmp, keep=log_path).stop()  # (the error names the log)
        if isinstance(exc, Exception):
            raise SparkJobError(f"could not start Spark ({one_line(exc)}); see {log_path}") from None
        raise


@contextlib.contextmanager
def spark_session(
    app: str,
    *,
    master: str | None = None,
    driver_memory: str | None = None,
    conf: dict[str, str] | None = None,
    log_dir: Path | None = None,
    class_archive: ClassArchive | None | bool = True,
    quick_jit: bool = False,
) -> Iterator[Any]:
    """Start a SparkSession (:func:`launch`, which says what the arguments do), yield it, stop it when the block
    ends. A job that has no more use for Spark before its own work is done can end the block from another thread
    (enter it in a :class:`contextlib.ExitStack` and close that in a thread), as the report does."""
    running = launch(
        app,
        master=master,
        driver_memory=driver_memory,
        conf=conf,
        log_dir=log_dir,
        class_archive=class_archive,
        quick_jit=quick_jit,
    )
    try:
        yield running.session
    finally:
        running.stop()


def _end_jvm(gateway: Any, archive: ClassArchive | None, wait_s: float = ARCHIVE_WAIT_S) -> None:
    """Let the gateway JVM exit (it does at the end of its stdin); when it is making the class archive, wait for
    it to write it (``wait_s`` at most), then put it in place. A JVM that did not exit by then is ended, and the
    archive it was writing removed: no half-written file is left in the cache folder."""
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return
    with contextlib.suppress(Exception):
        gateway.shutdown()
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()
    if archive is not None and archive.making:
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                proc.kill()  # (else it could go on writing, or begin, the file removed below)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            archive.discard()
            return
        archive.adopt()
