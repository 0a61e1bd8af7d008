"""The transaction coordinator as a state machine, driven directly (no sockets).

Each test builds a real (unstarted) embedded ``Broker`` so markers land in real partition logs,
and a coordinator with a hand-driven clock so timeouts and expiration need no waiting. Every
row of the tables in /work/shared/kafka-txn-semantics.md §1-§3 is a case here; the same rules
are exercised over the wire with real clients in test_txn_wire.py and test_txn_clients.py.
"""

from __future__ import annotations

import pytest

from kafka_eos_testing.broker.broker import Broker, BrokerConfig
from kafka_eos_testing.broker.coordinator import TransactionCoordinator
from kafka_eos_testing.broker.txn_state import (
    INT32_MAX,
    OFFSETS_TOPIC,
    Err,
    TxnState,
    offsets_partition_for,
)

S = TxnState
TOPIC = "orders"


class Clock:
    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make(clock: Clock, **config) -> tuple[Broker, TransactionCoordinator]:
    broker = Broker(BrokerConfig(**config))
    if not broker.topics.exists(TOPIC):
        broker.topics.create(TOPIC, 2)
    broker.coordinator.clock = clock
    return broker, broker.coordinator


@pytest.fixture
def env(clock):
    return make(clock)


def begin(coord: TransactionCoordinator, tid: str = "t1", timeout_ms: int = 60000, partitions=((TOPIC, 0),)):
    """InitProducerId + AddPartitions: an Ongoing transaction; returns (pid, epoch)."""
    init = coord.init_producer_id(tid, timeout_ms)
    assert init.error is Err.NONE
    assert coord.add_partitions(tid, init.producer_id, init.producer_epoch, partitions) is Err.NONE
    return init.producer_id, init.producer_epoch


# ----------------------------------------------------------------------------- InitProducerId


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"transactional_id": "", "transaction_timeout_ms": 1000}, Err.INVALID_REQUEST),
        (
            {"transactional_id": "x", "transaction_timeout_ms": 1000, "enable_2pc": True},
            Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ),
        (
            {"transactional_id": "x", "transaction_timeout_ms": 1000, "keep_prepared_txn": True},
            Err.UNSUPPORTED_VERSION,
        ),
        ({"transactional_id": "x", "transaction_timeout_ms": 0}, Err.INVALID_TRANSACTION_TIMEOUT),
        ({"transactional_id": "x", "transaction_timeout_ms": -5}, Err.INVALID_TRANSACTION_TIMEOUT),
        ({"transactional_id": "x", "transaction_timeout_ms": 900001}, Err.INVALID_TRANSACTION_TIMEOUT),
    ],
)
def test_init_producer_id_rejections_create_nothing(env, kwargs, expected):
    _, coord = env
    result = coord.init_producer_id(**kwargs)
    assert result.error is expected
    assert coord.get("x") is None and coord.get("") is None


def test_init_producer_id_checks_run_in_kafkas_order(clock):
    _, coord = make(clock, two_phase_commit=False)
    # 2PC-disabled is checked before KeepPreparedTxn, which is checked before the timeout
    assert coord.init_producer_id("x", 0, enable_2pc=True, keep_prepared_txn=True).error is (
        Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )
    assert coord.init_producer_id("x", 0, keep_prepared_txn=True).error is Err.UNSUPPORTED_VERSION


def test_null_transactional_id_gets_fresh_pid_and_no_state(env):
    _, coord = env
    first = coord.init_producer_id(None, 0)
    second = coord.init_producer_id(None, 0)
    assert (first.error, first.producer_epoch) == (Err.NONE, 0)
    assert second.producer_id != first.producer_id
    assert len(coord) == 0


def test_new_id_gets_epoch_zero_then_each_init_bumps(env):
    _, coord = env
    first = coord.init_producer_id("t1", 1000)
    assert (first.error, first.producer_epoch) == (Err.NONE, 0)
    second = coord.init_producer_id("t1", 2000)
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    assert coord.get("t1").timeout_ms == 2000
    assert coord.get("t1").state is S.EMPTY
    assert coord.get("t1").start_ms == -1


def test_init_with_expected_epoch_bumps_and_retry_returns_current(env):
    _, coord = env
    first = coord.init_producer_id("t1", 1000)
    bumped = coord.init_producer_id("t1", 1000, producer_id=first.producer_id, producer_epoch=0)
    assert bumped.producer_epoch == 1
    # the same request again (its answer was lost): current epoch, no second bump
    retry = coord.init_producer_id("t1", 1000, producer_id=first.producer_id, producer_epoch=0)
    assert (retry.error, retry.producer_epoch) == (Err.NONE, 1)
    assert coord.get("t1").producer_epoch == 1


