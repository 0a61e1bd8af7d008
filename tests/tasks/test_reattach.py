"""A retry of the submit task waits for the spark-submit its earlier try left running (tasks/reattach.py).

The rule on real processes (a ``cat`` in a session of its own stands for the job), with a
file-backed task state store (``tests/support/task_state_double.py``: the real one needs a scheduler's
supervisor). The whole of it, with Airflow 3.3's own store, a real spark-submit whose task process
is SIGKILLed and a read_committed count, runs on a real scheduler:
``tests/system/airflow_scheduler/test_real_scheduler.py``; on the Spark standalone cluster (client
mode, this store): ``tests/system/spark_cluster/test_spark_cluster_faults.py``.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
import threading
import time
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
    boot_id, ticks = record["started"].split("/")
    store.set(reattach.STATE_KEY, {**record, "started": f"{boot_id}/{int(ticks) - 100}"})
    assert reattach.left_running(_context(store), 7) is None  # the pid now names another process
    store.set(reattach.STATE_KEY, {**record, "started": f"another-boot/{ticks}"})
    assert reattach.left_running(_context(store), 7) is None  # the host rebooted: another process
    store.set(reattach.STATE_KEY, record)
    job.stdin.close()
    job.wait(timeout=10)
    assert reattach.left_running(_context(store), 7) is None  # ended: the retry runs the job itself


def test_a_clock_step_does_not_make_the_running_job_look_ended(job, tmp_path, monkeypatch):
    """psutil's ``create_time()`` is the boot's wall-clock time plus the ticks since boot, and the boot's
    wall-clock time (``btime`` in /proc/stat) moves when the clock is stepped, so a retry waiting across
    a step would take the running job for ended and start a second one. The record names the process
    by boot id and ticks, which no clock change moves."""
    import psutil._pslinux as psutil_linux

    store = FileTaskStateStore(tmp_path / "state.json")
    reattach.remember(_context(store, 1), job.pid, checkpoint_id=7, try_number=1)
    stepped = psutil_linux.boot_time() + 1.0  # what /proc/stat says after the clock is stepped by 1 s
    monkeypatch.setattr(psutil_linux, "boot_time", lambda: stepped)
    assert reattach.left_running(_context(store), 7).pid == job.pid
    job.stdin.close()
    job.wait(timeout=10)
    assert reattach.left_running(_context(store), 7) is None


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


def test_killing_the_waiting_task_stops_the_job_it_waits_for(job, tmp_path, monkeypatch):
    """A person marks the waiting try failed (Airflow calls ``on_kill``): the job it waited for is
    stopped too, as the job the try had started itself would be."""
    from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_REATTACH", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    store = FileTaskStateStore(tmp_path / "state.json")
    reattach.remember(_context(store, 1), job.pid, checkpoint_id=7, try_number=1)
    operator = SparkEosSubmitOperator(task_id="submit", pipeline_id="p", topic="t", conn_id="spark_reattach",
                                      manifest_base_uri=str(tmp_path), application_callable="m:f")
    waiter = threading.Thread(target=operator._earlier_try_prepared,
                              args=(_context(store), 7, str(tmp_path / "m.json")), daemon=True)
    waiter.start()
    deadline = time.monotonic() + 60
    while operator._left_running is None:
        assert time.monotonic() < deadline and waiter.is_alive(), "the try never found the job"
        time.sleep(0.05)  # polling another thread's state, deadline-bounded
    operator.on_kill()
    assert job.wait(timeout=30) == -signal.SIGTERM
    waiter.join(30)
    assert not waiter.is_alive()


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
    # A record that would be waited on with 3.3's store (the running job itself): only the version decides.
    store.set(reattach.STATE_KEY, {"host": socket.gethostname(), "pid": job.pid, "checkpoint_id": 7,
                                   "started": reattach.process_start(job.pid), "try_number": 1})
    assert reattach.wait_for_earlier_try(_context(store), 7, timeout_s=1) is False
    monkeypatch.setattr(airflow_features, "airflow_version", lambda: (3, 3))
    assert reattach.left_running(_context(store), 7) is not None  # the same record, on 3.3


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
