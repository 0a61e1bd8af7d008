"""Shared steps of the secured-mode tests: real Kafka 4.4 nodes in TLS / mTLS / SCRAM modes.

Each test module starts one node for its mode (module scope) and stops it at the end; the
certificates are made for that run in the node's data dir (never committed).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.producers.librdkafka import PartitionTransaction, TransactionProtocol
from kafka_eos_testing.verify import assert_exactly_once, count_keys

PREFIX = "secured-"


def acl_entries(principal: str) -> list[dict[str, Any]]:
    """What a pipeline principal needs: its topics, transactional ids and the verify consumer's group."""
    return [
        {
            "principal": principal,
            "resource_type": rtype,
            "pattern_type": "PREFIXED",
            "name": name,
            "operation": "ALL",
        }
        for rtype, name in (("TOPIC", PREFIX), ("TRANSACTIONAL_ID", PREFIX), ("GROUP", "kafka-eos-verify-"))
    ]


def write_acl_file(directory: Path, doc: Mapping[str, Any]) -> str:
    path = directory / "acls.json"
    path.write_text(json.dumps(doc))
    return str(path)


def unique(stem: str) -> str:
    return f"{PREFIX}{stem}-{uuid.uuid4().hex[:8]}"


PRODUCER_PATHS = ("librdkafka", "arrow")


def two_partition_pipeline(
    config: Mapping[str, Any], admin_config: Mapping[str, Any], path: str = "librdkafka"
) -> float:
    """Create a 2-partition topic, write one transaction per partition through one of the
    provider's producer paths (``librdkafka``: confluent-kafka; ``arrow``: RecordBatch v2 over the
    kafka-python wire), commit both through the transaction admin, and count keys as a
    read_committed consumer. Returns the seconds it took."""
    from confluent_kafka.admin import AdminClient, NewTopic

    started = time.monotonic()
    topic = unique("topic")
    admin = AdminClient(dict(admin_config))
    admin.create_topics([NewTopic(topic, 2, 1)], operation_timeout=10)[topic].result(timeout=15)
    client = KafkaClientConfig.from_mapping(dict(config))
    expected: list[bytes] = []
    with TransactionAdmin(client) as txn_admin:
        protocol = TransactionProtocol.from_admin(txn_admin)
        committables = []
        for partition in (0, 1):
            tid = unique(f"p{partition}")
            keys = [f"{tid}/{i}".encode() for i in range(50)]
            expected += keys
            if path == "arrow":
                import pyarrow as pa

                from airflow_provider_kafka_eos.kafka.producers.arrow import ArrowPartitionTransaction

                arrow = ArrowPartitionTransaction(
                    admin=txn_admin,
                    transactional_id=tid,
                    topic=topic,
                    transaction_timeout_ms=60_000,
                    protocol=protocol,
                )
                arrow.begin()
                arrow.write_columns(
                    pa.array(keys, pa.binary()),
                    pa.array([b"v"] * len(keys), pa.binary()),
                    partitions=pa.array([partition] * len(keys), pa.int32()),
                )
                committable = arrow.prepare()
            else:
                txn = PartitionTransaction(
                    confluent_config=client.confluent(),
                    transactional_id=tid,
                    topic=topic,
                    transaction_timeout_ms=60_000,
                    protocol=protocol,
                    describe=txn_admin.describe,
                    init_timeout_s=30,
                )
                txn.begin()
                txn.write_rows(keys, [b"v"] * len(keys), partitions=[partition] * len(keys))
                committable = txn.prepare()
            assert committable is not None
            committables.append(committable)
        assert count_keys(dict(config), topic) == {}  # prepared, not visible to read_committed
        outcomes = txn_admin.commit(committables)
    assert sorted(o.outcome for o in outcomes) == ["committed", "committed"]
    assert_exactly_once(count_keys(dict(config), topic), expected)
    return time.monotonic() - started


LIMIT_S = 1.0


def refusal_on_both_paths(
    config: Mapping[str, Any], error_cls: type[Exception]
) -> list[tuple[str, str, float]]:
    """Connect with ``config`` through the kafka-python wire and the librdkafka producer; each must
    raise ``error_cls`` within :data:`LIMIT_S`. Returns ``(path, message, seconds)`` per path."""
    import pytest

    from airflow_provider_kafka_eos.kafka.protocol.wire import Wire

    client = KafkaClientConfig.from_mapping(dict(config))
    results = []
    started = time.monotonic()
    with pytest.raises(error_cls) as caught:
        Wire(client, connect_timeout_ms=10_000)
    results.append(("kafka-python", str(caught.value), time.monotonic() - started))
    txn = PartitionTransaction(
        confluent_config=client.confluent(),
        transactional_id=unique("refused"),
        topic=unique("refused"),
        transaction_timeout_ms=60_000,
        protocol=TransactionProtocol(transaction_version=2, end_txn_version=5),
        describe=lambda ids: {},
        init_timeout_s=10,
    )
    started = time.monotonic()
    with pytest.raises(error_cls) as caught:
        txn.begin()
    results.append(("librdkafka", str(caught.value), time.monotonic() - started))
    for path, message, took in results:
        print(f"refusal {error_cls.__name__} {path} {took * 1000:.0f} ms: {message.split('. Next step')[0]}")
        assert took < LIMIT_S, (path, took, message)
        assert "password" not in message.lower() or "sasl.password" in message, message
    return results


