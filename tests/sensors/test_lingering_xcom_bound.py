"""The sensor's XCom is bounded (issue 8): counts and a capped list in XCom (the metadata
database), every finding in a JSON file beside the manifests that a person (and the abort
operator) can read. Real open transactions on the broker under test; nothing mocked."""

from __future__ import annotations

import json
import pathlib

import pytest
from txn_helpers import first_event, produce_in_transaction, set_kafka_eos_connection

from airflow_provider_kafka_eos.kafka.errors import ManifestError
from airflow_provider_kafka_eos.kafka.operations.findings_store import FINDINGS_DIR, read_findings
from airflow_provider_kafka_eos.kafka.operations.scan import Findings, ScanSpec
from airflow_provider_kafka_eos.operators.abort import KafkaAbortTransactionsOperator
from airflow_provider_kafka_eos.sensors.lingering import KafkaLingeringTransactionSensor
from airflow_provider_kafka_eos.triggers.lingering import LingeringTransactionTrigger
from kafka_eos_testing.embedded import unique_name
from kafka_eos_testing.verify import assert_exactly_once, count_keys

# How findings are bounded in XCom and written to the store: Airflow's side (the findings
# themselves, from real open transactions, are the sensor's and trigger's tests on real Kafka).
pytestmark = [pytest.mark.broker, pytest.mark.provider_logic]


def _orphans(broker, prefix, topic, n):
    tids = [f"{prefix}{i}" for i in range(n)]
    for tid in tids:
        produce_in_transaction(broker.bootstrap, tid, topic, [tid], commit=False)
    return tids


def test_xcom_holds_a_capped_list_and_the_file_holds_every_finding(kafka_broker, kafka_eos_conn, tmp_path):
    prefix, topic = unique_name("bound") + "-", unique_name("topic")
    tids = _orphans(kafka_broker, prefix, topic, 7)
    produce_in_transaction(kafka_broker.bootstrap, unique_name("done"), topic, ["kept"], commit=True)
    base = tmp_path.as_uri()

    result = KafkaLingeringTransactionSensor(
        task_id="find", prefixes=[prefix], min_age=0, manifest_base_uri=base, xcom_max_findings=3
    ).poke({})

    xcom = json.loads(json.dumps(result.xcom_value))  # plain JSON, as XCom stores it
    assert len(xcom["transactions"]) == 3
    assert xcom["omitted"] == {"transactions": 4, "lso_stalls": 0}
    assert xcom["counts"]["orphan"] == 7  # the summary counts everything
    uri = xcom["findings_uri"]
    assert uri.startswith(f"{base}/{FINDINGS_DIR}/findings-")
    on_disk = read_findings(uri)
    assert sorted(f["transactional_id"] for f in on_disk["transactions"]) == tids
    assert "bootstrap" not in pathlib.Path(uri.removeprefix("file://")).read_text()

    # Consumers get every finding back from the bounded XCom: the abort operator aborts all 7.
    assert sorted(f.transactional_id for f in Findings.from_dict(xcom).transactions) == tids
    report = KafkaAbortTransactionsOperator(
        task_id="abort", findings=xcom, owned_prefixes=[prefix], manifest_base_uri=base
    ).execute({})
    assert sorted(report["aborted"]) == tids
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [b"kept"])


def test_few_findings_stay_whole_in_xcom_and_write_no_file(kafka_broker, kafka_eos_conn, tmp_path):
    prefix, topic = unique_name("few") + "-", unique_name("topic")
    tids = _orphans(kafka_broker, prefix, topic, 2)
    xcom = KafkaLingeringTransactionSensor(
        task_id="find", prefixes=[prefix], min_age=0, manifest_base_uri=tmp_path.as_uri()
    ).poke({}).xcom_value
    assert sorted(f["transactional_id"] for f in xcom["transactions"]) == tids
    assert xcom["omitted"] == {"transactions": 0, "lso_stalls": 0} and xcom["findings_uri"] is None
    assert not (tmp_path / FINDINGS_DIR).exists()


def test_a_store_from_the_connection_gets_the_findings_file_and_the_log_has_the_table(
    kafka_broker, kafka_eos_conn, empty_store, capfd
):
    """The sensor names no store: the scan reads the connection's, and the file goes there too."""
    prefix, topic = unique_name("nostore") + "-", unique_name("topic")
    tids = _orphans(kafka_broker, prefix, topic, 4)
    sensor = KafkaLingeringTransactionSensor(
        task_id="find", prefixes=[prefix], min_age=0, xcom_max_findings=1
    )
    capfd.readouterr()
    xcom = sensor.poke({}).xcom_value
    assert len(xcom["transactions"]) == 1 and xcom["omitted"]["transactions"] == 3
    assert xcom["findings_uri"].startswith(f"{empty_store}/{FINDINGS_DIR}/findings-")
    assert sorted(f["transactional_id"] for f in read_findings(xcom["findings_uri"])["transactions"]) == tids
    captured = capfd.readouterr()
    log = captured.out + captured.err
    assert all(tid in log for tid in tids), "the task log's table must list every finding"


def test_trigger_event_is_bounded_too(kafka_broker, monkeypatch, tmp_path):
    """A deferred sensor's event is stored in the metadata database as well."""
    conn_id = set_kafka_eos_connection(  # the manifest store comes from the connection (issue 9)
        monkeypatch, kafka_broker.bootstrap, conn_id="eos_bound_trigger", manifest_base_uri=tmp_path.as_uri()
    )
    prefix, topic = unique_name("btrig") + "-", unique_name("topic")
    tids = _orphans(kafka_broker, prefix, topic, 5)
    base = tmp_path.as_uri()
    trigger = LingeringTransactionTrigger(
        kafka_eos_conn_id=conn_id,
        spec=ScanSpec(min_age_ms=0, prefixes=(prefix,)).to_dict(),
        poll_interval=0.2,
        findings_base_uri=base,
        xcom_max_findings=2,
    )
    _, kwargs = trigger.serialize()
    assert (kwargs["findings_base_uri"], kwargs["xcom_max_findings"]) == (base, 2)
    event = first_event(trigger)
    payload = event.payload["findings"]
    assert len(payload["transactions"]) == 2 and payload["omitted"]["transactions"] == 3
    sensor = KafkaLingeringTransactionSensor(
        task_id="resume", kafka_eos_conn_id=conn_id, prefixes=[prefix], min_age=0, deferrable=True
    )
    returned = sensor.execute_complete({}, event.payload)
    assert returned == payload
    assert sorted(f.transactional_id for f in Findings.from_dict(returned).transactions) == tids


def test_a_missing_findings_file_is_a_clear_error(tmp_path):
    gone = str(tmp_path / "gone.json")
    payload = {"transactions": [], "omitted": {"transactions": 5}, "findings_uri": gone}
    with pytest.raises(ManifestError, match="findings file is gone; run the sensor again"):
        Findings.from_dict(payload)
