"""The Arrow-native transactional producer against a broker, read back by real clients.

Batches encoded by ``kafka/producers/record_batch.py`` are produced through ``kafka/producers/arrow.py``,
committed by resume (``TransactionAdmin.commit``), then read by confluent-kafka (librdkafka
checks the CRC32C) and kafka-python (checks it too) consumers with read_committed: byte-exact
keys, values, headers and Java-compatible partitions. 2PC (KIP-939): a prepared transaction
outlives three times its timeout and commits; without 2PC the same sequence is DataLossError.
"""

from __future__ import annotations

import time
from collections import Counter

import pyarrow as pa
import pytest
from kafka import KafkaConsumer, TopicPartition

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import DataLossError, ProducerFencedError
from airflow_provider_kafka_eos.kafka.producers.arrow import ArrowPartitionTransaction
from airflow_provider_kafka_eos.kafka.producers.librdkafka import TransactionProtocol
from airflow_provider_kafka_eos.kafka.producers.partitioner import partition_for_key
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import TxnState
from kafka_eos_testing.broker.txn_testkit import create_topic, wait_for
from kafka_eos_testing.transactions import wait_until_committed
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _admin(bootstrap: str) -> TransactionAdmin:
    return TransactionAdmin(KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap}))


def _prepare(admin: TransactionAdmin, tid: str, topic: str, batches, *, two_phase=False, timeout_ms=60000,
             **options):
    txn = ArrowPartitionTransaction(
        admin=admin,
        transactional_id=tid,
        topic=topic,
        transaction_timeout_ms=timeout_ms,
        protocol=TransactionProtocol.from_admin(admin),
        two_phase=two_phase,
        **options,
    )
    txn.begin()
    for columns in batches:
        txn.write_columns(*columns)
    return txn, txn.prepare()


