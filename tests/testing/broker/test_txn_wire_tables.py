"""Every reachable row of the EndTxn TV1 and TV2 tables, over the wire, at explicit versions.

Transactions are driven with raw kafka-python protocol requests (InitProducerId,
AddPartitionsToTxn v3, EndTxn v3 = TV1 path, v5 = TV2 path) through a real socket to the
embedded broker. The PrepareCommit/PrepareAbort rows are not driven over the wire here (each Complete* row
first waits for the markers, which Kafka writes after answering EndTxn); they are covered in
test_txn_state_machine.py and the marker window in tests/kafka/admin/test_transactions_marker_window.py.
"""

from __future__ import annotations

from contextlib import closing

import pytest
from kafka.protocol.producer.transaction import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
)

from kafka_eos_testing.broker.txn_state import Err
from kafka_eos_testing.broker.txn_testkit import (
    WireProbe,
    admin,
    create_topic,
    describe,
    describe_settled,
    wait_for,
)

pytestmark = [pytest.mark.broker, pytest.mark.broker_double]

TV1, TV2 = 3, 5  # EndTxn request versions


@pytest.fixture(scope="module")
def topic(kafka_broker):
    from kafka_eos_testing.embedded import unique_name

    name = unique_name("tables")
    create_topic(kafka_broker.bootstrap, name, 2)
    return name


@pytest.fixture
def probe(kafka_broker):
    with WireProbe(kafka_broker.bootstrap) as p:
        yield p


class Txn:
    """One transactional id driven by raw requests."""

    def __init__(self, probe: WireProbe, tid: str, topic: str) -> None:
        self.probe, self.tid, self.topic = probe, tid, topic
        self.pid = self.epoch = -1

    def init(self) -> int:
        r = self.probe.send(
            InitProducerIdRequest(transactional_id=self.tid, transaction_timeout_ms=60000), version=4
        )
        if r.error_code == 0:
            self.pid, self.epoch = r.producer_id, r.producer_epoch
        return r.error_code

    def add(self, partition: int = 0, *, epoch: int | None = None, version: int = 3) -> int:
        topic_cls = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        r = self.probe.send(
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.tid,
                v3_and_below_producer_id=self.pid,
                v3_and_below_producer_epoch=self.epoch if epoch is None else epoch,
                v3_and_below_topics=[topic_cls(name=self.topic, partitions=[partition])],
            ),
            version=version,
        )
        [codes] = [
            [p.partition_error_code for p in t.results_by_partition] for t in r.results_by_topic_v3_and_below
        ]
        return codes[0]

    def end(self, commit: bool, *, version: int, epoch: int | None = None):
        return self.probe.send(
            EndTxnRequest(
                transactional_id=self.tid,
                producer_id=self.pid,
                producer_epoch=self.epoch if epoch is None else epoch,
                committed=commit,
            ),
            version=version,
        )


def in_state(probe, unique_name, topic, state: str, end_version: int) -> Txn:
    txn = Txn(probe, unique_name("tid"), topic)
    assert txn.init() == 0
    if state == "Empty":
        assert txn.init() == 0  # stored epoch 1, so an "old epoch" exists
        return txn
    assert txn.add() == 0
    if state == "Ongoing":
        return txn
    result = txn.end(state == "CompleteCommit", version=end_version)
    assert result.error_code == 0
    settle(txn)
    return txn


def settle(txn: Txn) -> None:
    """Wait until the markers are written: Kafka answers EndTxn first (fidelity row 1)."""
    with closing(admin(txn.probe.bootstrap)) as kafka_admin:
        describe_settled(kafka_admin, txn.tid)


