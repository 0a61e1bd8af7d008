"""Fault injection on the exactly-once path: kill it somewhere, recover, count every key.

Each test ends with a read_committed consumer seeing every expected key exactly once after
recovery. Where a kill must take down the Spark *driver*, the job runs under spark-submit in
a subprocess (a driver exit would otherwise end the test process); recovery then runs in
this process's SparkSession, as the next attempt of the submit task would.

The scenarios every Spark target must pass (a task killed mid-write, the driver killed after its
manifest, rerun, re-trigger, give-up) are one suite in tests/system/conformance, run on local
spark-submit, the standalone cluster and Spark Connect; what stays here is what it does not run: the
driver killed before its manifest, a failed job, the commit task killed half way, a broker restart,
transaction timeouts, and the other producer paths.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    ManifestStatus,
    find_manifests,
    manifest_uri,
    read_manifest,
)
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import DataLossError
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import TxnState
from airflow_provider_kafka_eos.operators.commit import KafkaCommitTransactionsOperator
from airflow_provider_kafka_eos.spark import faults
from airflow_provider_kafka_eos.spark import job as eos_job
from airflow_provider_kafka_eos.spark.faults import FaultPlan
from airflow_provider_kafka_eos.spark.writer import write_exactly_once
from kafka_eos_testing import fault_job
from kafka_eos_testing.spark import commit_manifest, keyed_frame
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.faults, pytest.mark.spark, pytest.mark.broker]

HERE = pathlib.Path(__file__).resolve().parent
SPARK_SUBMIT = pathlib.Path(sys.executable).with_name("spark-submit")


# The producer paths a fault test can run on (write_exactly_once keywords). The Arrow producer is
# the default, so every test runs on it; the parametrized ones also run on librdkafka and 2PC.
PATHS = {
    "arrow": {"producer": "arrow"},
    "librdkafka": {"producer": "librdkafka"},
    "arrow-2pc": {"producer": "arrow", "two_phase_commit": True},
}


def _keys(tag, n):
    return [f"{tag}-{i}" for i in range(n)]


def _write(spark_df, broker, base, prefix, topic, checkpoint, **kwargs):
    return write_exactly_once(
        spark_df,
        topic=topic,
        kafka_config=broker.client_config(),
        transactional_id_prefix=prefix,
        checkpoint_id=checkpoint,
        manifest_base_uri=str(base),
        **kwargs,
    )


def _admin(broker):
    return TransactionAdmin(KafkaClientConfig.from_mapping(broker.client_config()))


def _ongoing(broker, prefix):
    with _admin(broker) as admin:
        return sorted(t.transactional_id for t in admin.list(prefixes=[prefix], states=["Ongoing"]))


def _uncommitted_total(broker, topic):
    return sum(count_keys(broker.bootstrap, topic, isolation="read_uncommitted").values())


@pytest.fixture
def kafka_eos_conn(monkeypatch, unique_name):
    """An Airflow connection (env var) pointing at a broker: ``kafka_eos_conn(broker) -> conn id``."""

    def make(broker):
        conn_id = unique_name("kafka_eos").replace("-", "_")
        extra = broker.client_config()
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kafka_eos", "extra": extra})
        )
        return conn_id

    return make


def test_task_killed_mid_write_is_fenced_by_its_retry_on_librdkafka(
    spark, kafka_broker, tmp_path, unique_name
):
    """Partition 0's first attempt flushes 150 records and its worker dies; local[2,3] retries it.

    On the librdkafka producer: the default (Arrow) producer's case runs on every Spark target in
    tests/system/conformance."""
    prefix, topic = unique_name("kill"), unique_name("out")
    df = keyed_frame(spark, "k", 600, 3)
    plan = FaultPlan(kill_task_after_records=150, kill_task_partition=0)
    manifest = _write(df, kafka_broker, tmp_path, prefix, topic, 1, fault_plan=plan, **PATHS["librdkafka"])
    assert len(manifest.committables) == 3
    # The dead attempt flushed 150 records before dying: they are in the log...
    assert _uncommitted_total(kafka_broker, topic) == 600 + 150
    commit_manifest(kafka_broker.bootstrap, manifest)
    # ...but it was fenced and aborted by the retry: each key exactly once.
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys("k", 600))


@pytest.mark.parametrize("path", ["arrow", "librdkafka"])
def test_job_failing_after_some_partitions_prepared_is_rerun_cleanly(
    spark, kafka_broker, tmp_path, unique_name, path
):
    prefix, topic = unique_name("partial"), unique_name("out")
    df = keyed_frame(spark, "p", 300, 3)
    with pytest.raises(Exception, match="injected failure of partition 1"):
        _write(df, kafka_broker, tmp_path, prefix, topic, 7, fault_plan=FaultPlan(fail_task_partition=1),
               **PATHS[path])
    assert find_manifests(str(tmp_path), prefix) == []  # no vote: the job did not finish
    assert f"{prefix}-1-7" in _ongoing(kafka_broker, prefix)  # prepared transactions were left open

    manifest = _write(df, kafka_broker, tmp_path, prefix, topic, 7, **PATHS[path])  # the submit task's retry
    commit_manifest(kafka_broker.bootstrap, manifest)
    assert _ongoing(kafka_broker, prefix) == []
    assert _uncommitted_total(kafka_broker, topic) > 300
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys("p", 300))


def _spark_submit(broker, base, prefix, topic, checkpoint, fault, tmp_path):
    """Run the job the way SparkEosSubmitOperator does (config via a 0600 file named in the env)."""
    config_file = tmp_path / "client.json"
    config_file.write_text(json.dumps(broker.client_config()))
    config_file.chmod(0o600)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env[eos_job.CONFIG_FILE_ENV] = str(config_file)
    env[fault_job.ENV_VAR] = fault  # read by the test-only entry point, never by spark/job.py
    params = {"tag": "j", "count": 240, "partitions": 3}
    cmd = [
        str(SPARK_SUBMIT),
        "--master",
        "local[2,3]",
        "--conf",
        "spark.ui.enabled=false",
        fault_job.FILE,
        "--pipeline-id",
        prefix,
        "--topic",
        topic,
        "--transactional-id-prefix",
        prefix,
        "--checkpoint-id",
        str(checkpoint),
        "--manifest-base-uri",
        str(base),
        "--application",
        f"{HERE / 'keys_app.py'}:build_dataframe",
        "--params",
        json.dumps(params),
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.skipif(not SPARK_SUBMIT.exists(), reason="needs the spark-submit script of the pyspark install")
def test_job_killed_after_partitions_prepared_before_the_manifest(spark, kafka_broker, tmp_path, unique_name):
    prefix, topic = unique_name("nomanifest"), unique_name("out")
    result = _spark_submit(kafka_broker, tmp_path / "m", prefix, topic, 3, "exit_before_manifest", tmp_path)
    assert result.returncode == faults.EXIT_BEFORE_MANIFEST, result.stdout[-3000:] + result.stderr[-3000:]
    assert eos_job.RESULT_PREFIX not in result.stdout
    assert find_manifests(str(tmp_path / "m"), prefix) == []
    assert _ongoing(kafka_broker, prefix) == [f"{prefix}-{p}-3" for p in range(3)]

    manifest = _write(keyed_frame(spark, "j", 240, 3), kafka_broker, tmp_path / "m", prefix, topic, 3)
    commit_manifest(kafka_broker.bootstrap, manifest)
    assert _uncommitted_total(kafka_broker, topic) == 480  # the orphans' copies, aborted
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys("j", 240))


def test_commit_task_killed_after_k_of_n_commits_is_retried(
    spark, kafka_broker, tmp_path, unique_name, kafka_eos_conn
):
    """The commit task died after 2 of 4 EndTxn: its retry commits the rest, reports honestly."""
    prefix, topic = unique_name("commitk"), unique_name("out")
    manifest = _write(keyed_frame(spark, "c", 400, 4), kafka_broker, tmp_path, prefix, topic, 1)
    with _admin(kafka_broker) as admin:  # what the killed try managed before dying
        admin.commit(manifest.committables[:2])
    uri = manifest_uri(str(tmp_path), prefix, 1)
    operator = KafkaCommitTransactionsOperator(
        task_id="commit", manifest_uri=uri, kafka_eos_conn_id=kafka_eos_conn(kafka_broker)
    )
    report = operator.execute({})
    assert report["outcomes"] == {"already_committed": 2, "committed": 2}
    assert report["records"] == 400 and report["transactions"] == 4
    assert read_manifest(uri).status is ManifestStatus.COMMITTED
    again = operator.execute({})  # another retry: nothing to do, same report
    assert again["already_committed"] is True and again["records"] == 400
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), _keys("c", 400))


@pytest.mark.parametrize("path", ["arrow", "arrow-2pc", "librdkafka"])
def test_broker_restarted_between_prepare_and_commit(
    spark, kafka_broker_pool, tmp_path, unique_name, kafka_eos_conn, path
):
    # One broker for the three paths (each restarts it; its data dir survives): two start-ups fewer.
    broker = kafka_broker_pool(partitions=2, two_phase_commit=True)
    prefix, topic = unique_name("restart"), unique_name("out")
    df = keyed_frame(spark, "r", 200, 2)
    manifest = _write(df, broker, tmp_path / "m", prefix, topic, 1, **PATHS[path])
    broker.restart()
    with _admin(broker) as admin:
        states = admin.describe([c.transactional_id for c in manifest.committables])
    assert {d.state for d in states.values()} == {TxnState.ONGOING}  # prepared state survived
    if path == "arrow-2pc":  # ...and so did 2PC's never-expiring timeout
        assert {d.timeout_ms for d in states.values()} == {2**31 - 1}
    report = KafkaCommitTransactionsOperator(
        task_id="commit",
        manifest_uri=manifest_uri(str(tmp_path / "m"), prefix, 1),
        kafka_eos_conn_id=kafka_eos_conn(broker),
    ).execute({})
    assert report["outcomes"] == {"committed": 2}
    assert_exactly_once(count_keys(broker.bootstrap, topic), _keys("r", 200))


def test_commit_after_the_transaction_timed_out_fails_loudly_then_a_rerun_recovers(
    spark, kafka_broker_factory, tmp_path, unique_name, kafka_eos_conn
):
    """Invariant 7: never report success for a transaction the broker aborted on timeout."""
    broker = kafka_broker_factory(abort_check_interval_ms=200)
    prefix, topic = unique_name("timeout"), unique_name("out")
    df = keyed_frame(spark, "t", 100, 2)
    manifest = _write(df, broker, tmp_path, prefix, topic, 1, transaction_timeout_ms=12_000)
    ids = [c.transactional_id for c in manifest.committables]
    deadline = time.monotonic() + 60
    with _admin(broker) as admin:
        while any(d.state == TxnState.ONGOING for d in admin.describe(ids).values()):
            assert time.monotonic() < deadline, "the broker never timed the transactions out"
            time.sleep(0.2)

    uri = manifest_uri(str(tmp_path), prefix, 1)
    operator = KafkaCommitTransactionsOperator(
        task_id="commit", manifest_uri=uri, kafka_eos_conn_id=kafka_eos_conn(broker)
    )
    with pytest.raises(DataLossError) as excinfo:
        operator.execute({})
    message = str(excinfo.value)
    assert any(t in message for t in ids) and "kafka-eos-txn runbook " in message
    assert read_manifest(uri).status is ManifestStatus.PREPARED  # nothing reported as committed
    assert count_keys(broker.bootstrap, topic) == {}

    # Clearing the run: restore marks the lost checkpoint ABORTED and produces it again.
    rerun = _write(df, broker, tmp_path, prefix, topic, 1)
    assert rerun.status is ManifestStatus.PREPARED and rerun.committables != manifest.committables
    operator.execute({})
    assert_exactly_once(count_keys(broker.bootstrap, topic), _keys("t", 100))


def test_no_manifest_is_written_for_transactions_about_to_time_out(
    spark, kafka_broker, tmp_path, unique_name
):
    """A timeout shorter than the job + commit safety margin: the job refuses to vote, changes nothing."""
    from airflow_provider_kafka_eos.kafka.errors import TransactionTimeoutRiskError

    prefix, topic = unique_name("tooshort"), unique_name("out")
    with pytest.raises((TransactionTimeoutRiskError, DataLossError)) as excinfo:
        _write(
            keyed_frame(spark, "s", 20, 2),
            kafka_broker,
            tmp_path,
            prefix,
            topic,
            1,
            transaction_timeout_ms=3000,
        )
    assert "wrote no manifest" in str(excinfo.value) and "kafka-eos-txn runbook " in str(excinfo.value)
    assert find_manifests(str(tmp_path), prefix) == []
    assert count_keys(kafka_broker.bootstrap, topic) == {}