def set_connection(monkeypatch, conn_id: str, config: Mapping[str, Any], **extra: Any) -> str:
    """A ``kafka_eos`` connection whose extra is ``config`` (secrets included), as AIRFLOW_CONN_<ID>."""
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}",
        json.dumps({"conn_type": "kafka_eos", "extra": {**config, **extra}}),
    )
    return conn_id


def lingering_scan_and_trigger(monkeypatch, tmp_path: Path, config: Mapping[str, Any], admin_config) -> None:
    """The sensor's scan and its trigger over a secured connection: an orphan and a commit-pending
    transaction of the principal (opened with ``config``) are found and told apart."""
    import asyncio

    from confluent_kafka.admin import AdminClient, NewTopic

    from airflow_provider_kafka_eos.kafka.operations.scan import Findings, ScanSpec
    from airflow_provider_kafka_eos.sensors.lingering import KafkaLingeringTransactionSensor
    from airflow_provider_kafka_eos.triggers.lingering import LingeringTransactionTrigger
    from kafka_eos_testing.transactions import produce_transaction, write_prepared_manifest

    topic, prefix = unique("linger"), unique("lt") + "-"
    creator = AdminClient(dict(admin_config))  # kept referenced until the result: destroying it cancels
    creator.create_topics([NewTopic(topic, 1, 1)], operation_timeout=10)[topic].result(timeout=15)
    orphan, pending = f"{prefix}0-1", f"{prefix}1-1"
    for tid in (orphan, pending):
        produce_transaction(dict(config), tid, topic, [tid.encode()], transaction_timeout_ms=600_000)
    store = tmp_path / "store"
    store.mkdir()
    base = store.as_uri()
    client = KafkaClientConfig.from_mapping(dict(config))
    with TransactionAdmin(client) as admin:
        uri = write_prepared_manifest(admin, base, "secured-pipe", topic, [pending])
        conn_id = set_connection(monkeypatch, "kafka_eos_secured", config, manifest_base_uri=base)
        expected = {orphan: "orphan", pending: "commit-pending"}

        sensor = KafkaLingeringTransactionSensor(
            task_id="secured-scan", kafka_eos_conn_id=conn_id, prefixes=[prefix], min_age=0
        )
        result = sensor.poke({})
        assert result.is_done
        xcom = json.dumps(result.xcom_value)
        by_id = {f.transactional_id: f for f in Findings.from_dict(json.loads(xcom)).transactions}
        assert {tid: f.kind.value for tid, f in by_id.items()} == expected
        assert by_id[pending].manifest_uri == uri
        for secret_key in ("sasl.password", "sasl.oauthbearer.client.secret", "ssl.key.location"):
            if config.get(secret_key):
                assert str(config[secret_key]) not in xcom

        trigger = LingeringTransactionTrigger(
            kafka_eos_conn_id=conn_id,
            spec=ScanSpec(min_age_ms=0, prefixes=(prefix,), manifest_base_uri=base).to_dict(),
            poll_interval=0.2,
        )
        _, kwargs = trigger.serialize()
        assert "password" not in json.dumps(kwargs) and "secret" not in json.dumps(kwargs)

        async def first_event():
            return await asyncio.wait_for(trigger.run().asend(None), 60)

        event = asyncio.run(first_event())
        assert event.payload["status"] == "found", event.payload
        returned = sensor.execute_complete({}, event.payload)
        kinds = {f.transactional_id: f.kind.value for f in Findings.from_dict(returned).transactions}
        assert kinds == expected
        # Leave nothing open on the node: abort both (by fencing), then nothing is visible.
        assert sorted(o.outcome for o in admin.abort([orphan, pending])) == ["aborted", "aborted"]
    assert_exactly_once(count_keys(dict(config), topic), [])


def preflight_as(monkeypatch, config: Mapping[str, Any], principal: str, *, own: bool = True):
    """Preflight through the hook on a secured connection: the ACL check names ``principal`` and,
    for the principal's own prefix (``own``), finds every ACL it needs; else names what is missing."""
    from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
    from airflow_provider_kafka_eos.kafka.operations.preflight import RetrySchedule

    conn_id = set_connection(monkeypatch, "kafka_eos_preflight", config)
    scope = PREFIX if own else "elsewhere-"
    report = KafkaEosHook(conn_id).preflight(
        transactional_id_prefix=f"{scope}pipe-",
        topics=[f"{scope}out"],
        transaction_timeout_ms=600_000,
        job_duration_budget=30,
        commit_schedule=RetrySchedule.of(retries=2, retry_delay=5, execution_timeout=60),
        raise_on_failure=False,
    )
    acl_checks = [c for c in report.checks if c.name.startswith("ACL ")]
    assert acl_checks, report.render()
    assert {c.details["principal"] for c in acl_checks} == {principal}, report.render()
    if own:
        assert report.ok, report.render()
    else:
        failed = [c for c in report.failures if c.name.startswith("ACL ")]
        assert failed, report.render()
        assert all(f"--allow-principal {principal} " in c.details["grant"] for c in failed)
    return report


