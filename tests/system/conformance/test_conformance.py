"""One conformance suite of the exactly-once scenarios, run on each Spark target (issue 37).

Every target runs a checkpoint's job the way its operator does (``spark/job.py``'s body, the keys
application of tests/system/faults), with the test-only fault plan of ``kafka_eos_testing/fault_job.py``
(a task killed mid-write, the driver killed after its manifest), and every data-path test ends with a
read_committed consumer counting each expected key exactly once, nothing else:

* ``local-submit``: spark-submit, ``--master local[2,3]`` (the driver and the executors in one JVM);
* ``standalone-client``: spark-submit to the session's Spark standalone cluster in client deploy mode
  (``spark_cluster``: the executors run a Python without this provider);
* ``connect``: the job body in a client process of the session's Spark Connect server, as
  ``SparkEosConnectOperator`` runs it (``conformance_connect_job.py``; a process of its own, so that
  the "driver" side can be killed);
* ``standalone-cluster``: runs no job. Spark refuses a Python application in a standalone cluster's
  cluster deploy mode ("Cluster deploy mode is currently not supported for python applications on
  standalone clusters"), so the suite asserts that refusal, Spark's own and the submit task's (by
  name, before anything is claimed or submitted), with nothing prepared on the broker.

The scenarios are chained so that one test per target covers them in a few runs of the job (each run
costs a driver start, 15-30 s on the CI machine): prepare -> give-up (abort from the manifest) ->
nothing visible -> the next checkpoint, with partition 0's task killed mid-write (its retry fences the
dead attempt) and the driver killed after its manifest -> the rerun produces nothing -> commit -> a
re-trigger of the same checkpoint writes nothing -> count. Every target runs what its Spark changes:
the tasks on its executors (the kill mid-write, its retry's fencing, the provider's code shipped to
them), its driver's death after the vote, the rerun's restore, the commit and the count. The give-up
(an abort from the manifest: Kafka and the store, no Spark) and the re-trigger (the driver's restore
finding the checkpoint COMMITTED) are the same code on every master, so one target runs them
(``FULL_CHAIN``: Spark Connect, whose runs are the cheapest, a client process of a running server);
on the spark-submit targets they would cost CI four driver starts for no new proof (DEVELOPERS.md's
rule: one run proves a provider rule).

Not a target here: "bring your own runner" (docs/user-guide/own-runner.md). Its job calls
``write_exactly_once`` (through ``write_input_exactly_once``) in whatever driver another operator
gives it, a local or cluster SparkSession or a Connect session: the write and its faults are the ones
above. What it adds is the input's claim and the commit by input identity, which
tests/operators/test_commit_by_input.py and tests/system/dags/test_byo_runner_dag.py prove; a fifth series of
driver starts here would cost CI about a minute for the same data path.

What stays elsewhere because this suite does not prove it: the executor or worker JVM killed on the
cluster (tests/system/spark_cluster/test_spark_cluster_faults.py), the driver killed before its
manifest and the failed job (tests/system/faults/test_faults.py), the producer paths (librdkafka, 2PC).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import conformance_connect_job  # beside this file (pytest puts a test's folder on the path)
import pytest

from airflow_provider_kafka_eos.hooks.spark_submit import STANDALONE_PYTHON_CLUSTER_REFUSAL
from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import abort_checkpoint, commit_checkpoint
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    ManifestStatus,
    find_manifests,
    manifest_uri,
    read_manifest,
)
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import ConfigError
from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator
from airflow_provider_kafka_eos.spark import faults
from airflow_provider_kafka_eos.spark import job as eos_job
from airflow_provider_kafka_eos.tasks.fail_now import fail_now_exception
from kafka_eos_testing import fault_job
from kafka_eos_testing.spark import job_arguments, reported_manifest_uri, spark_submit_command
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.faults, pytest.mark.spark, pytest.mark.broker]

HERE = Path(__file__).resolve().parent
KEYS_APP = HERE.parent / "faults" / "keys_app.py"

COUNT, PARTITIONS, KILLED_AFTER = 240, 3, 40
KILL_TASK = f"kill_task_after_records={KILLED_AFTER},kill_task_partition=0"
JOB_TIMEOUT_S = 300


@dataclass
class JobRun:
    returncode: int
    output: str

    @property
    def manifest_uri(self) -> str | None:
        return reported_manifest_uri(self.output)

    def tail(self) -> str:
        return self.output[-4000:]


@dataclass
class Target:
    """How a checkpoint's job runs on one Spark target: ``run(...)`` -> its exit code and output."""

    name: str
    master: str | None = None  # spark-submit's master; None: a Spark Connect client
    conf: dict[str, str] | None = None
    connect_url: str | None = None

    def run(self, broker: Any, work: Path, prefix: str, topic: str, checkpoint: int, tag: str, *,
            fault: str = "") -> JobRun:
        arguments = job_arguments(
            prefix=prefix, topic=topic, checkpoint=checkpoint, manifest_base=work / "m",
            application=f"{KEYS_APP}:build_dataframe",
            params={"tag": tag, "count": COUNT, "partitions": PARTITIONS},
        )  # fmt: skip
        cmd, env = spark_submit_command(
            arguments, client_config=broker.client_config(), work_dir=work, master=self.master or "local",
            conf=self.conf, env={fault_job.ENV_VAR: fault}, application_file=fault_job.FILE,
        )  # fmt: skip
        if self.connect_url is not None:  # the job body in a Connect client process, no spark-submit
            cmd = [sys.executable, conformance_connect_job.FILE, *arguments]
            env[conformance_connect_job.URL_ENV] = self.connect_url
        result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
        return JobRun(result.returncode, result.stdout + "\n" + result.stderr)