@pytest.mark.parametrize(
    ("state", "commit", "expected"),
    [
        ("CompleteCommit", True, Err.NONE),
        ("CompleteCommit", False, Err.INVALID_TXN_STATE),
        ("CompleteAbort", True, Err.INVALID_TXN_STATE),
        ("CompleteAbort", False, Err.NONE),
        ("Empty", True, Err.INVALID_TXN_STATE),
        ("Empty", False, Err.INVALID_TXN_STATE),
    ],
)
def test_end_txn_tv1_table(probe, unique_name, topic, state, commit, expected):
    txn = in_state(probe, unique_name, topic, state, TV1)
    assert txn.end(commit, version=TV1).error_code == expected
    # an answer never moves the state: the same request answers the same again
    assert txn.end(commit, version=TV1).error_code == expected


@pytest.mark.parametrize(
    ("state", "commit", "epoch_offset", "expected", "bumps"),
    [
        ("Empty", False, -1, Err.PRODUCER_FENCED, False),
        ("Empty", False, 0, Err.NONE, True),
        ("Empty", True, -1, Err.PRODUCER_FENCED, False),
        ("Empty", True, 0, Err.INVALID_TXN_STATE, False),
        ("CompleteAbort", False, -1, Err.NONE, False),
        ("CompleteAbort", False, 0, Err.NONE, True),
        ("CompleteAbort", True, -1, Err.INVALID_TXN_STATE, False),
        ("CompleteAbort", True, 0, Err.INVALID_TXN_STATE, False),
        ("CompleteCommit", False, -1, Err.INVALID_TXN_STATE, False),
        ("CompleteCommit", False, 0, Err.NONE, True),
        ("CompleteCommit", True, -1, Err.NONE, False),
        ("CompleteCommit", True, 0, Err.INVALID_TXN_STATE, False),
    ],
)
def test_end_txn_tv2_table(probe, unique_name, topic, state, commit, epoch_offset, expected, bumps):
    txn = in_state(probe, unique_name, topic, state, TV2)
    current = txn.epoch if state == "Empty" else txn.epoch + 1  # TV2 completion bumped it
    result = txn.end(commit, version=TV2, epoch=current + epoch_offset)
    assert result.error_code == expected
    if expected == Err.NONE:
        assert result.producer_id == txn.pid
        assert result.producer_epoch == (current + 1 if bumps else current)
    else:
        assert (result.producer_id, result.producer_epoch) == (-1, -1)


def test_end_txn_tv2_ongoing_commit_bumps_and_next_transaction_uses_new_epoch(probe, unique_name, topic):
    txn = in_state(probe, unique_name, topic, "Ongoing", TV2)
    result = txn.end(True, version=TV2)
    assert (result.error_code, result.producer_epoch) == (0, txn.epoch + 1)
    settle(txn)
    assert txn.add(epoch=txn.epoch) == Err.PRODUCER_FENCED  # the old epoch is gone
    assert txn.add(epoch=txn.epoch, version=1) == Err.INVALID_PRODUCER_EPOCH  # rewritten below v2
    assert txn.add(epoch=txn.epoch + 1) == 0


def test_end_txn_tv1_empty_and_ongoing_identity_rows(probe, unique_name, topic):
    txn = in_state(probe, unique_name, topic, "Ongoing", TV1)
    assert txn.end(True, version=TV1, epoch=txn.epoch - 1).error_code == Err.PRODUCER_FENCED
    assert txn.end(True, version=1, epoch=txn.epoch - 1).error_code == Err.INVALID_PRODUCER_EPOCH
    assert txn.end(True, version=TV1).error_code == Err.NONE


def test_add_partitions_to_unknown_topic_names_it_and_attempts_nothing(probe, unique_name, topic):
    txn = Txn(probe, unique_name("tid"), topic)
    assert txn.init() == 0
    topic_cls = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    r = probe.send(
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn.tid,
            v3_and_below_producer_id=txn.pid,
            v3_and_below_producer_epoch=txn.epoch,
            v3_and_below_topics=[
                topic_cls(name=topic, partitions=[0]),
                topic_cls(name=topic, partitions=[7]),
            ],
        ),
        version=3,
    )
    codes = {
        (t.name, p.partition_index): p.partition_error_code
        for t in r.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }
    assert codes == {(topic, 0): Err.OPERATION_NOT_ATTEMPTED, (topic, 7): Err.UNKNOWN_TOPIC_OR_PARTITION}
    # nothing was added: the id is still Empty, so a commit has nothing to commit
    assert txn.end(True, version=TV1).error_code == Err.INVALID_TXN_STATE