CLUSTER_APP = (
    "def build(spark, params):\n"
    "    from pyspark.sql import functions as F\n"
    "    df = spark.range(int(params['n']), numPartitions=2)\n"
    "    return df.select(F.concat(F.lit(params['stem']), F.col('id').cast('string')).alias('key'),\n"
    "                     F.col('id').cast('string').alias('value'))\n"
)


def pipeline_on_the_spark_cluster(
    spark_cluster,
    monkeypatch,
    capfd,
    caplog,
    tmp_path: Path,
    config: Mapping[str, Any],
    admin_config,
    secrets: list[str],
    *,
    records: int = 60,
) -> None:
    """SparkEosSubmitOperator -> the standalone cluster (client deploy mode, provider-less executors)
    over a secured connection, then KafkaCommitTransactionsOperator, then a read_committed count.

    The connection's secrets reach the driver through the operator's 0600 private file and the
    executors inside the task closure Spark ships them (the client certificate and key as PEM,
    written to a private folder on the executor): none may appear in the driver's output, the
    spark-submit command Airflow logs, or anything on the worker (executor launch commands, logs).
    """
    import os
    import stat
    from datetime import datetime, timezone
    from types import SimpleNamespace

    from confluent_kafka.admin import AdminClient, NewTopic

    from airflow_provider_kafka_eos.operators.commit import KafkaCommitTransactionsOperator
    from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator

    host, port = spark_cluster.master_url.removeprefix("spark://").rsplit(":", 1)
    spark_conn = unique("spark").replace("-", "_")
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{spark_conn.upper()}",
        json.dumps(
            {
                "conn_type": "spark",
                "host": f"spark://{host}",
                "port": int(port),
                "extra": {"deploy-mode": "client"},
            }
        ),
    )
    kafka_conn = set_connection(monkeypatch, unique("kafka_eos").replace("-", "_"), config)
    topic, prefix = unique("cluster"), unique("cluster")
    creator = AdminClient(dict(admin_config))
    creator.create_topics([NewTopic(topic, 2, 1)], operation_timeout=10)[topic].result(timeout=15)
    (tmp_path / "cluster_app.py").write_text(CLUSTER_APP)
    conf = {k: v for k, v in spark_cluster.submit_conf().items() if k != "spark.pyspark.python"}
    operator = SparkEosSubmitOperator(
        task_id="submit",
        pipeline_id=prefix,
        topic=topic,
        manifest_base_uri=(tmp_path / "m").as_uri(),
        application_callable=f"{tmp_path / 'cluster_app.py'}:build",
        application_params={"n": records, "stem": topic + "/"},
        kafka_eos_conn_id=kafka_conn,
        conn_id=spark_conn,
        checkpoint_id=7,
        executor_python=spark_cluster.executor_python,
        conf=conf,
    )
    private_files: list[tuple[str, int]] = []
    write_private = operator._write_client_config

    def write_and_check() -> str:  # the operator's private hand-off file: 0600, removed at the end
        path = write_private()
        private_files.append((path, stat.S_IMODE(os.stat(path).st_mode)))
        return path

    operator._write_client_config = write_and_check
    run = SimpleNamespace(
        dag_id="secured_cluster",
        run_id=f"manual__{prefix}",
        logical_date=None,
        run_after=datetime(2026, 3, 1, tzinfo=timezone.utc),
    )
    ti = SimpleNamespace(try_number=1, xcom_push=lambda *args, **kwargs: None)  # no scheduler here
    uri = operator.execute({"dag_run": run, "ti": ti})
    assert [mode for _, mode in private_files] == [0o600]
    assert not os.path.exists(private_files[0][0])
    report = KafkaCommitTransactionsOperator(task_id="commit", manifest_uri=uri, kafka_eos_conn_id=kafka_conn)
    assert report.execute({})["records"] == records
    assert_exactly_once(count_keys(dict(config), topic), [f"{topic}/{i}" for i in range(records)])

    seen = "".join(capfd.readouterr()) + caplog.text
    assert "spark-submit" in seen or "Spark-Submit" in seen or uri in seen, seen[-2000:]
    worker_files = [p for p in spark_cluster.work_dir.rglob("*") if p.is_file() and "local" not in p.parts]
    assert any(p.name == "stderr" for p in worker_files), worker_files  # the executors' own logs
    for secret in secrets:
        assert secret not in seen, "a secret reached the task's output"
        for path in worker_files:
            assert secret not in path.read_text(errors="replace"), f"a secret reached {path}"