def _read_all_kafka_python(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    """Every record, read by kafka-python (it checks each batch's CRC32C); stops at ``expected``
    records or after 3 s without one (then the caller's count assertion fails)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, consumer_timeout_ms=3000, check_crcs=True)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        records = []
        for record in consumer:
            records.append(record)
            if len(records) == expected:
                break
        return records
    finally:
        consumer.close()


@pytest.mark.parametrize("transaction_version", [1, 2])
def test_arrow_batches_read_back_byte_exact(kafka_broker_factory, unique_name, transaction_version):
    broker = kafka_broker_factory(transaction_version=transaction_version)
    topic, tid = unique_name("arrow"), unique_name("arrow-tid")
    create_topic(broker.bootstrap, topic, partitions=4)
    n = 3000
    keys = [f"key-{i}".encode() for i in range(n)]
    values = [bytes([i % 251]) * (i % 300) for i in range(n)]
    values[7] = None  # a tombstone
    headers = [[{"key": "h", "value": str(i).encode()}] if i % 3 == 0 else None for i in range(n)]
    half = n // 2
    batches = [
        (pa.array(keys[part], pa.binary()), pa.array(values[part], pa.binary()),
         pa.array(headers[part], HEADERS))
        for part in (slice(0, half), slice(half, n))
    ]
    with _admin(broker.bootstrap) as admin:
        # batch_bytes small enough that each partition needs several batches (sequence numbers advance)
        txn, committable = _prepare(admin, tid, topic, batches, batch_bytes=50_000, buffer_bytes=200_000)
        assert committable is not None and committable.record_count == n
        assert committable.transaction_version == (2 if transaction_version >= 2 else 1)
        assert not committable.two_phase
        assert txn.stats.batches > 4
        # Nothing is visible before the commit
        assert count_keys(broker.bootstrap, topic) == Counter()
        assert [o.outcome for o in admin.commit([committable])] == ["committed"]
        wait_until_committed(admin, [tid])

    assert_exactly_once(count_keys(broker.bootstrap, topic), keys)
    expected = {k: (v, h) for k, v, h in zip(keys, values, headers, strict=True)}
    records = _read_all_kafka_python(broker.bootstrap, topic, 4, n)
    assert len(records) == n
    for record in records:
        value, header = expected[record.key]
        assert record.value == value
        assert record.headers == ([("h", header[0]["value"])] if header else [])
        assert record.partition == partition_for_key(record.key, 4)  # Java's default partitioner


def test_null_keys_and_explicit_partitions(kafka_broker, unique_name):
    topic, tid = unique_name("arrow"), unique_name("arrow-tid")
    create_topic(kafka_broker.bootstrap, topic, partitions=3)
    values = pa.array([f"v{i}".encode() for i in range(30)], pa.binary())
    explicit = pa.array([i % 3 if i % 2 else None for i in range(30)], pa.int32())
    keys = pa.array([f"k{i}".encode() if i % 5 else None for i in range(30)], pa.binary())
    with _admin(kafka_broker.bootstrap) as admin:
        _, committable = _prepare(admin, tid, topic, [(keys, values, None, explicit)])
        admin.commit([committable])
        wait_until_committed(admin, [tid])
    records = _read_all_kafka_python(kafka_broker.bootstrap, topic, 3, 30)
    assert sorted(r.value for r in records) == sorted(values.to_pylist())
    for r in records:
        i = int(r.value[1:])
        if i % 2:
            assert r.partition == i % 3
        elif r.key is not None:
            assert r.partition == partition_for_key(r.key, 3)


def test_empty_partition_yields_no_committable(kafka_broker, unique_name):
    topic = unique_name("arrow")
    create_topic(kafka_broker.bootstrap, topic)
    with _admin(kafka_broker.bootstrap) as admin:
        _, committable = _prepare(admin, unique_name("tid"), topic, [])
    assert committable is None


def test_a_newer_attempt_fences_the_older_one(kafka_broker, unique_name):
    topic, tid = unique_name("arrow"), unique_name("arrow-tid")
    create_topic(kafka_broker.bootstrap, topic)
    rows = (pa.array([b"a", b"b"]), pa.array([b"1", b"2"]))
    with _admin(kafka_broker.bootstrap) as admin:
        protocol = TransactionProtocol.from_admin(admin)
        old = ArrowPartitionTransaction(admin=admin, transactional_id=tid, topic=topic,
                                        transaction_timeout_ms=60000, protocol=protocol)
        old.begin()
        old.write_columns(*rows)
        old.flush()
        _, committable = _prepare(admin, tid, topic, [rows])  # the retry fences and aborts the old one
        old.write_columns(*rows)
        with pytest.raises(ProducerFencedError, match=tid):
            old.flush()
        admin.commit([committable])
        wait_until_committed(admin, [tid])
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [b"a", b"b"])


# The 2PC tests' broker, shared by them (one start-up instead of three): 2PC enabled, and the
# coordinator's abort scan every 50 ms, so a timed-out transaction is aborted at once.
TWO_PC_BROKER = {"two_phase_commit": True, "abort_check_interval_ms": 50}


@pytest.mark.parametrize("two_phase", [True, False], ids=["2pc", "no-2pc"])
def test_prepared_checkpoint_outlives_three_timeouts_only_with_2pc(
    kafka_broker_pool, unique_name, two_phase
):
    """With Enable2Pc the coordinator never times the prepared transaction out; without it, the
    same timeout aborts it and the commit is the named DataLossError."""
    timeout_ms = 1000
    broker = kafka_broker_pool(**TWO_PC_BROKER)
    topic, tid = unique_name("arrow2pc"), unique_name("arrow2pc-tid")
    create_topic(broker.bootstrap, topic, partitions=2)
    keys = [f"k{i}".encode() for i in range(200)]
    with _admin(broker.bootstrap) as admin:
        _, committable = _prepare(admin, tid, topic, [(pa.array(keys), pa.array(keys))],
                                  two_phase=two_phase, timeout_ms=timeout_ms)
        assert committable.two_phase is two_phase
        prepared = time.monotonic()
        if two_phase:
            assert committable.transaction_timeout_ms == 2**31 - 1  # the coordinator stores Int.MaxValue
            # Still open after three times the requested timeout (the abort scan runs every 50 ms).
            while time.monotonic() - prepared < 3 * timeout_ms / 1000:
                assert admin.describe([tid])[tid].state == TxnState.ONGOING
                time.sleep(0.1)  # sampling the state while time passes; the test is the elapsed time
            assert [o.outcome for o in admin.commit([committable])] == ["committed"]
            wait_until_committed(admin, [tid])
            assert_exactly_once(count_keys(broker.bootstrap, topic), keys)
        else:
            wait_for(lambda: admin.describe([tid])[tid].state == TxnState.COMPLETE_ABORT, "the timeout abort")
            with pytest.raises(DataLossError, match=tid):
                admin.commit([committable])
            assert count_keys(broker.bootstrap, topic) == Counter()


def test_keep_prepared_txn_is_refused_and_commit_by_resume_completes(kafka_broker_pool, unique_name):
    """Which path completes a prepared 2PC transaction: Kafka 4.4's coordinator answers
    InitProducerId(Enable2Pc, KeepPreparedTxn=true) with UNSUPPORTED_VERSION and changes nothing
    (the embedded broker the same), so the commit task's EndTxn with the recorded producer id and
    epoch (commit-by-resume) is what completes it."""
    from kafka.protocol.producer.transaction import InitProducerIdRequest

    broker = kafka_broker_pool(**TWO_PC_BROKER)
    topic, tid = unique_name("arrow2pc"), unique_name("arrow2pc-tid")
    create_topic(broker.bootstrap, topic)
    keys = [f"k{i}".encode() for i in range(50)]
    with _admin(broker.bootstrap) as admin:
        _, committable = _prepare(admin, tid, topic, [(pa.array(keys), pa.array(keys))], two_phase=True)
        node = admin.wire.coordinators([tid])[tid]
        answer = admin.wire.send(
            InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000, producer_id=-1,
                                  producer_epoch=-1, enable2_pc=True, keep_prepared_txn=True, version=6),
            node,
        )
        assert answer.error_code == 35  # UNSUPPORTED_VERSION
        after = admin.describe([tid])[tid]
        assert (after.state, after.producer_id, after.producer_epoch) == (
            TxnState.ONGOING, committable.producer_id, committable.producer_epoch
        )
        assert [o.outcome for o in admin.commit([committable])] == ["committed"]
        wait_until_committed(admin, [tid])
    assert_exactly_once(count_keys(broker.bootstrap, topic), keys)


def test_enable_2pc_needs_the_two_phase_commit_acl(kafka_broker_factory, unique_name, tmp_path):
    """WRITE on the TransactionalId is not enough for Enable2Pc: TWO_PHASE_COMMIT too (KIP-939).
    Refused before anything is written, with the error naming the ACL and the runbook page."""
    import json

    from airflow_provider_kafka_eos.kafka.errors import AuthorizationError

    prefix, topic = unique_name("acl2pc") + "-", unique_name("acl2pc-topic")

    def acl(user, rtype, name, op, pattern="LITERAL"):
        return {"principal": f"User:{user}", "resource_type": rtype, "name": name, "operation": op,
                "pattern_type": pattern}

    acls = []
    for user in ("no2pc", "with2pc"):
        acls += [acl(user, "TRANSACTIONAL_ID", prefix, "WRITE", "PREFIXED"),
                 *(acl(user, "TOPIC", topic, op) for op in ("WRITE", "DESCRIBE", "CREATE"))]
    acls.append(acl("with2pc", "TRANSACTIONAL_ID", prefix, "TWO_PHASE_COMMIT", "PREFIXED"))
    path = tmp_path / "acls.json"
    path.write_text(json.dumps({"users": {u: f"{u}-pw" for u in ("root", "no2pc", "with2pc")},
                                "super_users": ["User:root"], "acls": acls}))
    broker = kafka_broker_factory(acl_file=str(path), two_phase_commit=True)
    create_topic_config = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                           "sasl.mechanism": "PLAIN"}
    keys = [b"a", b"b", b"c"]

    def prepare_as(user: str, tid: str):
        config = KafkaClientConfig.from_mapping(
            {**create_topic_config, "sasl.username": user, "sasl.password": f"{user}-pw"})
        with TransactionAdmin(config) as admin:
            return _prepare(admin, tid, topic, [(pa.array(keys), pa.array(keys))], two_phase=True)[1], config

    with pytest.raises(AuthorizationError, match="TWO_PHASE_COMMIT") as excinfo:
        prepare_as("no2pc", prefix + "0")
    assert "kafka-eos-txn runbook two-phase-commit (" in str(excinfo.value)
    committable, config = prepare_as("with2pc", prefix + "1")
    assert committable.two_phase
    with TransactionAdmin(config) as admin:
        admin.commit([committable])
        wait_until_committed(admin, [committable.transactional_id])
    root = {**create_topic_config, "sasl.username": "root", "sasl.password": "root-pw"}
    assert_exactly_once(count_keys(root, topic), keys)  # the refused attempt wrote nothing


def test_broker_restart_mid_transaction_is_retried(kafka_broker_factory, unique_name, tmp_path):
    """The broker restarts between two flushes of one transaction: the producer's next wave meets
    a closed connection, re-sends within its delivery deadline, and the transaction commits whole."""
    broker = kafka_broker_factory(data_dir=str(tmp_path / "data"), partitions=2)
    topic, tid = unique_name("arrow-restart"), unique_name("arrow-restart-tid")
    create_topic(broker.bootstrap, topic, partitions=2)
    first = [f"a{i}".encode() for i in range(200)]
    second = [f"b{i}".encode() for i in range(200)]
    with _admin(broker.bootstrap) as admin:
        txn = ArrowPartitionTransaction(admin=admin, transactional_id=tid, topic=topic,
                                        transaction_timeout_ms=60000,
                                        protocol=TransactionProtocol.from_admin(admin))
        txn.begin()
        txn.write_columns(pa.array(first), pa.array(first))
        txn.flush()
        broker.restart()
        txn.write_columns(pa.array(second), pa.array(second))
        committable = txn.prepare()
        assert committable.record_count == 400
        admin.commit([committable])
        wait_until_committed(admin, [tid])
    assert_exactly_once(count_keys(broker.bootstrap, topic), first + second)
