"""The fault matrix on the standalone cluster: each case kills something real, and ends with a
read_committed consumer seeing every key exactly once.

* ``executor_killed``: ``kill -9`` of the executor JVM running partition 0 while its task holds
  an open transaction with 50 records flushed; Spark reschedules the task, whose new attempt
  fences the dead one's transaction.
* ``worker_lost``: ``kill -9`` of the *worker* JVM that launched that executor (its executor
  follows it); the task moves to the other worker.

A task killed mid-write (its Python worker dies) and the driver killed after writing the manifest
run on this cluster in the conformance suite (tests/system/conformance), as on every Spark target;
here, what only a cluster has: its executor and worker JVMs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest
from cluster_jobs import KEYS_APP

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import read_manifest
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
