"""A Spark standalone cluster on loopback for tests: a master and workers started from the installed pyspark,
as the README tells users to start theirs."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from kit.ports import free_port


def wait_for_line(path: Path, text: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[1]} exited: {path.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)
    raise AssertionError(f"no {text!r} in {path} after {timeout} s: {path.read_text(errors='replace')[-2000:]}")


@contextlib.contextmanager
def standalone_cluster(base: Path, workers: list[tuple[int, str]]) -> Iterator[str]:
    """A master and one worker per ``(cores, memory)``, all registered; yields the master's URL."""
    import pyspark

    home = Path(pyspark.__file__).parent
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOG_DIR": str(base / "logs"),
        "SPARK_WORKER_DIR": str(base / "work"),
    }
    port = free_port()
    spark_class = str(home / "bin" / "spark-class")
    procs = []

    def start(args: list[str], log_path: Path) -> subprocess.Popen:
        with open(log_path, "wb") as log:
            procs.append(
                subprocess.Popen(
                    [spark_class, *args], stdout=log, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL
                )
            )
        return procs[-1]

    try:
        master_log = base / "master.log"
        master = start(
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(free_port()),
            ],
            master_log,
        )
        wait_for_line(master_log, "I have been elected leader", master)
        url = f"spark://127.0.0.1:{port}"
        for i, (cores, memory) in enumerate(workers):
            log_path = base / f"worker-{i}.log"
            worker = start(
                [
                    "org.apache.spark.deploy.worker.Worker",
                    url,
                    "--cores",
                    str(cores),
                    "--memory",
                    memory,
                    "--webui-port",
                    str(free_port()),
                    "--work-dir",
                    str(base / f"work-{i}"),
                ],
                log_path,
            )
            wait_for_line(log_path, "Successfully registered with master", worker)
        yield url
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
