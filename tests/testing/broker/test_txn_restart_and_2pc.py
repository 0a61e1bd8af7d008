"""Coordinator state across broker restarts (data_dir), and KIP-939 2PC InitProducerId v6.

Dedicated broker subprocesses from ``kafka_broker_factory``; real confluent-kafka producers
leave transactions open, raw requests commit them, a read_committed consumer counts keys.
"""

from __future__ import annotations

import pytest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer.transaction import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
)

from kafka_eos_testing.broker.txn_state import INT32_MAX, Err
from kafka_eos_testing.broker.txn_testkit import (
    WireProbe,
    admin,
    create_topic,
    describe,
    describe_settled,
    keys,
    leave_open,
    retry_concurrent,
    wait_for,
)
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.broker, pytest.mark.broker_double]


def commit(bootstrap: str, tid: str, pid: int, epoch: int) -> int:
    with WireProbe(bootstrap) as probe:
        return probe.send(
            EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True),
            version=3,
        ).error_code


@pytest.mark.parametrize("how", ["restart", "kill"])
def test_open_transactions_survive_a_restart_and_commit_after_it(
    kafka_broker_factory, tmp_path, unique_name, how
):
    broker = kafka_broker_factory(data_dir=str(tmp_path / "data"))
    topic = unique_name("restart")
    tids = [unique_name("tid") for _ in range(3)]
    written = {tid: keys(tid, 40) for tid in tids}
    for tid in tids:
        leave_open(broker.bootstrap, tid, topic, written[tid])
    client = admin(broker.bootstrap)
    try:
        before = {tid: describe(client, tid) for tid in tids}
    finally:
        client.close()
    assert {d.state.value for d in before.values()} == {"Ongoing"}

    if how == "kill":  # a crash: no orderly shutdown, whatever the OS got is all there is
        broker.kill()
        broker.start()
    else:
        broker.restart()

    client = admin(broker.bootstrap)
    try:
        after = {tid: describe(client, tid) for tid in tids}
        assert after == before  # same state, pid, epoch, timeout, start time and partitions
        assert count_keys(broker.bootstrap, topic) == {}
        for tid in tids:
            assert commit(broker.bootstrap, tid, after[tid].producer_id, after[tid].producer_epoch) == 0
        assert {describe_settled(client, tid).state.value for tid in tids} == {"CompleteCommit"}
    finally:
        client.close()
    assert_exactly_once(count_keys(broker.bootstrap, topic), [k for tid in tids for k in written[tid]])


def init_v6(bootstrap: str, tid: str, *, enable_2pc: bool, timeout_ms: int = 60000, sasl=None, **fields):
    with WireProbe(bootstrap, sasl_plain=sasl) as probe:
        return probe.send(
            InitProducerIdRequest(
                transactional_id=tid, transaction_timeout_ms=timeout_ms, enable2_pc=enable_2pc, **fields
            ),
            version=6,
        )


def advertised_init_producer_id_max(bootstrap: str) -> int:
    with WireProbe(bootstrap) as probe:
        response = probe.send(
            ApiVersionsRequest(client_software_name="probe", client_software_version="1"), version=3
        )
    return next(k.max_version for k in response.api_keys if k.api_key == 22)


def test_two_phase_commit_off_hides_v6(kafka_broker):
    # KIP-939's v6 is "unstable": a broker without transaction.two.phase.commit.enable does not offer it
    assert advertised_init_producer_id_max(kafka_broker.bootstrap) == 5


def test_two_phase_commit_on(kafka_broker_factory, unique_name):
    broker = kafka_broker_factory(two_phase_commit=True)
    assert advertised_init_producer_id_max(broker.bootstrap) == 6
    tid, topic = unique_name("tid2pc"), unique_name("twopc")

    # KeepPreparedTxn is not implemented by Kafka either
    assert init_v6(broker.bootstrap, tid, enable_2pc=True, keep_prepared_txn=True).error_code == (
        Err.UNSUPPORTED_VERSION
    )
    # Enable2Pc skips the timeout check and stores Int.MaxValue
    first = init_v6(broker.bootstrap, tid, enable_2pc=True, timeout_ms=10**9)
    assert (first.error_code, first.producer_epoch) == (0, 0)
    assert (first.ongoing_txn_producer_id, first.ongoing_txn_producer_epoch) == (-1, -1)
    assert init_v6(broker.bootstrap, unique_name("tid"), enable_2pc=False, timeout_ms=10**9).error_code == (
        Err.INVALID_TRANSACTION_TIMEOUT
    )

    client = admin(broker.bootstrap)
    try:
        assert describe(client, tid).transaction_timeout_ms == INT32_MAX
        # Enable2Pc without KeepPreparedTxn still fences and aborts an open transaction (E -> E+2)
        other, records = unique_name("tid"), keys("p", 30)
        leave_open(broker.bootstrap, other, topic, records)
        epoch = describe(client, other).producer_epoch
        assert init_v6(broker.bootstrap, other, enable_2pc=True).error_code == Err.CONCURRENT_TRANSACTIONS
        retry = retry_concurrent(lambda: init_v6(broker.bootstrap, other, enable_2pc=True))
        assert (retry.error_code, retry.producer_epoch) == (0, epoch + 2)
        assert describe(client, other).transaction_timeout_ms == INT32_MAX
    finally:
        client.close()
    assert count_keys(broker.bootstrap, topic) == {}
    assert_exactly_once(count_keys(broker.bootstrap, topic, isolation="read_uncommitted"), records)


def test_two_phase_prepared_transaction_never_times_out(kafka_broker_factory, unique_name):
    broker = kafka_broker_factory(
        two_phase_commit=True, abort_check_interval_ms=20, transaction_max_timeout_ms=1000
    )
    tid, plain_tid, topic = unique_name("tid2pc"), unique_name("tid"), unique_name("twopc")
    create_topic(broker.bootstrap, topic, 1)
    init = init_v6(broker.bootstrap, tid, enable_2pc=True)
    with WireProbe(broker.bootstrap) as probe:
        topic_cls = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        added = probe.send(
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=tid,
                v3_and_below_producer_id=init.producer_id,
                v3_and_below_producer_epoch=init.producer_epoch,
                v3_and_below_topics=[topic_cls(name=topic, partitions=[0])],
            ),
            version=3,
        )
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    # a normal transaction with a 1 s timeout on the same broker is aborted by the scan ...
    leave_open(broker.bootstrap, plain_tid, topic, keys("x", 3), **{"transaction.timeout.ms": 1000})
    client = admin(broker.bootstrap)
    try:
        wait_for(
            lambda: describe(client, plain_tid).state.value == "CompleteAbort", "the plain timeout abort"
        )
        # ... which ran well past the 2PC transaction's start + 1 s, and left it alone
        prepared = describe(client, tid)
        assert (prepared.state.value, prepared.transaction_timeout_ms) == ("Ongoing", INT32_MAX)
    finally:
        client.close()
    assert commit(broker.bootstrap, tid, init.producer_id, init.producer_epoch) == 0
