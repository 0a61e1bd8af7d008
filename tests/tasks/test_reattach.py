"""A retry of the submit task waits for the spark-submit its earlier try left running (tasks/reattach.py).

The rule on real processes (a ``cat`` in a session of its own stands for the job), then the whole of
it with a real local spark-submit: try 1 runs in its own process and is SIGKILLed once its job
started, the job goes on; try 2 waits for that job instead of starting another and returns its
manifest; a read_committed count finds each key once. The task state store is a file-backed double
(``task_state_double.py``: the real one needs a scheduler's supervisor).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
from task_state_double import FileTaskStateStore

from airflow_provider_kafka_eos.tasks import reattach

LOGGER = "airflow_provider_kafka_eos.tasks.reattach"


@pytest.fixture
def job():
    """A process in a session of its own that runs until its stdin is closed (the job stand-in)."""
    process = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               start_new_session=True)
    yield process
    if process.poll() is None:
        process.kill()
    process.wait(timeout=10)


def _context(store, try_number=2):
    return {"task_state_store": store, "ti": SimpleNamespace(try_number=try_number)}


def test_a_recorded_job_is_found_while_it_runs_on_this_host_for_this_checkpoint(job, tmp_path):
    store = FileTaskStateStore(tmp_path / "state.json")
    reattach.remember(_context(store, 1), job.pid, checkpoint_id=7, try_number=1)
    record = store.get(reattach.STATE_KEY)
    assert (record["pid"], record["checkpoint_id"], record["try_number"], record["host"]) == (
        job.pid, 7, 1, socket.gethostname())
    assert reattach.left_running(_context(store), 7).pid == job.pid
    assert reattach.left_running(_context(store), 8) is None  # another checkpoint (a claim moved it)
    store.set(reattach.STATE_KEY, {**record, "host": "another-worker"})
    assert reattach.left_running(_context(store), 7) is None  # another Celery worker's: not waitable here
    store.set(reattach.STATE_KEY, {**record, "create_time": record["create_time"] - 100})
    assert reattach.left_running(_context(store), 7) is None  # the pid now names another process
    store.set(reattach.STATE_KEY, record)
    job.stdin.close()
    job.wait(timeout=10)
    assert reattach.left_running(_context(store), 7) is None  # ended: the retry runs the job itself


def test_the_retry_waits_until_the_job_ends(job, tmp_path, caplog):
    store = FileTaskStateStore(tmp_path / "state.json")
    reattach.remember(_context(store, 1), job.pid, checkpoint_id=7, try_number=1)
    outcome = {}
    with caplog.at_level(logging.INFO, logger=LOGGER):
        waiter = threading.Thread(
            target=lambda: outcome.setdefault("ended", reattach.wait_for_earlier_try(
                _context(store), 7, timeout_s=120)), daemon=True)
        waiter.start()
        _wait_for_log(caplog, "waiting for it to end instead of starting the job a second time")
        assert waiter.is_alive() and job.poll() is None  # waiting on the running job, not starting one
        job.stdin.close()
        waiter.join(30)
    assert outcome == {"ended": True}
    assert f"try 1 left its spark-submit (pid {job.pid}, checkpoint 7) running on this host" in caplog.text


def test_a_job_still_running_past_the_bound_is_stopped_and_the_retry_starts_afresh(job, tmp_path, caplog):
    store = FileTaskStateStore(tmp_path / "state.json")
    reattach.remember(_context(store, 1), job.pid, checkpoint_id=7, try_number=1)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert reattach.wait_for_earlier_try(_context(store), 7, timeout_s=0) is False
    assert job.wait(timeout=30) == -signal.SIGTERM  # its process group was stopped
    assert f"spark-submit pid {job.pid} (try 1) still runs after" in caplog.text


def test_without_a_store_or_with_a_broken_one_nothing_is_recorded_and_the_task_goes_on(job, caplog):
    reattach.remember({}, job.pid, checkpoint_id=7, try_number=1)  # Airflow < 3.3: no store
    assert reattach.wait_for_earlier_try({}, 7, timeout_s=1) is False

    class Broken:
        def get(self, key, default=None):
            raise ConnectionError("API server unreachable")

        def set(self, key, value):
            raise ConnectionError("API server unreachable")

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        reattach.remember(_context(Broken(), 1), job.pid, checkpoint_id=7, try_number=1)
        assert reattach.wait_for_earlier_try(_context(Broken()), 7, timeout_s=1) is False
    assert f"spark-submit pid {job.pid} not recorded in the task's state (API server unreachable)" \
        in caplog.text
    assert "the task's state could not be read (API server unreachable)" in caplog.text


def test_an_airflow_before_3_3_keeps_todays_restore(job, tmp_path, monkeypatch):
    """Airflow's task state store came with 3.3 (``tasks/airflow_features.py``): before it, nothing is
    recorded and a retry runs the job again, as before."""
    from airflow_provider_kafka_eos.tasks import airflow_features

    monkeypatch.setattr(airflow_features, "airflow_version", lambda: (3, 2))
    store = FileTaskStateStore(tmp_path / "state.json")
    reattach.remember(_context(store, 1), job.pid, checkpoint_id=7, try_number=1)
    assert not store.path.exists()
    store.set(reattach.STATE_KEY, {"host": socket.gethostname(), "pid": job.pid, "create_time": 0.0,
                                   "checkpoint_id": 7, "try_number": 1})
    assert reattach.wait_for_earlier_try(_context(store), 7, timeout_s=1) is False


def test_a_malformed_record_is_named_and_ignored(tmp_path, caplog):
    store = FileTaskStateStore(tmp_path / "state.json")
    store.set(reattach.STATE_KEY, {"pid": 1})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert reattach.wait_for_earlier_try(_context(store), 7, timeout_s=1) is False
    assert f"task state {reattach.STATE_KEY} holds {{'pid': 1}}, not a job record" in caplog.text


def _wait_for_log(caplog, text: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in caplog.text:
        assert time.monotonic() < deadline, f"never logged: {text}"
        time.sleep(0.05)  # polling the log of another thread, deadline-bounded


# -- the whole of it: a real local spark-submit outlives its killed try --------------------------------

APP = '''
import pathlib, time

def build(spark, params):
    pathlib.Path(params["started"]).write_text("x")
    deadline = time.monotonic() + 300
    while not pathlib.Path(params["release"]).exists():  # the test's gate: opened once try 2 waits
        if time.monotonic() > deadline:
            raise SystemExit("never released")
        time.sleep(0.1)
    return spark.range(40, numPartitions=2).selectExpr(
        "concat('r-', cast(id as string)) as key", "cast(id as string) as value")
'''

TRY_ONE = '''
import json, sys
from datetime import datetime, timezone
from types import SimpleNamespace
from task_state_double import FileTaskStateStore
from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator

spec = json.loads(sys.argv[1])
operator = SparkEosSubmitOperator(**spec["operator"])
run = SimpleNamespace(dag_id="reattach_dag", run_id="run-1", logical_date=None,
                      run_after=datetime.fromisoformat(spec["run_after"]))
operator.execute({"dag_run": run, "ti": SimpleNamespace(try_number=1, xcom_push=lambda **kw: None),
                  "task_state_store": FileTaskStateStore(spec["state"])})
'''


@pytest.mark.spark
@pytest.mark.broker
@pytest.mark.provider_logic
def test_a_retry_waits_for_the_job_its_killed_try_left_running_and_takes_its_manifest(
    kafka_broker, monkeypatch, tmp_path, unique_name
):
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint
    from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator
    from kafka_eos_testing.verify import assert_exactly_once, count_keys

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_REATTACH", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_EOS_REATTACH",
                       json.dumps({"conn_type": "kafka_eos", "extra": kafka_broker.client_config()}))
    app, started, release = tmp_path / "reattach_app.py", tmp_path / "started", tmp_path / "release"
    app.write_text(APP)
    state = tmp_path / "state.json"
    pipeline, topic = unique_name("reattach"), unique_name("reattach-out")
    spec = {"operator": {"task_id": "submit", "pipeline_id": pipeline, "topic": topic,
                         "manifest_base_uri": str(tmp_path / "store"), "application_callable": f"{app}:build",
                         "application_params": {"started": str(started), "release": str(release)},
                         "kafka_eos_conn_id": "kafka_eos_reattach", "conn_id": "spark_reattach",
                         "conf": {"spark.ui.enabled": "false"}},
            "run_after": "2026-11-28T12:00:00+00:00", "state": str(state)}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pathlib.Path(__file__).parent),
                                                          os.environ.get("PYTHONPATH", "")])}
    # Its stdin stands for an Airflow 3 task's: fd 0 is the task's socket to its supervisor, which
    # closes when the supervisor sees its task die.
    try_one = subprocess.Popen([sys.executable, "-c", TRY_ONE, json.dumps(spec)], env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = FileTaskStateStore(state)
    job_pid = None
    try:
        deadline = time.monotonic() + 180
        while store.get(reattach.STATE_KEY) is None:  # the pid is recorded before the try waits on it
            assert time.monotonic() < deadline and try_one.poll() is None, "try 1 never recorded its job"
            time.sleep(0.1)  # polling another process's file, deadline-bounded
        job_pid = store.get(reattach.STATE_KEY)["pid"]
        os.killpg(job_pid, signal.SIGSTOP)  # held until try 2 looks: it cannot end first
        try_one.send_signal(signal.SIGKILL)  # the task's process dies (OOM killer, a killed runner)
        try_one.wait(timeout=30)
        try_one.stdin.close()  # ... and its supervisor's end of fd 0 goes with it

        retry = SparkEosSubmitOperator(**spec["operator"])
        run = SimpleNamespace(dag_id="reattach_dag", run_id="run-1", logical_date=None,
                              run_after=datetime(2026, 11, 28, 12, tzinfo=timezone.utc))
        pushed: dict = {}
        ti = SimpleNamespace(try_number=2, xcom_push=lambda key, value: pushed.__setitem__(key, value))
        context = {"dag_run": run, "task_state_store": store, "ti": ti}
        outcome: dict = {}
        caplog_lines: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda record: caplog_lines.append(record.getMessage())  # type: ignore[method-assign]
        logging.getLogger(LOGGER).addHandler(handler)
        logging.getLogger(LOGGER).setLevel(logging.INFO)

        def run_retry() -> None:
            try:
                outcome["uri"] = retry.execute(context)
            except BaseException as err:  # the thread reports what ended execute()
                outcome["error"] = err

        thread = threading.Thread(target=run_retry, daemon=True)
        thread.start()
        deadline = time.monotonic() + 120
        while not any("waiting for it to end" in line for line in caplog_lines):
            assert time.monotonic() < deadline and thread.is_alive(), f"try 2 did not wait: {outcome}"
            time.sleep(0.05)  # polling the other thread's log, deadline-bounded
        assert os.path.exists(f"/proc/{job_pid}")  # try 1's job still runs (it outlived its try)
        os.killpg(job_pid, signal.SIGCONT)
        release.write_text("go")
        thread.join(240)
        logging.getLogger(LOGGER).removeHandler(handler)
        assert not thread.is_alive() and "error" not in outcome, outcome
    finally:
        if try_one.poll() is None:
            try_one.kill()
        if job_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(job_pid, signal.SIGCONT)
                os.killpg(job_pid, signal.SIGKILL)
    uri = outcome["uri"]
    assert retry._eos_hook is None  # try 2 started no spark-submit of its own
    manifest = read_manifest(uri)
    assert manifest.status is ManifestStatus.PREPARED and manifest.prepared_by.try_number == 1
    assert pushed["checkpoint"]["outcome"] == "same_run"
    with TransactionAdmin(KafkaClientConfig.from_mapping(kafka_broker.client_config())) as admin:
        commit_checkpoint(admin, uri, committed_by="test")
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [f"r-{i}" for i in range(40)])