@pytest.mark.parametrize(("pid_delta", "epoch"), [(1, 0), (0, 7)])
def test_init_with_wrong_expected_pid_or_epoch_is_fenced(env, pid_delta, epoch):
    _, coord = env
    first = coord.init_producer_id("t1", 1000)
    coord.init_producer_id("t1", 1000)
    coord.init_producer_id("t1", 1000)  # epoch 2, last epoch -1
    result = coord.init_producer_id(
        "t1", 1000, producer_id=first.producer_id + pid_delta, producer_epoch=epoch
    )
    assert result.error is Err.PRODUCER_FENCED
    assert coord.get("t1").producer_epoch == 2


def test_init_on_ongoing_fences_aborts_and_caller_ends_at_e_plus_2(env):
    broker, coord = env
    pid, epoch = begin(coord)
    first = coord.init_producer_id("t1", 1000)
    assert first.error is Err.CONCURRENT_TRANSACTIONS
    txn = coord.get("t1")
    assert (txn.state, txn.producer_epoch) == (S.COMPLETE_ABORT, epoch + 1)
    # the abort marker carries the fenced epoch E+1
    assert broker.topics.get(TOPIC, 0).producer_state(pid).producer_epoch == epoch + 1
    retry = coord.init_producer_id("t1", 1000)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (Err.NONE, pid, epoch + 2)


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_init_during_prepare_is_concurrent_transactions(env, state):
    _, coord = env
    begin(coord)
    coord.get("t1").state = state
    assert coord.init_producer_id("t1", 1000).error is Err.CONCURRENT_TRANSACTIONS


def test_epoch_exhaustion_rotates_producer_id(env):
    _, coord = env
    first = coord.init_producer_id("t1", 1000)
    coord.get("t1").producer_epoch = 32766
    rotated = coord.init_producer_id("t1", 1000)
    assert rotated.error is Err.NONE
    assert rotated.producer_id != first.producer_id and rotated.producer_epoch == 0
    assert coord.get("t1").previous_producer_id == first.producer_id


def test_two_phase_init_stores_int_max_timeout_and_never_times_out(clock):
    _, coord = make(clock, two_phase_commit=True)
    init = coord.init_producer_id("t2pc", 10**9, enable_2pc=True)  # any timeout is accepted
    assert init.error is Err.NONE
    coord.add_partitions("t2pc", init.producer_id, init.producer_epoch, [(TOPIC, 0)])
    assert coord.get("t2pc").timeout_ms == INT32_MAX
    clock.ms += 10**10
    assert coord.abort_timed_out() == []
    assert coord.get("t2pc").state is S.ONGOING


def test_two_phase_init_without_keep_prepared_still_fences_ongoing(clock):
    _, coord = make(clock, two_phase_commit=True)
    _, epoch = begin(coord, "t2pc")
    assert coord.init_producer_id("t2pc", 1000, enable_2pc=True).error is Err.CONCURRENT_TRANSACTIONS
    assert coord.get("t2pc").state is S.COMPLETE_ABORT
    assert coord.init_producer_id("t2pc", 1000, enable_2pc=True).producer_epoch == epoch + 2


# ----------------------------------------------------------------------------- AddPartitions / verify


def test_add_partitions_errors(env):
    _, coord = env
    assert coord.add_partitions("nope", 1, 0, [(TOPIC, 0)]) is Err.INVALID_PRODUCER_ID_MAPPING
    pid, epoch = begin(coord)
    assert coord.add_partitions("t1", pid + 1, epoch, [(TOPIC, 1)]) is Err.INVALID_PRODUCER_ID_MAPPING
    assert coord.add_partitions("t1", pid, epoch + 1, [(TOPIC, 1)]) is Err.PRODUCER_FENCED
    coord.get("t1").state = S.PREPARE_COMMIT
    assert coord.add_partitions("t1", pid, epoch, [(TOPIC, 1)]) is Err.CONCURRENT_TRANSACTIONS


