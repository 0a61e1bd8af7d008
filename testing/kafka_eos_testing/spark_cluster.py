"""A Spark standalone cluster for tests and benchmarks: one master and N workers, each its own
JVM on loopback, started from the installed PySpark's own launcher (``bin/spark-class``).

Its executors run a Python environment with the job-side requirements (PySpark, pyarrow,
kafka-python, confluent-kafka, numpy, crc32c) but **not** this provider
(``executor_python_env``): the exactly-once write must bring its own code to them, as it must
on a real cluster. That environment is made once with ``uv`` and cached under
``~/.cache/kafka-eos/`` (``$KAFKA_EOS_SPARK_CACHE``), keyed by the Python and package versions
of the running interpreter, so it matches the driver exactly.

    with start_cluster() as cluster:
        cluster.master_url                   # spark://127.0.0.1:<port>
        cluster.submit_conf()                # --conf pairs for spark-submit
        cluster.executor_pids()              # executor JVMs (kill -9 one to test rescheduling)
        cluster.kill_worker(0); cluster.restart_worker(0)

``./run spark-cluster`` starts one and waits (Ctrl-C stops it). Nothing here needs pytest.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from airflow_provider_kafka_eos.spark.requirements import JOB_REQUIREMENTS

__all__ = [
    "CACHE_ENV",
    "EXECUTOR_PACKAGES",
    "SparkStandaloneCluster",
    "executor_python_env",
    "spark_home",
    "start_cluster",
]

CACHE_ENV = "KAFKA_EOS_SPARK_CACHE"
# What the executors get (the documented job-side requirements), at the driver's own versions.
EXECUTOR_PACKAGES = ("pyspark", *(r.distribution for r in JOB_REQUIREMENTS))
START_TIMEOUT_S = 120.0
DAEMON_HEAP = "256m"  # master and worker JVMs: bookkeeping only
# Test jobs are small: a JVM that starts fast (C1 only, serial GC) beats one that runs fast.
# Benchmarks drop these (``submit_conf(quick=False)``).
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_MASTER_LINE = re.compile(r"Starting Spark master at (spark://\S+)")
_REGISTERED = "Successfully registered with master"


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "kafka-eos")


def spark_home() -> Path:
    """The installed PySpark's own Spark distribution (``bin/spark-class``, ``jars/``)."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").exists():
        raise RuntimeError(
            f"{home} has no bin/spark-class: PySpark is the Spark Connect client only "
            "(pyspark-client); install the [spark] extra"
        )
    return home


def _uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if not Path(found).exists():
        raise RuntimeError("the executor environment is made with uv: pip install uv")
    return found


def executor_python_env(
    packages: Sequence[str] = EXECUTOR_PACKAGES,
    *,
    name: str = "executor",
    cache: Path | None = None,
    timeout_s: float = 600.0,
) -> str:
    """The Python of a cached venv with ``packages`` at this interpreter's versions (not the provider).

    Packages not installed here are installed unpinned. Made once (under a file lock, built in
    a temp folder and renamed) and reused by every later run with the same versions.
    """
    versions = []
    for package in packages:
        try:
            versions.append(f"{package}=={importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(package)
    py = f"py{sys.version_info.major}.{sys.version_info.minor}"
    key = "-".join([name, py, *(v.replace("==", "") for v in versions)]) if versions else f"{name}-{py}-bare"
    root = (cache or cache_root()) / "spark-envs"
    target = root / key
    python = target / "bin" / "python"
    if python.exists():
        return str(python)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.exists():
            return str(python)
        building = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        try:
            uv = _uv()
            subprocess.run(
                [uv, "venv", "-q", "-p", sys.executable, str(building)], check=True, timeout=timeout_s
            )
            if versions:
                subprocess.run(
                    [uv, "pip", "install", "-q", "-p", str(building / "bin" / "python"), *versions],
                    check=True,
                    timeout=timeout_s,
                )
            # Only bin/python is used (script shebangs would point at the temp folder): rename is safe.
            os.rename(building, target)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
    return str(python)


@dataclass
class _Daemon:
    role: str
    process: subprocess.Popen
    log: Path
    lines: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def follow(self) -> None:
        def pump() -> None:
            assert self.process.stdout is not None
            with open(self.log, "a", encoding="utf-8", errors="replace") as out:
                for raw in self.process.stdout:
                    self.lines.append(raw)
                    out.write(raw)
                    out.flush()

        self.reader = threading.Thread(target=pump, name=f"spark-{self.role}-log", daemon=True)
        self.reader.start()

    def wait_for(self, pattern: str | re.Pattern[str], deadline: float) -> re.Match[str] | str:
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        seen = 0
        while time.monotonic() < deadline:
            while seen < len(self.lines):
                match = regex.search(self.lines[seen])
                seen += 1
                if match:
                    return match
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"spark {self.role} exited with {self.process.returncode}; log: {self.log}\n"
                    + "".join(self.lines[-30:])
                )
            time.sleep(0.1)
        raise TimeoutError(
            f"spark {self.role} did not log {regex.pattern!r} in time; log: {self.log}\n"
            + "".join(self.lines[-30:])
        )