DATA_TARGETS = ["local-submit", "standalone-client", "connect"]
FULL_CHAIN = "connect"  # the target that also runs the give-up and the re-trigger (module docstring)


@pytest.fixture(params=DATA_TARGETS)
def target(request) -> Target:
    """The target's servers are the session's (one Connect server, one standalone cluster)."""
    if request.param == "local-submit":
        return Target("local-submit", master="local[2,3]")
    if request.param == "standalone-client":
        cluster = request.getfixturevalue("spark_cluster")
        return Target("standalone-client", master=cluster.master_url, conf=cluster.submit_conf())
    server = request.getfixturevalue("spark_connect_server")
    return Target("connect", connect_url=server.url)


def _keys(tag: str) -> list[str]:
    return [f"{tag}-{i}" for i in range(COUNT)]


def _admin(broker) -> TransactionAdmin:
    return TransactionAdmin(KafkaClientConfig.from_mapping(broker.client_config()))


def _uncommitted_total(broker, topic) -> int:
    return sum(count_keys(broker.bootstrap, topic, isolation="read_uncommitted").values())


def test_give_up_then_task_and_driver_killed_then_rerun_commit_and_retrigger(
    target, kafka_broker, tmp_path, unique_name
):
    """The job's runs on the target, one pipeline, each step checked before the next (four runs on
    ``FULL_CHAIN``, two elsewhere: the module docstring says why)."""
    prefix, topic = unique_name(f"conf-{target.name}"), unique_name("out")
    given_up, written = f"{prefix}-g", f"{prefix}-k"
    full = target.name == FULL_CHAIN

    # 1. Prepare -> give-up (abort from the manifest): nothing visible, before or after.
    if full:
        first = target.run(kafka_broker, tmp_path, prefix, topic, 1, given_up)
        assert first.returncode == 0, first.tail()
        assert read_manifest(first.manifest_uri).status is ManifestStatus.PREPARED
        assert count_keys(kafka_broker.bootstrap, topic) == {}
        with _admin(kafka_broker) as admin:
            abort_checkpoint(admin, first.manifest_uri, aborted_by="conformance")
        assert read_manifest(first.manifest_uri).status is ManifestStatus.ABORTED
        assert count_keys(kafka_broker.bootstrap, topic) == {}

    # 2. The next checkpoint: partition 0's first attempt flushes KILLED_AFTER records and its Python
    # worker dies (the retry's producer fences the dead attempt's open transaction); then the driver
    # dies after writing the manifest, before it reports it.
    killed = target.run(kafka_broker, tmp_path, prefix, topic, 2, written,
                        fault=f"{KILL_TASK},exit_after_manifest")
    assert killed.returncode == faults.EXIT_AFTER_MANIFEST, killed.tail()
    assert killed.manifest_uri is None
    uri = manifest_uri(str(tmp_path / "m"), prefix, 2)
    prepared = read_manifest(uri)
    assert prepared.status is ManifestStatus.PREPARED and len(prepared.committables) == PARTITIONS
    assert count_keys(kafka_broker.bootstrap, topic) == {}  # the vote is cast, nothing is visible yet
    # In the log: the given-up checkpoint (aborted), the dead attempt's records, the prepared ones.
    in_log = (COUNT if full else 0) + KILLED_AFTER + COUNT
    assert _uncommitted_total(kafka_broker, topic) == in_log

    # 3. The submit task's retry finds the vote and produces nothing; the commit task commits it.
    rerun = target.run(kafka_broker, tmp_path, prefix, topic, 2, written)
    assert rerun.returncode == 0 and rerun.manifest_uri == uri, rerun.tail()
    assert read_manifest(uri).committables == prepared.committables
    assert _uncommitted_total(kafka_broker, topic) == in_log
    with _admin(kafka_broker) as admin:
        assert commit_checkpoint(admin, uri, committed_by="conformance").status == "committed"

    # 4. A re-trigger of the same checkpoint (a new run): it finds it committed and writes nothing.
    if full:
        again = target.run(kafka_broker, tmp_path, prefix, topic, 2, written)
        assert again.returncode == 0 and again.manifest_uri == uri, again.tail()
        assert read_manifest(uri).status is ManifestStatus.COMMITTED
        assert _uncommitted_total(kafka_broker, topic) == in_log
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys(written))