def test_start_time_is_first_add_not_last_activity(env, clock):
    _, coord = env
    pid, epoch = begin(coord)
    started = coord.get("t1").start_ms
    clock.ms += 5000
    coord.add_partitions("t1", pid, epoch, [(TOPIC, 1)])
    assert coord.get("t1").start_ms == started
    assert coord.get("t1").partitions == {(TOPIC, 0), (TOPIC, 1)}


def test_verify_produce_tv1_requires_added_partition(clock):
    _, coord = make(clock, transaction_version=1)
    pid, epoch = begin(coord)
    assert coord.verify_produce("t1", pid, epoch, TOPIC, 0) == 0
    assert coord.verify_produce("t1", pid, epoch, TOPIC, 1) == Err.INVALID_TXN_STATE
    assert coord.verify_produce("t1", pid, epoch - 1, TOPIC, 0) == Err.INVALID_PRODUCER_EPOCH
    assert coord.verify_produce("t1", pid + 9, epoch, TOPIC, 0) == Err.INVALID_PRODUCER_ID_MAPPING


def test_verify_produce_tv2_adds_partition_implicitly(clock):
    _, coord = make(clock, transaction_version=2)
    init = coord.init_producer_id("t1", 1000)
    assert coord.verify_produce("t1", init.producer_id, init.producer_epoch, TOPIC, 1) == 0
    txn = coord.get("t1")
    assert (txn.state, txn.partitions, txn.start_ms) == (S.ONGOING, {(TOPIC, 1)}, clock.ms)


# ----------------------------------------------------------------------------- EndTxn TV1

TV1_TABLE = [
    # state, commit?, expected
    (S.COMPLETE_COMMIT, True, Err.NONE),
    (S.COMPLETE_COMMIT, False, Err.INVALID_TXN_STATE),
    (S.COMPLETE_ABORT, True, Err.INVALID_TXN_STATE),
    (S.COMPLETE_ABORT, False, Err.NONE),
    (S.PREPARE_COMMIT, True, Err.CONCURRENT_TRANSACTIONS),
    (S.PREPARE_COMMIT, False, Err.INVALID_TXN_STATE),
    (S.PREPARE_ABORT, True, Err.INVALID_TXN_STATE),
    (S.PREPARE_ABORT, False, Err.CONCURRENT_TRANSACTIONS),
    (S.EMPTY, True, Err.INVALID_TXN_STATE),
    (S.EMPTY, False, Err.INVALID_TXN_STATE),
]


@pytest.mark.parametrize(("state", "commit", "expected"), TV1_TABLE)
def test_end_txn_tv1_table(env, state, commit, expected):
    _, coord = env
    pid, epoch = begin(coord)
    if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        assert coord.end_txn("t1", pid, epoch, state is S.COMPLETE_COMMIT).error is Err.NONE
    elif state is S.EMPTY:
        assert coord.init_producer_id("t1", 1000).error is Err.CONCURRENT_TRANSACTIONS  # fence...
        init = coord.init_producer_id("t1", 1000)  # ... then Empty
        pid, epoch = init.producer_id, init.producer_epoch
    else:
        coord.get("t1").state = state  # a pending completion, as a Kafka client can catch it
    before = coord.get("t1").to_record()
    result = coord.end_txn("t1", pid, epoch, commit)
    assert result.error is expected
    assert (result.producer_id, result.producer_epoch) == (-1, -1)  # TV1 carries no pid/epoch
    assert coord.get("t1").to_record() == before  # answers never change state


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_tv1_identity_errors(env, commit):
    _, coord = env
    pid, epoch = begin(coord)
    assert coord.end_txn("unknown", pid, epoch, commit).error is Err.INVALID_PRODUCER_ID_MAPPING
    assert coord.end_txn("t1", pid + 1, epoch, commit).error is Err.INVALID_PRODUCER_ID_MAPPING
    assert coord.end_txn("t1", pid, epoch + 1, commit).error is Err.PRODUCER_FENCED
    assert coord.end_txn("t1", pid, epoch - 1, commit).error is Err.PRODUCER_FENCED
    assert coord.end_txn("", pid, epoch, commit).error is Err.INVALID_REQUEST
    assert coord.get("t1").state is S.ONGOING


