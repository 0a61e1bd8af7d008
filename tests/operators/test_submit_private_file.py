"""The submit operator's private file (issue #13): user-supplied ``application_params`` JSON no
longer travels on the spark-submit argv (``ps`` shows it to every user of the host), and a file
left behind by a SIGKILLed task (no ``finally`` runs) is removed by the next task that starts."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import stat
import subprocess
import sys
import time

import pytest

from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator
from airflow_provider_kafka_eos.spark import job as eos_job
from airflow_provider_kafka_eos.spark.handoff import private_dir, sweep_private_files, write_private_file

pytestmark = pytest.mark.dag

PARAMS = {"input": "/data/in", "token": "user-json-4242"}


@pytest.fixture
def private(monkeypatch, tmp_path):
    monkeypatch.setenv("KAFKA_EOS_PRIVATE_DIR", str(tmp_path))
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_EOS_PF",
        json.dumps({"conn_type": "kafka_eos", "extra": {"bootstrap.servers": "127.0.0.1:9"}}),
    )
    return tmp_path


def _submit(**kwargs):
    defaults = dict(
        task_id="submit", pipeline_id="orders", topic="orders-out", manifest_base_uri="/tmp/m",
        application_callable="my_jobs:build", kafka_eos_conn_id="kafka_eos_pf",
    )
    return SparkEosSubmitOperator(**{**defaults, **kwargs})


def test_params_go_to_the_private_file_not_the_argv(private):
    operator = _submit(application_params=PARAMS)
    args = operator._job_args(7)
    assert "--params" not in args and "user-json-4242" not in " ".join(args)
    path = operator._write_client_config()
    try:
        assert os.path.dirname(path) == private_dir() and private_dir().startswith(str(private))
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(private_dir()).st_mode) == 0o700
        # the job reads both back from the file the environment names
        env = {eos_job.CONFIG_FILE_ENV: path}
        assert eos_job.load_params("{}", env) == PARAMS
        assert eos_job.load_client_config(env).bootstrap_servers == "127.0.0.1:9"
    finally:
        operator._config_file = path
        operator._remove_config_file()


def test_the_job_refuses_params_from_two_places(private, tmp_path):
    path = write_private_file(str(tmp_path), {"client_config": {"bootstrap.servers": "h:1"},
                                              "application_params": {"a": 1}})
    from airflow_provider_kafka_eos.kafka.errors import UsageError

    with pytest.raises(UsageError, match="both"):
        eos_job.load_params('{"b": 2}', {eos_job.CONFIG_FILE_ENV: path})
    assert eos_job.load_params('{"b": 2}', {}) == {"b": 2}  # by hand, without the operator


def test_a_sigkilled_tasks_file_is_removed_at_the_next_start(private):
    directory = private_dir()
    # A real process writes its private file and is killed with SIGKILL (no cleanup runs).
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from airflow_provider_kafka_eos.spark.handoff import write_private_file\n"
         f"payload = {{'client_config': {{'sasl.password': 'pw'}}}}\n"
         f"print(write_private_file({directory!r}, payload), flush=True)\n"
         "time.sleep(120)\n"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        left_behind = child.stdout.readline().strip()
        assert os.path.exists(left_behind)
        assert sweep_private_files(directory) == []  # its task is still running: keep it
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    mine = write_private_file(directory, {"client_config": {}})
    assert os.path.exists(left_behind)
    assert sweep_private_files(directory) == [left_behind]  # what the next task's start does
    assert not os.path.exists(left_behind) and os.path.exists(mine)  # a live task's file stays
    os.unlink(mine)


def test_a_dead_tasks_file_stays_while_the_job_it_started_still_runs(private):
    """A job outlives its SIGKILLed task (its own session): the task's retry waits for it
    (tasks/reattach.py), and the job reads its private file after it starts, so the sweep keeps the
    file while a live process was started with it, and removes it once that process ended."""
    from airflow_provider_kafka_eos.spark.handoff import CONFIG_FILE_ENV

    directory = private_dir()
    task = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys, os\n"
         "from airflow_provider_kafka_eos.spark.handoff import write_private_file, CONFIG_FILE_ENV\n"
         f"path = write_private_file({directory!r}, {{'client_config': {{}}}})\n"
         "job = subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()'],\n"
         "                       start_new_session=True, stdin=subprocess.DEVNULL,\n"
         "                       env={**os.environ, CONFIG_FILE_ENV: path})\n"
         "print(path, job.pid, flush=True)\n"
         "sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    path, job_pid = task.stdout.readline().split()
    task.send_signal(signal.SIGKILL)  # the task dies; its job (a process waiting for a signal) goes on
    task.wait(30)
    try:
        assert CONFIG_FILE_ENV in pathlib.Path(f"/proc/{job_pid}/environ").read_text(errors="replace")
        assert sweep_private_files(directory) == []
        assert os.path.exists(path)
    finally:
        os.killpg(int(job_pid), signal.SIGKILL)
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{job_pid}") and _state(job_pid) != "Z":
        assert time.monotonic() < deadline, "the job did not end"
        time.sleep(0.05)  # polling another process's end, deadline-bounded
    assert sweep_private_files(directory) == [path]


def _state(pid: str) -> str:
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def test_a_private_dir_owned_by_someone_else_is_refused(private, monkeypatch):
    from airflow_provider_kafka_eos.kafka.errors import ConfigError

    real_uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real_uid + 1)  # as if another user had made the folder
    os.makedirs(private / f"kafka-eos-{real_uid + 1}", mode=0o700)
    with pytest.raises(ConfigError, match="not a directory owned by this user"):
        private_dir()


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [({"transactional_id_prefix": "orders-\udc80"}, "lone surrogate"),
     ({"topic": "orders out"}, "topic"),
     ({"transaction_timeout_ms": 0}, "transaction_timeout_ms must be positive")],
)
def test_bad_operator_arguments_fail_before_anything_starts(private, kwargs, needle):
    """A bad argument fails the task at once (Airflow's fail-now exception, the UsageError as its cause)."""
    from airflow_provider_kafka_eos.kafka.errors import UsageError
    from airflow_provider_kafka_eos.tasks.fail_now import fail_now_exception

    operator = _submit()
    for name, value in kwargs.items():  # as rendered: templates pass __init__, their values are checked here
        setattr(operator, name, value)
    with pytest.raises(fail_now_exception(), match=needle) as failed:
        operator.execute({})
    assert isinstance(failed.value.__cause__, UsageError)
    assert list(private.iterdir()) == []  # no private file was written