def test_end_txn_v5_on_a_tv1_broker_takes_the_tv2_path(kafka_broker_factory, unique_name):
    """Kafka chooses the EndTxn table by request version alone: v5 bumps the epoch (TV2) even on
    a broker whose finalized transaction.version is 1, which only stops advertising v5."""
    broker = kafka_broker_factory(transaction_version=1)
    topic = unique_name("tv1")
    create_topic(broker.bootstrap, topic, 1)
    with WireProbe(broker.bootstrap) as probe:
        txn = in_state(probe, unique_name, topic, "Ongoing", TV1)
        result = txn.end(True, version=TV2)
        assert (result.error_code, result.producer_epoch) == (0, txn.epoch + 1)
        settle(txn)
        assert txn.add() == Err.PRODUCER_FENCED  # the old epoch is gone
        assert txn.add(epoch=txn.epoch + 1) == 0


# -- the epoch limit under TV2 (kafka-txn-semantics.md, "The epoch limit under TV2") ---------------


@pytest.fixture(scope="module")
def aged_ids(kafka_broker):
    """Two ids at epoch 32765 (raw InitProducerId rounds, pipelined: the way a real Kafka gets there)."""
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from kafka_eos_testing.embedded import unique_name
    from kafka_eos_testing.transactions import age_transactional_ids

    ids = [unique_name("limit-commit"), unique_name("limit-timeout")]
    with TransactionAdmin(KafkaClientConfig({"bootstrap.servers": kafka_broker.bootstrap})) as txn_admin:
        if txn_admin.transaction_version() < 2:
            pytest.skip("the epoch limit's rotation is transaction version 2's")
        assert set(age_transactional_ids(txn_admin, ids, 32765).values()) == {32765}
    return ids


def test_tv2_commit_at_the_epoch_limit_rotates_and_the_old_pair_is_a_recognised_retry(probe, topic, aged_ids):
    txn = Txn(probe, aged_ids[0], topic)
    assert txn.init() == 0 and txn.epoch == 32766
    assert txn.add() == 0
    done = txn.end(True, version=TV2)
    assert done.error_code == Err.NONE and done.producer_id != txn.pid and done.producer_epoch == 0
    settle(txn)
    retry = txn.end(True, version=TV2)  # the recorded pair, again: the coordinator recognises it
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (Err.NONE, done.producer_id, 0)
    assert txn.end(False, version=TV2).error_code == Err.INVALID_TXN_STATE
    with closing(admin(probe.bootstrap)) as kafka_admin:
        d = describe_settled(kafka_admin, txn.tid)
    assert (d.state, d.producer_id, d.producer_epoch) == ("CompleteCommit", done.producer_id, 0)


def test_tv2_timeout_abort_at_the_epoch_limit_rotates_too(probe, topic, aged_ids):
    txn = Txn(probe, aged_ids[1], topic)
    r = probe.send(InitProducerIdRequest(transactional_id=txn.tid, transaction_timeout_ms=1000), version=4)
    assert r.error_code == 0 and r.producer_epoch == 32766
    txn.pid, txn.epoch = r.producer_id, r.producer_epoch
    assert txn.add() == 0
    with closing(admin(probe.bootstrap)) as kafka_admin:  # the coordinator's scan: 10 s by default
        def aborted():
            d = describe(kafka_admin, txn.tid)
            return d if d.state == "CompleteAbort" else None

        d = wait_for(aborted, "the coordinator's timeout-abort", timeout_s=40)
    assert d.producer_id != txn.pid and d.producer_epoch == 0
    assert txn.end(True, version=TV2).error_code == Err.INVALID_TXN_STATE  # a retry, of an abort
    assert txn.end(False, version=TV2).error_code == Err.NONE