def test_end_txn_tv1_commit_writes_markers_and_completes(env):
    broker, coord = env
    pid, epoch = begin(coord, partitions=[(TOPIC, 0), (TOPIC, 1)])
    assert coord.end_txn("t1", pid, epoch, True).error is Err.NONE
    txn = coord.get("t1")
    assert (txn.state, txn.producer_epoch, txn.partitions) == (S.COMPLETE_COMMIT, epoch, set())
    for p in (0, 1):
        log = broker.topics.get(TOPIC, p)
        assert log.high_watermark == 1  # exactly one control batch
        assert log.producer_state(pid).coordinator_epoch == coord.coordinator_epoch
    # commit after commit is idempotent; abort after commit changes nothing
    assert coord.end_txn("t1", pid, epoch, True).error is Err.NONE
    assert coord.end_txn("t1", pid, epoch, False).error is Err.INVALID_TXN_STATE
    assert broker.topics.get(TOPIC, 0).high_watermark == 1


# ----------------------------------------------------------------------------- EndTxn TV2

TV2_TABLE = [
    # state, commit?, epoch offset from the stored epoch (-1 = retry "E", 0 = current "E+1"), expected, bumps?
    (S.EMPTY, False, -1, Err.PRODUCER_FENCED, False),
    (S.EMPTY, False, 0, Err.NONE, True),
    (S.EMPTY, True, -1, Err.PRODUCER_FENCED, False),
    (S.EMPTY, True, 0, Err.INVALID_TXN_STATE, False),
    (S.COMPLETE_ABORT, False, -1, Err.NONE, False),
    (S.COMPLETE_ABORT, False, 0, Err.NONE, True),
    (S.COMPLETE_ABORT, True, -1, Err.INVALID_TXN_STATE, False),
    (S.COMPLETE_ABORT, True, 0, Err.INVALID_TXN_STATE, False),
    (S.COMPLETE_COMMIT, False, -1, Err.INVALID_TXN_STATE, False),
    (S.COMPLETE_COMMIT, False, 0, Err.NONE, True),
    (S.COMPLETE_COMMIT, True, -1, Err.NONE, False),
    (S.COMPLETE_COMMIT, True, 0, Err.INVALID_TXN_STATE, False),
]


@pytest.mark.parametrize(("state", "commit", "offset", "expected", "bumps"), TV2_TABLE)
def test_end_txn_tv2_table(env, state, commit, offset, expected, bumps):
    _, coord = env
    if state is S.EMPTY:
        init = coord.init_producer_id("t1", 1000)
        init = coord.init_producer_id("t1", 1000)  # stored epoch 1, so "E" = 0 exists
        pid = init.producer_id
    else:
        pid, epoch = begin(coord)
        done = coord.end_txn("t1", pid, epoch, state is S.COMPLETE_COMMIT, tv2=True)
        assert (done.error, done.producer_epoch) == (Err.NONE, epoch + 1)
    txn = coord.get("t1")
    assert txn.state is state
    stored = txn.producer_epoch
    result = coord.end_txn("t1", pid, stored + offset, commit, tv2=True)
    assert result.error is expected
    if bumps:
        assert (result.producer_id, result.producer_epoch) == (pid, stored + 1)
        assert coord.get("t1").state is S.COMPLETE_ABORT
    else:
        assert coord.get("t1").producer_epoch == stored
        assert coord.get("t1").state is state
    if expected is Err.NONE and not bumps:  # an idempotent retry answers the current pid/epoch
        assert (result.producer_id, result.producer_epoch) == (pid, stored)


def test_end_txn_tv2_commit_bumps_epoch_and_markers_carry_it(env):
    broker, coord = env
    pid, epoch = begin(coord)
    result = coord.end_txn("t1", pid, epoch, True, tv2=True)
    assert (result.error, result.producer_id, result.producer_epoch) == (Err.NONE, pid, epoch + 1)
    txn = coord.get("t1")
    assert (txn.state, txn.last_producer_epoch) == (S.COMPLETE_COMMIT, epoch)
    assert broker.topics.get(TOPIC, 0).producer_state(pid).producer_epoch == epoch + 1
    # the next transaction runs at E+1 without any InitProducerId
    assert coord.add_partitions("t1", pid, epoch + 1, [(TOPIC, 1)]) is Err.NONE


def test_end_txn_tv2_ongoing_needs_exact_epoch(env):
    _, coord = env
    pid, epoch = begin(coord)
    coord.init_producer_id("t1", 1000)  # fence -> CompleteAbort E+1
    coord.init_producer_id("t1", 1000)  # -> Empty E+2
    assert coord.add_partitions("t1", pid, epoch + 2, [(TOPIC, 0)]) is Err.NONE
    assert coord.end_txn("t1", pid, epoch + 1, True, tv2=True).error is Err.PRODUCER_FENCED
    assert coord.get("t1").state is S.ONGOING


