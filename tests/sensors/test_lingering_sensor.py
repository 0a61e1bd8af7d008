"""KafkaLingeringTransactionSensor against the embedded broker: thresholds, kinds, LSO stalls."""

from __future__ import annotations

import json

import pytest
from txn_helpers import produce_in_transaction, wait_until_older_than, write_prepared_manifest

from airflow_provider_kafka_eos.kafka.operations.scan import Findings
from airflow_provider_kafka_eos.sensors.lingering import KafkaLingeringTransactionSensor
from kafka_eos_testing.embedded import unique_name

pytestmark = pytest.mark.broker


def sensor(**kwargs) -> KafkaLingeringTransactionSensor:
    return KafkaLingeringTransactionSensor(task_id=unique_name("sensor"), **kwargs)


def test_fires_for_an_old_orphan_not_for_a_young_or_committed_one(kafka_broker, admin, kafka_eos_conn):
    prefix, topic = unique_name("orph") + "-", unique_name("topic")
    old, young, done = f"{prefix}old", f"{prefix}young", f"{prefix}done"
    produce_in_transaction(kafka_broker.bootstrap, old, topic, ["a"], commit=False)
    produce_in_transaction(kafka_broker.bootstrap, done, topic, ["b"], commit=True)
    wait_until_older_than(admin, old, 1500)
    produce_in_transaction(kafka_broker.bootstrap, young, topic, ["c"], commit=False)
    ages = {tid: d.age_ms() for tid, d in admin.describe([old, young]).items()}
    threshold_ms = (ages[old] + ages[young]) // 2  # >= 0.75 s of margin on either side

    # Nothing young enough to be a finding yet: the sensor keeps waiting.
    assert not sensor(prefixes=[prefix], min_age=ages[old] / 1000 + 60).poke({}).is_done

    result = sensor(prefixes=[prefix], min_age=threshold_ms / 1000).poke({})
    assert result.is_done
    xcom = json.loads(json.dumps(result.xcom_value))  # what XCom stores must be plain JSON
    findings = Findings.from_dict(xcom)
    assert [(f.transactional_id, f.kind.value) for f in findings.transactions] == [(old, "orphan")]
    assert findings.transactions[0].partitions == (f"{topic}-0",)
    assert "bootstrap" not in json.dumps(xcom)


def test_classifies_orphan_commit_pending_and_foreign(kafka_broker, admin, kafka_eos_conn, tmp_path):
    ours, theirs, topic = unique_name("ours") + "-", unique_name("theirs") + "-", unique_name("topic")
    orphan, pending, foreign = f"{ours}0-1", f"{ours}1-1", f"{theirs}0-1"
    for tid in (orphan, pending, foreign):
        produce_in_transaction(kafka_broker.bootstrap, tid, topic, [tid], commit=False)
    base = tmp_path.as_uri()
    uri = write_prepared_manifest(admin, base, "pipe", topic, [pending])

    result = sensor(prefixes=[ours, theirs], owned_prefixes=[ours], min_age=0, manifest_base_uri=base).poke(
        {}
    )

    findings = Findings.from_dict(result.xcom_value)
    by_id = {f.transactional_id: f for f in findings.transactions}
    assert {tid: f.kind.value for tid, f in by_id.items()} == {
        orphan: "orphan",
        pending: "commit-pending",
        foreign: "foreign",
    }
    assert by_id[pending].manifest_uri == uri
    assert findings.counts() == {"orphan": 1, "commit-pending": 1, "foreign": 1, "lso-stall": 0}

    # Watching the whole cluster (other tests' transactions included) classifies ours the same way.
    everything = Findings.from_dict(
        sensor(prefixes=None, owned_prefixes=[ours], min_age=0, manifest_base_uri=base).poke({}).xcom_value
    )
    kinds = {f.transactional_id: f.kind.value for f in everything.transactions}
    assert (kinds[orphan], kinds[pending], kinds[foreign]) == ("orphan", "commit-pending", "foreign")
    assert all(k == "foreign" for t, k in kinds.items() if not t.startswith(ours))


def test_lso_stall_names_the_blocking_producer(kafka_broker, admin, kafka_eos_conn):
    """A producer outside every watched prefix holds the LSO; only the LSO watch can see it."""
    topic = unique_name("stall")
    blocker = unique_name("elsewhere")
    produce_in_transaction(kafka_broker.bootstrap, blocker, topic, ["held"], commit=False)
    produce_in_transaction(kafka_broker.bootstrap, unique_name("later"), topic, ["after"], commit=True)
    blocking = admin.describe([blocker])[blocker]

    # A stall only counts once it has lasted: the blocker wrote just now.
    assert (
        not sensor(prefixes=[unique_name("none")], min_age=0, lso_partitions=[topic], min_lso_stall=600)
        .poke({})
        .is_done
    )

    result = sensor(prefixes=[unique_name("none")], min_age=0, lso_partitions=[topic], min_lso_stall=0).poke(
        {}
    )
    findings = Findings.from_dict(result.xcom_value)
    assert findings.transactions == []
    [stall] = findings.lso_stalls
    assert (stall.topic, stall.partition, stall.last_stable_offset) == (topic, 0, 0)
    assert stall.high_watermark > stall.last_stable_offset
    assert (stall.blocking_producer_id, stall.blocking_producer_epoch) == (
        blocking.producer_id,
        blocking.producer_epoch,
    )
    assert stall.transactional_id == blocker
    assert stall.kind.value == "foreign"
    assert f"producer {blocking.producer_id}" in stall.reason


def test_each_lso_poll_adds_to_the_consoles_lag_history(kafka_broker, admin, kafka_eos_conn, tmp_path):
    """The console's lag plot is fed by these polls (kafka/operations/lso_history.py)."""
    from airflow_provider_kafka_eos.kafka.operations.lso_history import read_history

    topic = unique_name("lag")
    produce_in_transaction(kafka_broker.bootstrap, unique_name("open"), topic, ["held"], commit=False)
    produce_in_transaction(kafka_broker.bootstrap, unique_name("later"), topic, ["a", "b"], commit=True)
    base = tmp_path.as_uri()
    for _ in range(2):
        sensor(prefixes=[unique_name("none")], min_age=0, lso_partitions=[topic], min_lso_stall=600,
               manifest_base_uri=base).poke({})
    samples = read_history(base, topic)
    assert [(s["partition"], s["lso"]) for s in samples] == [(0, 0), (0, 0)]
    assert all(s["lag"] == s["hw"] > 0 for s in samples)  # the open transaction holds the LSO at 0
    assert samples[0]["at_ms"] <= samples[1]["at_ms"]
