"""The fault matrix on the standalone cluster: each case kills something real, and ends with a
read_committed consumer seeing every key exactly once.

* ``executor_killed``: ``kill -9`` of the executor JVM running partition 0 while its task holds
  an open transaction with 50 records flushed; Spark reschedules the task, whose new attempt
  fences the dead one's transaction.
* ``worker_lost``: ``kill -9`` of the *worker* JVM that launched that executor (its executor
  follows it); the task moves to the other worker.
* the submit task's process killed while its job runs on the cluster: the retry waits for that job
  instead of starting a second one (``tasks/reattach.py``).

A task killed mid-write (its Python worker dies) and the driver killed after writing the manifest
run on this cluster in the conformance suite (tests/system/conformance), as on every Spark target;
here, what only a cluster has: its executor and worker JVMs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import signal
import subprocess
import threading
import time

import psutil
import pytest
from cluster_jobs import (
    KEYS_APP,
    _keys,
    operator_arguments,
    operator_connections,
    run_submit_try,
    task_context,
)
from task_state_double import FileTaskStateStore

from airflow_provider_kafka_eos.hooks.spark_submit import EosSparkSubmitHook
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest
from airflow_provider_kafka_eos.operators.commit import KafkaCommitTransactionsOperator
from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator
from airflow_provider_kafka_eos.tasks import reattach
from kafka_eos_testing import fault_job
from kafka_eos_testing.broker.txn_testkit import wait_for
from kafka_eos_testing.spark import (
    commit_manifest,
    job_arguments,
    reported_manifest_uri,
    spark_submit_command,
)
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.faults, pytest.mark.spark, pytest.mark.broker]

COUNT, PARTITIONS, HELD_AFTER = 300, 3, 50


def _uncommitted_total(broker, topic):
    return sum(count_keys(broker.bootstrap, topic, isolation="read_uncommitted").values())


def _kill_mid_write(cluster, broker, tmp_path, prefix, topic, fault):
    """Run the job with partition 0 held mid-write, kill its executor or worker, wait for the end."""
    hold = tmp_path / "hold"
    hold.mkdir()
    params = {"tag": prefix, "count": COUNT, "partitions": PARTITIONS}
    arguments = job_arguments(prefix=prefix, topic=topic, checkpoint=1, manifest_base=tmp_path / "m",
                              application=f"{KEYS_APP}:build_dataframe", params=params)
    plan = f"hold_task_after_records={HELD_AFTER},kill_task_partition=0,hold_dir={hold}"
    cmd, env = spark_submit_command(arguments, client_config=broker.client_config(), work_dir=tmp_path,
                                    master=cluster.master_url, conf=cluster.submit_conf(),
                                    env={fault_job.ENV_VAR: plan}, application_file=fault_job.FILE)
    log = tmp_path / "spark-submit.log"
    with open(log, "w") as out, subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT) as job:
        try:
            marker = hold / "held-0"
            wait_for(lambda: marker.exists() or job.poll() is not None, "partition 0 to hold mid-write", 600)
            assert marker.exists(), log.read_text()[-4000:]
            executor = cluster.executor_of(json.loads(marker.read_text())["pid"])
            if fault == "executor_killed":
                os.kill(executor, signal.SIGKILL)
            else:
                cluster.kill_worker(cluster.worker_of(executor))
                # the worker's executor notices its worker is gone and exits
                wait_for(lambda: executor not in cluster.executor_pids(), "the lost worker's executor", 600)
            returncode = job.wait(timeout=300)
        finally:
            if job.poll() is None:
                job.kill()
    output = log.read_text()
    assert returncode == 0, output[-4000:]
    return read_manifest(reported_manifest_uri(output))


@pytest.mark.parametrize("fault", ["executor_killed", "worker_lost"])
def test_fault_on_the_cluster_ends_exactly_once(fault, spark_cluster, kafka_broker, tmp_path, unique_name):
    prefix, topic = unique_name(fault.replace("_", "-")), unique_name("out")
    manifest = _kill_mid_write(spark_cluster, kafka_broker, tmp_path, prefix, topic, fault)
    assert len(manifest.committables) == PARTITIONS
    # The killed attempt's flushed records are in the log; its retry fenced (aborted) them.
    assert _uncommitted_total(kafka_broker, topic) == COUNT + HELD_AFTER
    commit_manifest(kafka_broker.bootstrap, manifest)
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [f"{prefix}-{i}" for i in range(COUNT)])


def test_a_retry_waits_for_the_job_its_killed_try_left_running_on_the_cluster(
    spark_cluster, kafka_broker, tmp_path, unique_name, monkeypatch, caplog
):
    """The submit task's re-attach (``tasks/reattach.py``) on the standalone cluster. Spark runs no
    Python driver in a standalone cluster's cluster deploy mode (the operator refuses it by name,
    docs/user-guide/spark-cluster.md), so a pipeline on this cluster runs in client mode: its driver
    is the spark-submit on the Airflow worker, its executors on the cluster's workers, and a retry
    re-attaches to it by pid as in local mode.

    Try 1 runs in a child process, so that it can be SIGKILLed as the OOM killer kills a task's
    process. Once its spark-submit is recorded in the task state, the job's process group is held
    with SIGSTOP (it cannot prepare the checkpoint before try 2 looks) and try 1 is killed; try 2
    (same store, try_number 2) must say that it waits for that pid and start no spark-submit of its
    own (``EosSparkSubmitHook.submit`` fails the test if called); the job resumed, try 2 returns the
    manifest try 1's job prepared, the commit task commits it, read_committed finds each key once.

    The store is the file-backed double (``tests/support/task_state_double.py``): Airflow 3.3's
    ``context["task_state_store"]`` talks to a task's supervisor, which a try run by a test has not.
    The real store, with a local-mode job, is run on a real scheduler:
    ``tests/system/airflow_scheduler/test_real_scheduler.py``.
    """
    count = 200
    spark_conn, kafka_conn = operator_connections(spark_cluster, kafka_broker, monkeypatch, unique_name)
    prefix, topic = unique_name("reattach"), unique_name("out")
    # One executor on one worker: what is re-attached to is the driver (CI time on a 2-core machine).
    arguments = operator_arguments(spark_cluster, spark_conn=spark_conn, kafka_conn=kafka_conn, prefix=prefix,
                                   topic=topic, manifest_base=tmp_path / "m", count=count, partitions=1,
                                   conf={"spark.cores.max": "1"})
    store = FileTaskStateStore(tmp_path / "task-state.json")
    try_1 = multiprocessing.get_context("spawn").Process(
        target=run_submit_try, args=(arguments, prefix, 1, str(store.path)), name="submit-try-1", daemon=True)
    started: list[str] = []

    def no_second_job(hook, application="", **kwargs):
        started.append(application)
        still = job is not None and job.is_running() and job.status() != psutil.STATUS_ZOMBIE
        raise AssertionError(f"try 2 started a spark-submit of its own; try 1's job was "
                             f"{'still running' if still else 'gone'} then")

    monkeypatch.setattr(EosSparkSubmitHook, "submit", no_second_job)  # in this process only: try 2's
    outcome: dict[str, object] = {}

    def try_2() -> None:
        try:
            outcome["uri"] = SparkEosSubmitOperator(**arguments).execute(task_context(prefix, 2, store))
        except BaseException as err:  # reported by the assertions below
            outcome["error"] = err

    executors_before = set(spark_cluster.executor_pids())
    try_1.start()
    job = None
    try:
        record = wait_for(lambda: store.get(reattach.STATE_KEY) or try_1.exitcode is not None,
                          "try 1's spark-submit to be recorded in the task state", 300)
        assert isinstance(record, dict), f"try 1 ended (exit {try_1.exitcode}) before starting its job"
        job = psutil.Process(record["pid"])
        assert prefix in " ".join(job.cmdline())  # the recorded process is this pipeline's spark-submit
        assert os.getpgid(job.pid) == job.pid  # the job leads a process group of its own
        # Held once the job is under way, which is what a retry's re-attach is for: its Python driver runs
        # and the master gave its application an executor. (Twice in CI try 1's job died at once: an
        # earlier in-process Spark test had shipped the runtime zip, PySpark's addPyFile put it on this
        # process's sys.path, and the spawned try 1 imported the provider from it, so its job.py was a
        # path inside the zip; spark/shipping.py keeps the driver's sys.path since.)
        wait_for(lambda: (_driver_runs(job) and set(spark_cluster.executor_pids()) - executors_before)
                 or not job.is_running(), "try 1's job to run on the cluster", 300)
        os.killpg(job.pid, signal.SIGSTOP)  # held: it cannot end before try 2 looks for it
        held_at = time.monotonic()
        try_1.kill()  # the task's process dies; its job, in a session of its own, goes on
        try_1.join(60)
        assert try_1.exitcode == -signal.SIGKILL and job.is_running()
        retry = threading.Thread(target=try_2, name="submit-try-2", daemon=True)
        waiting = f"try 1 left its spark-submit (pid {job.pid}, checkpoint 5) running on this host"
        with caplog.at_level(logging.INFO, logger=reattach.__name__):
            retry.start()
            wait_for(lambda: waiting in caplog.text or not retry.is_alive(),
                     "try 2 to find the job try 1 left running", 120)
            assert waiting in caplog.text, outcome
            assert job.status() == psutil.STATUS_STOPPED  # try 2 waits on it, the job has not ended
            os.killpg(job.pid, signal.SIGCONT)
            held_s = time.monotonic() - held_at
            retry.join(300)
        assert not retry.is_alive(), "try 2 still waits after the job was resumed"
        assert "error" not in outcome, (outcome, f"held {held_s:.1f} s", _lines_of(caplog, reattach.__name__))
        assert started == []  # try 2 started no spark-submit of its own
        assert "its checkpoint's manifest is the result" in caplog.text
    finally:
        if try_1.is_alive():
            try_1.kill()
            try_1.join(60)
        if job is not None and job.is_running():  # a failed test leaves no job behind
            with contextlib.suppress(ProcessLookupError):
                os.killpg(job.pid, signal.SIGCONT)
                os.killpg(job.pid, signal.SIGKILL)
    manifest = read_manifest(outcome["uri"])
    assert manifest.status is ManifestStatus.PREPARED and manifest.prepared_by.try_number == 1
    commit = KafkaCommitTransactionsOperator(task_id="commit", manifest_uri=outcome["uri"],
                                             kafka_eos_conn_id=kafka_conn)
    assert commit.execute({})["records"] == count
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys(prefix, count))


def _lines_of(caplog, logger: str) -> list[str]:
    """What ``logger`` said during the test (a failure message's evidence)."""
    return [record.getMessage() for record in caplog.records if record.name == logger]


def _driver_runs(job) -> bool:
    """Whether the job's Python driver runs: a python process under spark-submit's JVM."""
    try:
        return any("python" in (child.name() or "") for child in job.children(recursive=True))
    except psutil.Error:
        return False