def test_end_txn_tv2_epoch_overflow_rotates_pid_and_retry_is_idempotent(env):
    _, coord = env
    pid, _ = begin(coord)
    coord.get("t1").producer_epoch = 32766
    result = coord.end_txn("t1", pid, 32766, True, tv2=True)
    assert result.error is Err.NONE and result.producer_id != pid and result.producer_epoch == 0
    retry = coord.end_txn("t1", pid, 32766, True, tv2=True)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (Err.NONE, result.producer_id, 0)


# ----------------------------------------------------------------------------- timeouts


def _time_out(coord: TransactionCoordinator, clock: Clock, tid: str = "t1", timeout_ms: int = 1000):
    pid, epoch = begin(coord, tid, timeout_ms=timeout_ms)
    clock.ms += timeout_ms  # start + timeout == now: not yet
    assert coord.abort_timed_out() == []
    clock.ms += 1
    assert coord.abort_timed_out() == [tid]
    txn = coord.get(tid)
    assert (txn.state, txn.producer_epoch) == (S.COMPLETE_ABORT, epoch + 1)
    return pid, epoch


@pytest.mark.parametrize(("commit", "expected"), [(True, Err.PRODUCER_FENCED), (False, Err.PRODUCER_FENCED)])
def test_timeout_then_tv1_end_txn_is_fenced(env, clock, commit, expected):
    _, coord = env
    pid, epoch = _time_out(coord, clock)
    assert coord.end_txn("t1", pid, epoch, commit).error is expected


@pytest.mark.parametrize(("commit", "expected"), [(True, Err.INVALID_TXN_STATE), (False, Err.NONE)])
def test_timeout_then_tv2_end_txn(env, clock, commit, expected):
    _, coord = env
    pid, epoch = _time_out(coord, clock)
    assert coord.end_txn("t1", pid, epoch, commit, tv2=True).error is expected
    assert coord.get("t1").state is S.COMPLETE_ABORT


def test_timeout_fences_late_data_on_the_partition(env, clock):
    broker, coord = env
    pid, epoch = _time_out(coord, clock)
    assert broker.topics.get(TOPIC, 0).producer_state(pid).producer_epoch == epoch + 1
    assert coord.verify_produce("t1", pid, epoch, TOPIC, 0) == Err.INVALID_PRODUCER_EPOCH


# ----------------------------------------------------------------------------- offsets in transactions


@pytest.mark.parametrize("commit", [True, False])
def test_txn_offsets_reach_the_group_only_on_commit(env, commit):
    broker, coord = env
    init = coord.init_producer_id("t1", 1000)
    pid, epoch = init.producer_id, init.producer_epoch
    offsets = {(TOPIC, 0): (42, "m")}
    assert coord.txn_offset_commit("t1", "g1", pid, epoch, offsets) is Err.INVALID_TXN_STATE  # not added
    assert coord.add_offsets("t1", pid, epoch, "g1") is Err.NONE
    assert (OFFSETS_TOPIC, offsets_partition_for("g1")) in coord.get("t1").partitions
    assert coord.txn_offset_commit("t1", "g1", pid, epoch, offsets) is Err.NONE
    assert broker.groups.fetch_offsets("g1") == {}
    assert coord.end_txn("t1", pid, epoch, commit).error is Err.NONE
    assert broker.groups.fetch_offsets("g1") == (offsets if commit else {})


def test_offsets_partition_matches_java_hash():
    # Known Java String.hashCode values: "Aa" and "BB" collide at 2112; "polygenelubricants" hashes
    # to Integer.MIN_VALUE, which Kafka's Utils.abs maps to 0.
    assert offsets_partition_for("Aa") == offsets_partition_for("BB") == 2112 % 50
    assert offsets_partition_for("a") == 97 % 50
    assert offsets_partition_for("polygenelubricants") == 0


# ----------------------------------------------------------------------------- expiration and persistence


def test_idle_ids_expire_but_ongoing_never(clock):
    _, coord = make(clock, transactional_id_expiration_ms=10_000)
    coord.init_producer_id("idle", 1000)
    begin(coord, "busy", timeout_ms=900000)
    clock.ms += 10_000
    assert coord.expire_transactional_ids(force=True) == ["idle"]
    assert coord.get("idle") is None and coord.get("busy").state is S.ONGOING