@dataclass
class SparkStandaloneCluster:
    """A running master + workers. ``stop()`` (or leaving the ``with`` block) kills every JVM."""

    home: Path
    work_dir: Path
    executor_python: str
    worker_cores: int
    worker_memory: str
    executor_memory: str
    master_url: str = ""
    _master: _Daemon | None = None
    _workers: list[_Daemon | None] = field(default_factory=list)

    # -- lifecycle ---------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        conf_dir = self.work_dir / "conf"
        conf_dir.mkdir(exist_ok=True)  # empty: no user spark-defaults.conf or spark-env.sh leaks in
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # the executors get nothing of the driver's Python path
        env.update(
            SPARK_HOME=str(self.home),
            SPARK_CONF_DIR=str(conf_dir),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOCAL_DIRS=str(self.work_dir / "local"),
            SPARK_DAEMON_MEMORY=DAEMON_HEAP,
            SPARK_DAEMON_JAVA_OPTS=QUICK_JVM,
            SPARK_NO_DAEMONIZE="1",
            PYSPARK_PYTHON=self.executor_python,
        )
        return env

    def _spawn(self, role: str, args: list[str]) -> _Daemon:
        log = self.work_dir / f"{role}.log"
        process = subprocess.Popen(
            [str(self.home / "bin" / "spark-class"), *args],
            env=self._env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # one process group per daemon: stop() kills JVM and children
            preexec_fn=_die_with_parent,
        )
        daemon = _Daemon(role, process, log)
        daemon.follow()
        return daemon

    def start(self, workers: int, timeout_s: float = START_TIMEOUT_S) -> SparkStandaloneCluster:
        deadline = time.monotonic() + timeout_s
        self._master = self._spawn(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--webui-port",
                "0",
            ],
        )
        match = self._master.wait_for(_MASTER_LINE, deadline)
        assert isinstance(match, re.Match)
        self.master_url = match.group(1)
        self._workers = [None] * workers
        for index in range(workers):
            self._start_worker(index)
        for index in range(workers):
            worker = self._workers[index]
            assert worker is not None
            worker.wait_for(_REGISTERED, deadline)
        return self

    def _start_worker(self, index: int) -> None:
        work = self.work_dir / f"worker-{index}"
        work.mkdir(exist_ok=True)
        self._workers[index] = self._spawn(
            f"worker-{index}",
            [
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--webui-port",
                "0",
                "--cores",
                str(self.worker_cores),
                "--memory",
                self.worker_memory,
                "--work-dir",
                str(work),
                self.master_url,
            ],
        )

    def restart_worker(self, index: int, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start worker ``index`` again (after ``kill_worker``) and wait until it registered."""
        self._stop_daemon(self._workers[index])
        self._start_worker(index)
        worker = self._workers[index]
        assert worker is not None
        worker.wait_for(_REGISTERED, time.monotonic() + timeout_s)

    def stop(self) -> None:
        for daemon in [*self._workers, self._master]:
            self._stop_daemon(daemon)
        self._workers, self._master = [], None

    @staticmethod
    def _stop_daemon(daemon: _Daemon | None) -> None:
        if daemon is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if daemon.process.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(daemon.process.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                daemon.process.wait(timeout=10)
        # executors are children in the worker's process group; make sure none outlives it
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(daemon.process.pid, signal.SIGKILL)

    def __enter__(self) -> SparkStandaloneCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what tests need ---------------------------------------------------------------------

    def submit_conf(self, *, quick: bool = True) -> dict[str, str]:
        """spark-submit ``--conf`` settings for a client-mode job on this cluster (small memory;
        ``quick``: JVMs tuned to start fast, for tests)."""
        conf = {
            "spark.pyspark.python": self.executor_python,
            "spark.executor.memory": self.executor_memory,
            "spark.driver.memory": "512m",
            "spark.ui.enabled": "false",
            "spark.speculation": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.task.maxFailures": "4",
            "spark.local.dir": str(self.work_dir / "local"),
            "spark.driver.extraJavaOptions": QUICK_JVM,
            "spark.executor.extraJavaOptions": QUICK_JVM,
        }
        if not quick:
            del conf["spark.driver.extraJavaOptions"], conf["spark.executor.extraJavaOptions"]
        return conf

    def worker_pid(self, index: int) -> int:
        worker = self._workers[index]
        if worker is None or worker.process.poll() is not None:
            raise RuntimeError(f"worker {index} is not running")
        return _jvm_pid(worker.process.pid)

    def executor_pids(self) -> list[int]:
        """PIDs of the executor JVMs the workers launched (``CoarseGrainedExecutorBackend``)."""
        groups = {w.process.pid for w in self._workers if w is not None and w.process.poll() is None}
        pids = []
        for pid, cmdline in _processes():
            if "CoarseGrainedExecutorBackend" in cmdline and _pgid(pid) in groups:
                pids.append(pid)
        return sorted(pids)

    def executor_of(self, pid: int) -> int:
        """The executor JVM that runs process ``pid`` (a Python worker of a task), by ancestry."""
        current = pid
        for _ in range(16):
            cmdline = _cmdline(current)
            if "CoarseGrainedExecutorBackend" in cmdline:
                return current
            current = _parent(current)
            if current <= 1:
                break
        raise RuntimeError(f"process {pid} does not run under an executor of this cluster")

    def worker_of(self, executor_pid: int) -> int:
        """Index of the worker that launched ``executor_pid``."""
        group = _pgid(executor_pid)
        for index, worker in enumerate(self._workers):
            if worker is not None and worker.process.pid == group:
                return index
        raise RuntimeError(f"executor {executor_pid} belongs to no worker of this cluster")

    def ensure_workers(self) -> None:
        """Restart every worker that is no longer running (after a test killed one)."""
        for index, worker in enumerate(self._workers):
            if worker is None or worker.process.poll() is not None:
                self.restart_worker(index)

    def kill_worker(self, index: int) -> None:
        """``kill -9`` worker ``index``'s JVM only (its executor then notices and exits)."""
        os.kill(self.worker_pid(index), signal.SIGKILL)


def _processes() -> Iterator[tuple[int, str]]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                yield (
                    int(entry.name),
                    (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"),
                )


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the process that started the cluster dies, so a
    crashed test run leaves no JVM behind (spark-class execs java, which keeps the setting)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])  # field 4, after the parenthesised command name


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def _jvm_pid(launcher_pid: int) -> int:
    """spark-class execs java eventually; the JVM is the launcher or its newest java descendant."""
    for pid, cmdline in _processes():
        if _pgid(pid) == launcher_pid and cmdline.split(" ", 1)[0].endswith("java"):
            return pid
    return launcher_pid


