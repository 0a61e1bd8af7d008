"""KafkaEosHook and KafkaEosPreflightOperator with real Airflow connections (AIRFLOW_CONN_<ID> JSON)
against the embedded broker."""

from __future__ import annotations

import json
from datetime import timedelta

import pendulum
import pytest
from confluent_kafka import Producer

from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
from airflow_provider_kafka_eos.kafka.errors import PreflightError
from airflow_provider_kafka_eos.kafka.operations.preflight import RetrySchedule
from airflow_provider_kafka_eos.operators.preflight import XCOM_KEY, KafkaEosPreflightOperator

pytestmark = pytest.mark.broker


@pytest.fixture
def conn_id(kafka_broker, monkeypatch, unique_name) -> str:
    conn_id = unique_name("eos_conn").replace("-", "_")
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}",
        json.dumps({"conn_type": "kafka_eos", "extra": {"bootstrap.servers": kafka_broker.bootstrap}}),
    )
    return conn_id


def test_test_connection_and_transaction_admin(conn_id, kafka_broker, unique_name):
    hook = KafkaEosHook(conn_id)
    ok, message = hook.test_connection()
    assert ok, message
    assert message.startswith(f"Connected to {kafka_broker.bootstrap}: transaction.version ")

    tid, topic = unique_name("hook-txn"), unique_name("hook-topic")
    producer = Producer({**hook.client_config().confluent(), "transactional.id": tid})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"v")
    producer.flush(30)
    del producer  # release without close(): the transaction stays open
    with hook.transaction_admin() as admin:
        assert admin.describe([tid])[tid].state == "Ongoing"
        assert [o.outcome for o in admin.abort([tid])] == ["aborted"]


def test_wrong_sasl_password_fails_without_leaking(kafka_broker_factory, monkeypatch, tmp_path):
    path = tmp_path / "acls.json"
    path.write_text(json.dumps({"users": {"etl": "right-password-123"}, "acls": []}))
    broker = kafka_broker_factory(acl_file=str(path))
    monkeypatch.setenv(
        "AIRFLOW_CONN_EOS_WRONG_PW",
        json.dumps(
            {
                "conn_type": "kafka_eos",
                "extra": {
                    "bootstrap.servers": broker.bootstrap,
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN",
                    "sasl.username": "etl",
                    "sasl.password": "wrong-password-456",
                },
            }
        ),
    )
    ok, message = KafkaEosHook("eos_wrong_pw", connect_timeout_ms=3000).test_connection()
    assert not ok
    assert message.startswith(f"{broker.bootstrap} refused the credentials of SASL user 'etl' (PLAIN)")
    assert "wrong-password-456" not in message and "right-password-123" not in message
    assert "kafka-eos-txn runbook " in message


def test_hook_preflight_window_failure_names_the_numbers(conn_id, unique_name):
    with pytest.raises(PreflightError) as err:
        KafkaEosHook(conn_id).preflight(
            transactional_id_prefix=unique_name("hook") + "-",
            topics=[unique_name("hook-topic")],
            transaction_timeout_ms=600_000,
            job_duration_budget=timedelta(minutes=5),
            commit_schedule=RetrySchedule.of(
                retries=3,
                retry_delay=timedelta(minutes=1),
                retry_exponential_backoff=2.0,
                execution_timeout=timedelta(minutes=1),
            ),
        )
    # 300 s + 4 x 60 s + (119 + 239 + 479) s = 1377 s > 600 s
    assert "= 1377s vs transaction.timeout.ms = 600s" in str(err.value)
    assert "kafka-eos-txn runbook transaction-timeout-risk (" in str(err.value)


class _RecordingTaskInstance:
    """Stands in for the task instance's XCom push: ``execute()`` is called directly because
    ``dag.test()`` only runs DAG files inside ``dags/`` (a boundary we cannot run here)."""

    def __init__(self) -> None:
        self.pushed: dict[str, object] = {}

    def xcom_push(self, key: str, value: object) -> None:
        self.pushed[key] = value


def _dag_with_preflight(conn_id: str, prefix: str, topic: str, commit_execution_timeout: timedelta):
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG

    with DAG("preflight_probe", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
        preflight = KafkaEosPreflightOperator(
            task_id="preflight",
            kafka_eos_conn_id=conn_id,
            transactional_id_prefix=prefix,
            topics=[topic],
            transaction_timeout_ms=900_000,
            job_duration_budget=timedelta(minutes=5),
            commit_task_id="commit",
        )
        commit = EmptyOperator(
            task_id="commit",
            retries=2,
            retry_delay=timedelta(minutes=1),
            execution_timeout=commit_execution_timeout,
        )
        preflight >> commit
    return preflight


def test_operator_reads_the_commit_tasks_schedule_and_pushes_the_report(conn_id, unique_name):
    operator = _dag_with_preflight(
        conn_id, unique_name("op") + "-", unique_name("op-topic"), timedelta(minutes=1)
    )
    assert operator.commit_schedule() == RetrySchedule(
        retries=2, retry_delay_s=60.0, execution_timeout_s=60.0
    )
    ti = _RecordingTaskInstance()
    result = operator.execute({"ti": ti})
    assert result["ok"] is True
    assert ti.pushed == {}  # the return value is the one copy (Airflow stores it as return_value)
    json.dumps(result)  # XCom-serialisable

    slow = _dag_with_preflight(
        conn_id, unique_name("op") + "-", unique_name("op-topic"), timedelta(minutes=5)
    )
    ti = _RecordingTaskInstance()
    with pytest.raises(PreflightError, match="data-loss window"):
        slow.execute({"ti": ti})
    assert list(ti.pushed) == [XCOM_KEY] and ti.pushed[XCOM_KEY]["ok"] is False  # still inspectable


def test_the_operator_checks_record_formats_against_the_registry_connection(
        conn_id, schema_registry, registry_topic, monkeypatch, unique_name):
    """A missing subject (registration off) fails preflight by name; the registry's settings come
    from the ``kafka_eos_schema_registry`` connection the record formats name."""
    monkeypatch.setenv("AIRFLOW_CONN_REGISTRY_PREFLIGHT", json.dumps(
        {"conn_type": "kafka_eos_schema_registry", "extra": {"url": schema_registry.url}}))
    schema = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
    operator = KafkaEosPreflightOperator(
        task_id="preflight", kafka_eos_conn_id=conn_id, transactional_id_prefix=unique_name("rf") + "-",
        topics=[registry_topic], transaction_timeout_ms=900_000, job_duration_budget=60,
        record_formats={"value": {"format": "avro", "schema": schema},
                        "schema_registry_conn_id": "registry_preflight"})
    ti = _RecordingTaskInstance()
    with pytest.raises(PreflightError, match=f"subject '{registry_topic}-value' on schema registry"):
        operator.execute({"ti": ti})
    [row] = [c for c in ti.pushed[XCOM_KEY]["checks"] if c["name"] == f"value format ({registry_topic})"]
    assert row["status"] == "fail" and "registration is off" in row["message"]