def test_standalone_cluster_mode_is_refused_with_nothing_prepared(
    kafka_broker, tmp_path, unique_name, monkeypatch
):
    """The ``standalone-cluster`` target: Spark refuses a Python driver there, and so does the submit
    task, by name, before anything is claimed or submitted (docs/user-guide/spark-cluster.md)."""
    prefix, topic = unique_name("conf-standalone-cluster"), unique_name("out")
    master = "spark://127.0.0.1:7077"  # never contacted: both refuse before they connect
    arguments = job_arguments(prefix=prefix, topic=topic, checkpoint=1, manifest_base=tmp_path / "m",
                              application=f"{KEYS_APP}:build_dataframe",
                              params={"tag": prefix, "count": COUNT, "partitions": PARTITIONS})
    cmd, env = spark_submit_command(arguments, client_config=kafka_broker.client_config(), work_dir=tmp_path,
                                    master=master)
    cmd[cmd.index("--master") + 2:cmd.index("--master") + 2] = ["--deploy-mode", "cluster"]
    spark = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
    assert spark.returncode != 0 and STANDALONE_PYTHON_CLUSTER_REFUSAL in spark.stdout + spark.stderr, \
        (spark.stdout + spark.stderr)[-3000:]

    monkeypatch.setenv("KAFKA_EOS_PRIVATE_DIR", str(tmp_path / "private"))
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_EOS_CONFORMANCE", json.dumps(
        {"conn_type": "kafka_eos", "extra": kafka_broker.client_config()}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONFORMANCE_CLUSTER", json.dumps(
        {"conn_type": "spark", "host": "spark://127.0.0.1", "port": 7077,
         "extra": {"deploy-mode": "cluster"}}))
    operator = SparkEosSubmitOperator(
        task_id="submit", pipeline_id=prefix, topic=topic, manifest_base_uri="s3://bucket/manifests",
        application_callable=f"{KEYS_APP}:build_dataframe", kafka_eos_conn_id="kafka_eos_conformance",
        conn_id="spark_conformance_cluster", input_id="batch-1",
    )  # fmt: skip
    with pytest.raises(fail_now_exception(), match=f"standalone master {master}") as failed:
        operator.execute({})
    assert isinstance(failed.value.__cause__, ConfigError)
    assert STANDALONE_PYTHON_CLUSTER_REFUSAL in str(failed.value) and "'client'" in str(failed.value)
    assert "Nothing was claimed or submitted" in str(failed.value)

    # Nothing prepared: no transaction of the pipeline, no manifest, no topic, no private file.
    with _admin(kafka_broker) as admin:
        assert admin.list(prefixes=[prefix]) == []
    assert find_manifests(str(tmp_path / "m"), prefix) == []
    assert not (tmp_path / "private").exists()
    with pytest.raises(LookupError, match="does not exist"):
        count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted")
    assert eos_job.RESULT_PREFIX not in spark.stdout