def test_restart_keeps_open_transactions_committable(tmp_path, clock):
    broker, coord = make(clock, data_dir=str(tmp_path))
    pid, epoch = begin(coord, "open")
    begin(coord, "done")
    coord.end_txn("done", coord.get("done").producer_id, 0, True)
    coord._journal.close()
    broker.topics.close()

    _, coord2 = make(clock, data_dir=str(tmp_path))
    assert coord2.coordinator_epoch == coord.coordinator_epoch + 1
    txn = coord2.get("open")
    assert (txn.state, txn.producer_id, txn.producer_epoch, txn.partitions) == (
        S.ONGOING,
        pid,
        epoch,
        {(TOPIC, 0)},
    )
    assert coord2.get("done").state is S.COMPLETE_COMMIT
    assert coord2.end_txn("open", pid, epoch, True).error is Err.NONE
    assert coord2.get("open").state is S.COMPLETE_COMMIT
    # a new id never reuses a producer id from before the restart
    assert coord2.init_producer_id("fresh", 1000).producer_id > max(pid, coord.get("done").producer_id)


def test_restart_finishes_a_transaction_caught_in_prepare(tmp_path, clock):
    broker, coord = make(clock, data_dir=str(tmp_path))
    begin(coord, "mid")
    txn = coord.get("mid")
    txn.transition(S.PREPARE_COMMIT, clock.ms)
    coord._save(txn)  # journaled PrepareCommit; the process "dies" before the markers
    coord._journal.close()
    broker.topics.close()

    broker2, coord2 = make(clock, data_dir=str(tmp_path))
    assert coord2.get("mid").state is S.COMPLETE_COMMIT
    assert broker2.topics.get(TOPIC, 0).high_watermark == 1  # the commit marker was written on load


def test_running_journal_compacts_and_still_restores_everything(tmp_path, clock, monkeypatch):
    from kafka_eos_testing.broker import txn_journal

    monkeypatch.setattr(txn_journal, "COMPACT_AFTER_LINES", 20)
    compactions = []
    real_compact = txn_journal.TxnJournal.compact
    monkeypatch.setattr(
        txn_journal.TxnJournal,
        "compact",
        lambda self, *a: (compactions.append(self.lines), real_compact(self, *a)),
    )
    broker, coord = make(clock, data_dir=str(tmp_path))
    assert compactions == [0]  # the one on load
    opened = {}
    for i in range(15):  # 15 x (Empty, Ongoing, PrepareCommit, CompleteCommit) + 15 more open ones
        pid, epoch = begin(coord, f"c{i}")
        coord.end_txn(f"c{i}", pid, epoch, True)
        opened[f"o{i}"] = begin(coord, f"o{i}")
    assert len(compactions) > 1 and all(n >= 20 for n in compactions[1:])  # it compacted while running
    coord._journal.close()
    broker.topics.close()

    _, coord2 = make(clock, data_dir=str(tmp_path))
    assert {f"c{i}" for i in range(15)} | set(opened) == {t.transactional_id for t in coord2.transactions()}
    for tid, (pid, epoch) in opened.items():
        txn = coord2.get(tid)
        assert (txn.state, txn.producer_id, txn.producer_epoch) == (S.ONGOING, pid, epoch)
    assert {coord2.get(f"c{i}").state for i in range(15)} == {S.COMPLETE_COMMIT}


def test_tv2_timeout_abort_at_the_epoch_limit_rotates_and_a_commit_retry_is_invalid_txn_state(env, clock):
    """Measured on Kafka 4.4 (kafka-txn-semantics.md, "The epoch limit under TV2"): pid 6 -> 17 at
    epoch 0 in CompleteAbort; EndTxn(commit) with the old pair is a recognised retry of an abort."""
    _, coord = env
    pid, _ = begin(coord, timeout_ms=1000)
    coord.get("t1").producer_epoch = 32766
    clock.ms += 1001
    assert coord.abort_timed_out() == ["t1"]
    txn = coord.get("t1")
    assert (txn.state, txn.producer_epoch, txn.previous_producer_id) == (S.COMPLETE_ABORT, 0, pid)
    assert txn.producer_id != pid
    assert coord.end_txn("t1", pid, 32766, True, tv2=True).error is Err.INVALID_TXN_STATE
    assert coord.end_txn("t1", pid, 32766, False, tv2=True).error is Err.NONE