def start_cluster(
    *,
    workers: int = 2,
    worker_cores: int = 1,
    worker_memory: str = "1g",
    executor_memory: str = "512m",
    executor_python: str | None = None,
    work_dir: str | os.PathLike[str] | None = None,
    timeout_s: float = START_TIMEOUT_S,
) -> SparkStandaloneCluster:
    """Start a master and ``workers`` workers; executors run ``executor_python`` (default: the
    cached provider-less environment from ``executor_python_env()``)."""
    cluster = SparkStandaloneCluster(
        home=spark_home(),
        work_dir=Path(work_dir or tempfile.mkdtemp(prefix="kafka-eos-spark-cluster-")).resolve(),
        executor_python=executor_python or executor_python_env(),
        worker_cores=worker_cores,
        worker_memory=worker_memory,
        executor_memory=executor_memory,
    )
    cluster.work_dir.mkdir(parents=True, exist_ok=True)
    try:
        return cluster.start(workers, timeout_s)
    except BaseException:
        cluster.stop()
        raise


def main(argv: Sequence[str] | None = None) -> int:
    """``./run spark-cluster [--workers N]``: start a cluster, print its URL, wait for Ctrl-C."""
    import argparse

    parser = argparse.ArgumentParser(prog="spark-cluster", description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-memory", default="1g")
    args = parser.parse_args(argv)
    print(
        "preparing the executors' Python (PySpark, pyarrow, confluent-kafka, kafka-python; no provider)...",
        flush=True,
    )
    with start_cluster(workers=args.workers, worker_memory=args.worker_memory) as cluster:
        print(
            f"master: {cluster.master_url}\nexecutor python: {cluster.executor_python}\n"
            f"logs: {cluster.work_dir}\nsubmit with:",
            flush=True,
        )
        confs = " ".join(f"--conf {k}={v}" for k, v in cluster.submit_conf().items())
        print(
            f"  spark-submit --master {cluster.master_url} {confs} <job.py> ...\nCtrl-C stops it.", flush=True
        )
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            while not stop.wait(1.0):
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
