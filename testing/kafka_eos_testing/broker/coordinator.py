"""The embedded broker's transaction coordinator.

A faithful, single-node rendering of ``TransactionCoordinator.scala`` (apache/kafka): the same
checks in the same order, the same error codes, the TV1 and TV2 (KIP-890) EndTxn tables, epoch
fencing, timeouts, and KIP-939 2PC InitProducerId. What it deliberately does differently is
only *when* things happen: Kafka appends PrepareX to ``__transaction_state``, answers the client,
then sends markers asynchronously; here the markers are written synchronously inside the call,
so a transaction is CompleteX when EndTxn returns. The places where a Kafka client observes
CONCURRENT_TRANSACTIONS because of that asynchrony (the InitProducerId epoch fence) still answer
it, so client retry paths are exercised. See docs/embedded-broker-transactions.md.

The public methods take plain values (no protocol objects) so the state machine can be driven
directly by unit tests; the ``handle_*`` functions at the bottom adapt Kafka requests to them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

from kafka_eos_testing.broker.api import RequestContext, handles
from kafka_eos_testing.broker.txn_journal import TxnJournal
from kafka_eos_testing.broker.txn_state import (
    COMPLETE_STATES,
    INT32_MAX,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    OFFSETS_TOPIC,
    PREPARE_STATES,
    Err,
    TxnMetadata,
    TxnState,
    offsets_partition_for,
)

log = logging.getLogger(__name__)

S = TxnState
PID_BLOCK_SIZE = 1000  # producer ids are reserved (and journaled) in blocks, as Kafka's ProducerIdManager
CLUSTER_NAME = "kafka-cluster"


@dataclass(frozen=True)
class PidEpoch:
    """An answer carrying a producer id and epoch (InitProducerId, EndTxn v5)."""

    error: Err
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


def _config(broker: Any, name: str, default: Any) -> Any:
    value = getattr(getattr(broker, "config", None), name, None)
    return default if value is None else value


_COORDINATORS: weakref.WeakValueDictionary[int, TransactionCoordinator] = weakref.WeakValueDictionary()


def coordinator_for(broker: Any) -> TransactionCoordinator:
    """The coordinator a broker constructed (found by identity, whatever attribute holds it)."""
    for name in ("coordinator", "txn_coordinator", "transaction_coordinator"):
        candidate = getattr(broker, name, None)
        if isinstance(candidate, TransactionCoordinator):
            return candidate
    found = _COORDINATORS.get(id(broker))
    if found is None or found.broker is not broker:
        raise RuntimeError("this broker has no TransactionCoordinator")
    return found


class TransactionCoordinator:
    """Transaction state for every transactional id of one broker, plus the timeout scanner."""

    def __init__(self, broker: Any, *, clock: Callable[[], int] | None = None) -> None:
        self.broker = broker
        # Replaceable (tests drive time by hand); milliseconds since the epoch, like Kafka's Time.
        self.clock: Callable[[], int] = clock or (lambda: int(time.time() * 1000))
        self._lock = threading.RLock()
        self._txns: dict[str, TxnMetadata] = {}
        self._ongoing: set[str] = set()  # ids in Ongoing: the only ones the timeout scan looks at
        self._task: asyncio.Task | None = None
        self._next_expiration_check_ms = 0
        self.coordinator_epoch = 0
        self._next_pid = 1000
        self._pid_block_end = 0
        data_dir = _config(broker, "data_dir", None)
        self._journal = TxnJournal(data_dir) if data_dir else None
        if self._journal is not None:
            self._load()
        _COORDINATORS[id(broker)] = self

    # ----------------------------------------------------------------- configuration

    @property
    def max_timeout_ms(self) -> int:
        return int(_config(self.broker, "transaction_max_timeout_ms", 900000))

    @property
    def transaction_version(self) -> int:
        return int(_config(self.broker, "transaction_version", 2))

    @property
    def two_phase_commit_enabled(self) -> bool:
        return bool(_config(self.broker, "two_phase_commit", False))

    @property
    def abort_check_interval_ms(self) -> int:
        return int(_config(self.broker, "abort_check_interval_ms", 10000))

    @property
    def expiration_ms(self) -> int:
        return int(_config(self.broker, "transactional_id_expiration_ms", 7 * 24 * 3600 * 1000))

    def now_ms(self) -> int:
        return self.clock()

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._scan_forever())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._journal is not None:
            self._journal.close()

    async def _scan_forever(self) -> None:
        # A timer, like Kafka's scheduler thread, not a synchronisation device.
        while True:
            await asyncio.sleep(self.abort_check_interval_ms / 1000)
            try:
                self.abort_timed_out()
                self.expire_transactional_ids()
            except Exception:  # the scanner must survive a bad partition, as Kafka's does
                log.exception("transaction timeout scan failed")

    def _load(self) -> None:
        assert self._journal is not None
        records, meta = self._journal.load()
        self.coordinator_epoch = int(meta.get("coordinator_epoch", -1)) + 1
        self._pid_block_end = int(meta.get("pid_block_end", 0))
        self._next_pid = max(self._pid_block_end, 1000)
        for rec in records.values():
            txn = TxnMetadata.from_record(rec)
            self._txns[txn.transactional_id] = txn
            if txn.state is S.ONGOING:
                self._ongoing.add(txn.transactional_id)
        self._journal.write_meta(coordinator_epoch=self.coordinator_epoch)
        # Kafka re-sends the markers of transactions it finds in PrepareX when it loads the log.
        now = self.now_ms()
        for txn in list(self._txns.values()):
            if txn.state in PREPARE_STATES:
                self._write_markers_and_complete(txn, txn.state is S.PREPARE_COMMIT, now)

    def _save(self, txn: TxnMetadata) -> None:
        if txn.state is S.ONGOING:
            self._ongoing.add(txn.transactional_id)
        else:
            self._ongoing.discard(txn.transactional_id)
        if self._journal is not None:
            self._journal.write_txn(txn.to_record())
            if self._journal.should_compact(len(self._txns)):
                self._journal.compact(
                    {tid: t.to_record() for tid, t in self._txns.items()},
                    {"coordinator_epoch": self.coordinator_epoch, "pid_block_end": self._pid_block_end},
                )

    def _generate_producer_id(self) -> int:
        """A never-used producer id: the broker's allocator (shared with idempotent producers) if any."""
        allocate = getattr(self.broker, "allocate_producer_id", None)
        if callable(allocate):
            return int(allocate())
        pid = self._next_pid
        self._next_pid += 1
        if self._next_pid > self._pid_block_end:
            self._pid_block_end = self._next_pid + PID_BLOCK_SIZE
            if self._journal is not None:
                self._journal.write_meta(pid_block_end=self._pid_block_end)
        return pid

    # ----------------------------------------------------------------- reads

    def get(self, transactional_id: str) -> TxnMetadata | None:
        """The live metadata of an id (Dead ids are gone); callers must not mutate it."""
        return self._txns.get(transactional_id)

    def transactions(self) -> list[TxnMetadata]:
        with self._lock:
            return list(self._txns.values())

    def __len__(self) -> int:
        return len(self._txns)

    # ----------------------------------------------------------------- InitProducerId

    def init_producer_id(
        self,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        enable_2pc: bool = False,
        keep_prepared_txn: bool = False,
    ) -> PidEpoch:
        """``handleInitProducerId`` after KafkaApis' ACL and pid/epoch-pair checks."""
        with self._lock:
            if transactional_id is None:
                return PidEpoch(Err.NONE, self._generate_producer_id(), 0)
            if transactional_id == "":
                return PidEpoch(Err.INVALID_REQUEST)
            if enable_2pc and not self.two_phase_commit_enabled:
                return PidEpoch(Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            if keep_prepared_txn:
                return PidEpoch(Err.UNSUPPORTED_VERSION)
            if not enable_2pc and not 0 < transaction_timeout_ms <= self.max_timeout_ms:
                return PidEpoch(Err.INVALID_TRANSACTION_TIMEOUT)
            timeout = INT32_MAX if enable_2pc else transaction_timeout_ms
            expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
            now = self.now_ms()

            txn = self._txns.get(transactional_id)
            if txn is None:
                txn = TxnMetadata(
                    transactional_id, self._generate_producer_id(), timeout_ms=timeout, last_update_ms=now
                )
                self._txns[transactional_id] = txn

            if expected is not None and not self._is_valid_expected_pid(txn, *expected):
                return PidEpoch(Err.PRODUCER_FENCED)
            if txn.state in PREPARE_STATES:
                return PidEpoch(Err.CONCURRENT_TRANSACTIONS)
            if txn.state is S.ONGOING:
                # Epoch fence: E -> E+1, abort with markers at E+1, and make the client retry;
                # the retry finds CompleteAbort and bumps again, so the caller ends at E+2.
                self._fence_and_abort(txn, now)
                return PidEpoch(Err.CONCURRENT_TRANSACTIONS)

            # Empty / Complete*
            if txn.epoch_exhausted and (expected is None or expected[1] == txn.producer_epoch):
                txn.previous_producer_id = txn.producer_id
                txn.last_producer_epoch = txn.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
                txn.producer_id = self._generate_producer_id()
                txn.producer_epoch = 0
            elif expected is None:
                txn.last_producer_epoch = NO_PRODUCER_EPOCH
                txn.producer_epoch += 1
            elif txn.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == txn.producer_epoch:
                txn.last_producer_epoch = txn.producer_epoch
                txn.producer_epoch += 1
            elif expected[1] == txn.last_producer_epoch:
                pass  # a retry of an InitProducerId whose answer was lost: current epoch, no bump
            else:
                return PidEpoch(Err.PRODUCER_FENCED)
            txn.timeout_ms = timeout
            txn.two_phase = enable_2pc
            txn.partitions.clear()
            txn.pending_offsets.clear()
            txn.start_ms = -1
            txn.transition(S.EMPTY, now)
            self._save(txn)
            return PidEpoch(Err.NONE, txn.producer_id, txn.producer_epoch)

    @staticmethod
    def _is_valid_expected_pid(txn: TxnMetadata, producer_id: int, producer_epoch: int) -> bool:
        return (
            txn.producer_epoch == NO_PRODUCER_EPOCH
            or producer_id == txn.producer_id
            or (producer_id == txn.previous_producer_id and producer_epoch >= 32766)
        )

    # ----------------------------------------------------------------- AddPartitions / AddOffsets

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> Err:
        """``handleAddPartitionsToTransaction``: Empty/Ongoing/Complete* -> Ongoing."""
        wanted = set(partitions)
        with self._lock:
            txn = self._txns.get(transactional_id)
            refused = _refuse_producer(txn, producer_id, producer_epoch)
            if refused is not None:
                return refused
            if txn.state is S.ONGOING and wanted <= txn.partitions:
                return Err.NONE
            self._add_to_transaction(txn, wanted)
            return Err.NONE

    def _add_to_transaction(self, txn: TxnMetadata, partitions: set[tuple[str, int]]) -> None:
        now = self.now_ms()
        if txn.state is not S.ONGOING:
            txn.start_ms = now  # the timeout counts from the first partition, not last activity
            txn.partitions.clear()
            txn.pending_offsets.clear()
        txn.partitions |= partitions
        txn.transition(S.ONGOING, now)
        self._save(txn)

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> Err:
        """AddOffsetsToTxn = AddPartitions of the group's ``__consumer_offsets`` partition."""
        return self.add_partitions(
            transactional_id, producer_id, producer_epoch, [(OFFSETS_TOPIC, offsets_partition_for(group_id))]
        )

    def verify_partition(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        topic: str,
        partition: int,
        *,
        implicit_add: bool,
    ) -> Err:
        """Is (topic, partition) in the Ongoing transaction of (pid, epoch)? (KIP-890 verification).

        With ``implicit_add`` (TV2 clients) a matching producer adds the partition itself, as a
        TV2 partition leader does with AddPartitionsToTxn v5.
        """
        with self._lock:
            txn = self._txns.get(transactional_id)
            refused = _refuse_producer(txn, producer_id, producer_epoch)
            if refused is not None:
                return refused
            if txn.state is S.ONGOING and (topic, partition) in txn.partitions:
                return Err.NONE
            if implicit_add and txn.state in (S.ONGOING, S.EMPTY, *COMPLETE_STATES):
                self._add_to_transaction(txn, {(topic, partition)})
                return Err.NONE
            return Err.INVALID_TXN_STATE

    def verify_produce(
        self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> int:
        """Called by Produce for each transactional batch; a Kafka error code, 0 = append it.

        Answers what a Produce response carries: a stale or foreign epoch is
        INVALID_PRODUCER_EPOCH (the partition's answer), and a transaction that is completing is
        NOT_ENOUGH_REPLICAS, the retriable code ReplicaManager substitutes for
        CONCURRENT_TRANSACTIONS so that older clients retry.
        """
        err = self.verify_partition(
            transactional_id,
            producer_id,
            producer_epoch,
            topic,
            partition,
            implicit_add=self.transaction_version >= 2,
        )
        if err is Err.PRODUCER_FENCED:
            return int(Err.INVALID_PRODUCER_EPOCH)
        if err is Err.CONCURRENT_TRANSACTIONS:
            return int(Err.NOT_ENOUGH_REPLICAS)
        return int(err)

    def txn_offset_commit(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[tuple[str, int], tuple[int, str | None]],
        *,
        implicit_add: bool = False,
    ) -> Err:
        """Stage offsets in the transaction; the group sees them only if it commits."""
        offsets_tp = (OFFSETS_TOPIC, offsets_partition_for(group_id))
        with self._lock:
            err = self.verify_partition(
                transactional_id, producer_id, producer_epoch, *offsets_tp, implicit_add=implicit_add
            )
            if err is not Err.NONE:
                return Err.INVALID_PRODUCER_EPOCH if err is Err.PRODUCER_FENCED else err
            txn = self._txns[transactional_id]
            txn.pending_offsets.setdefault(group_id, {}).update(offsets)
            self._save(txn)
            return Err.NONE

    # ----------------------------------------------------------------- EndTxn

    def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, *, tv2: bool = False
    ) -> PidEpoch:
        """``handleEndTransaction``: the TV1 table, or the TV2 (KIP-890) table when ``tv2``."""
        if not transactional_id:
            return PidEpoch(Err.INVALID_REQUEST)
        with self._lock:
            txn = self._txns.get(transactional_id)
            if tv2:
                return self._end_txn_tv2(txn, producer_id, producer_epoch, commit)
            return PidEpoch(self._end_txn_tv1(txn, producer_id, producer_epoch, commit))

    def _end_txn_tv1(
        self, txn: TxnMetadata | None, producer_id: int, producer_epoch: int, commit: bool
    ) -> Err:
        if txn is None or txn.producer_id != producer_id:
            return Err.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return Err.PRODUCER_FENCED
        state = txn.state
        if state is S.ONGOING:
            self._write_markers_and_complete(txn, commit, self.now_ms())
            return Err.NONE
        if state is S.COMPLETE_COMMIT:
            return Err.NONE if commit else Err.INVALID_TXN_STATE
        if state is S.COMPLETE_ABORT:
            return Err.INVALID_TXN_STATE if commit else Err.NONE
        if state is S.PREPARE_COMMIT:
            return Err.CONCURRENT_TRANSACTIONS if commit else Err.INVALID_TXN_STATE
        if state is S.PREPARE_ABORT:
            return Err.INVALID_TXN_STATE if commit else Err.CONCURRENT_TRANSACTIONS
        return Err.INVALID_TXN_STATE  # Empty

    def _end_txn_tv2(
        self, txn: TxnMetadata | None, producer_id: int, producer_epoch: int, commit: bool
    ) -> PidEpoch:
        if txn is None:
            return PidEpoch(Err.INVALID_PRODUCER_ID_MAPPING)
        retry_on_overflow = (
            txn.previous_producer_id == producer_id and producer_epoch == 32766 and txn.producer_epoch == 0
        )
        retry_on_bump = txn.producer_epoch == producer_epoch + 1
        state = txn.state
        if state in (S.ONGOING, S.EMPTY):
            valid_epoch = producer_epoch == txn.producer_epoch
        elif state in PREPARE_STATES:
            valid_epoch = retry_on_bump
        else:  # Complete*
            valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == txn.producer_epoch
        is_retry = retry_on_bump or retry_on_overflow
        if txn.producer_id != producer_id and not retry_on_overflow:
            return PidEpoch(Err.INVALID_PRODUCER_ID_MAPPING)
        if not valid_epoch:
            return PidEpoch(Err.PRODUCER_FENCED)
        current = PidEpoch(Err.NONE, txn.producer_id, txn.producer_epoch)
        if state is S.ONGOING:
            return self._complete_with_bump(txn, commit)
        if state is S.COMPLETE_COMMIT:
            if commit:
                return current if is_retry else PidEpoch(Err.INVALID_TXN_STATE)
            return PidEpoch(Err.INVALID_TXN_STATE) if is_retry else self._complete_with_bump(txn, False)
        if state is S.COMPLETE_ABORT:
            if commit:
                return PidEpoch(Err.INVALID_TXN_STATE)
            return current if is_retry else self._complete_with_bump(txn, False)
        if state is S.PREPARE_COMMIT:
            return PidEpoch(Err.CONCURRENT_TRANSACTIONS if commit else Err.INVALID_TXN_STATE)
        if state is S.PREPARE_ABORT:
            return PidEpoch(Err.INVALID_TXN_STATE if commit else Err.CONCURRENT_TRANSACTIONS)
        # Empty: an abort bumps the epoch (an "empty abort"); a commit has nothing to commit
        return PidEpoch(Err.INVALID_TXN_STATE) if commit else self._complete_with_bump(txn, False)

    def _complete_with_bump(self, txn: TxnMetadata, commit: bool) -> PidEpoch:
        """TV2 completion: PrepareX at E+1 (lastProducerEpoch=E), markers at E+1, maybe a new pid."""
        now = self.now_ms()
        rotate = txn.epoch_exhausted
        txn.last_producer_epoch = txn.producer_epoch
        txn.producer_epoch += 1
        txn.transaction_version = 2
        self._write_markers_and_complete(txn, commit, now)
        if rotate:
            txn.previous_producer_id = txn.producer_id
            txn.producer_id = self._generate_producer_id()
            txn.producer_epoch = 0
            self._save(txn)
        return PidEpoch(Err.NONE, txn.producer_id, txn.producer_epoch)

    # ----------------------------------------------------------------- fencing, markers, timeouts

    def _fence_and_abort(self, txn: TxnMetadata, now: int) -> None:
        """Fence (E -> E+1) and abort: a timed-out transaction, or InitProducerId on an Ongoing one.

        Under TV2 an abort at the epoch limit rotates the producer id like any completion (measured
        on Kafka 4.4: a timeout-abort at epoch 32766 left pid 6 -> 17 at epoch 0 in CompleteAbort,
        and EndTxn(commit) with the old pair then answered INVALID_TXN_STATE, a recognised retry).
        """
        rotate = self.transaction_version >= 2 and txn.epoch_exhausted
        txn.transition(S.PREPARE_EPOCH_FENCE, now)
        txn.producer_epoch += 1
        txn.last_producer_epoch = NO_PRODUCER_EPOCH
        self._write_markers_and_complete(txn, False, now)
        if rotate:
            txn.previous_producer_id = txn.producer_id
            txn.producer_id = self._generate_producer_id()
            txn.producer_epoch = 0
            self._save(txn)

    @property
    def marker_delay_ms(self) -> int:
        return int(_config(self.broker, "marker_delay_ms", 0))

    def _write_markers_and_complete(self, txn: TxnMetadata, commit: bool, now: int) -> None:
        """PrepareX (journaled first, so a crash mid-way is finished on load) -> markers -> CompleteX.

        With ``marker_delay_ms`` the markers and CompleteX come that much later, from the event
        loop, as Kafka's asynchronous marker writes do: meanwhile the id answers
        CONCURRENT_TRANSACTIONS and read_committed consumers stop at the open transaction.
        """
        if txn.state is not (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
            txn.transition(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, now)
            self._save(txn)
        pid, epoch = txn.producer_id, txn.producer_epoch  # a TV2 rotation may change them meanwhile
        delay_ms = self.marker_delay_ms
        if delay_ms > 0:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # driven directly (unit tests): no loop to write later from
                loop = None
            if loop is not None:
                loop.call_later(
                    delay_ms / 1000, self._finish_delayed, txn.transactional_id, pid, epoch, commit
                )
                return
        self._finish_markers(txn, commit, pid, epoch)

    def _finish_delayed(self, transactional_id: str, pid: int, epoch: int, commit: bool) -> None:
        with self._lock:
            txn = self._txns.get(transactional_id)
            if txn is not None and txn.state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
                self._finish_markers(txn, commit, pid, epoch)

    def _finish_markers(self, txn: TxnMetadata, commit: bool, pid: int, epoch: int) -> None:
        topics = getattr(self.broker, "topics", None)
        for topic, partition in txn.data_partitions():
            partition_log = topics.get(topic, partition) if topics is not None else None
            if partition_log is None:
                log.warning(
                    "%s: no partition %s-%d for the transaction marker",
                    txn.transactional_id,
                    topic,
                    partition,
                )
                continue
            try:
                partition_log.append_control_marker(pid, epoch, commit, self.coordinator_epoch)
            except Exception:  # Kafka retries markers forever; a test broker logs and moves on
                log.exception("%s: marker for %s-%d failed", txn.transactional_id, topic, partition)
        if commit and txn.pending_offsets:
            groups = getattr(self.broker, "groups", None)
            for group_id, offsets in txn.pending_offsets.items():
                if groups is not None and offsets:
                    groups.commit_offsets(group_id, dict(offsets))
        txn.pending_offsets.clear()
        txn.partitions.clear()
        txn.transition(S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT, self.now_ms())
        self._save(txn)

    def abort_timed_out(self, now_ms: int | None = None) -> list[str]:
        """Fence (E -> E+1) and abort Ongoing transactions past start + timeout; 2PC ones never."""
        now = self.now_ms() if now_ms is None else now_ms
        aborted = []
        with self._lock:
            for transactional_id in list(self._ongoing):
                txn = self._txns.get(transactional_id)
                if txn is None or txn.state is not S.ONGOING or txn.two_phase:
                    continue
                if txn.start_ms + txn.timeout_ms < now:
                    log.info(
                        "%s: aborting transaction of producer %d epoch %d: timed out after %d ms",
                        transactional_id,
                        txn.producer_id,
                        txn.producer_epoch,
                        txn.timeout_ms,
                    )
                    self._fence_and_abort(txn, now)
                    aborted.append(transactional_id)
        return aborted

    def expire_transactional_ids(self, now_ms: int | None = None, *, force: bool = False) -> list[str]:
        """Remove ids idle in Empty/Complete* longer than ``transactional_id_expiration_ms``.

        The scan is O(ids), so it runs at most every half expiration period (capped at an hour,
        Kafka's check interval), not at every abort check.
        """
        now = self.now_ms() if now_ms is None else now_ms
        if not force and now < self._next_expiration_check_ms:
            return []
        expiration = self.expiration_ms
        self._next_expiration_check_ms = now + min(
            3600_000, max(self.abort_check_interval_ms, expiration // 2)
        )
        expired = []
        with self._lock:
            for transactional_id, txn in list(self._txns.items()):
                if txn.state in (S.EMPTY, *COMPLETE_STATES) and txn.last_update_ms + expiration <= now:
                    txn.transition(S.DEAD, now)
                    del self._txns[transactional_id]
                    if self._journal is not None:
                        self._journal.write_dead(transactional_id)
                    expired.append(transactional_id)
        return expired

    def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        topic: str,
        partition: int,
    ) -> Err:
        """WriteTxnMarkers for one partition (KIP-664 abort of a hanging transaction)."""
        topics = getattr(self.broker, "topics", None)
        partition_log = topics.get(topic, partition) if topics is not None else None
        if partition_log is None:
            return Err.UNKNOWN_TOPIC_OR_PARTITION
        try:
            partition_log.append_control_marker(producer_id, producer_epoch, commit, coordinator_epoch)
        except Exception as exc:  # the partition's own refusal (stale epoch...) carries its code
            code = getattr(exc, "errno", None) or getattr(exc, "error_code", None)
            log.info("WriteTxnMarkers %s-%d refused: %s", topic, partition, exc)
            return Err(code) if code in Err._value2member_map_ else Err.UNKNOWN_SERVER_ERROR
        return Err.NONE


# =================================================================== request handlers


def _fenced_compat(err: Err, version: int, first_version_with_fenced: int) -> int:
    """KafkaApis rewrites PRODUCER_FENCED to INVALID_PRODUCER_EPOCH for clients that predate it."""
    if err is Err.PRODUCER_FENCED and version < first_version_with_fenced:
        return int(Err.INVALID_PRODUCER_EPOCH)
    return int(err)


def _authorizer_allows_any(ctx: RequestContext, operation: str, resource_type: str) -> bool:
    authorizer = getattr(ctx.broker, "authorizer", None)
    if authorizer is None:
        return True
    return authorizer.authorize_by_resource_type(ctx.principal, operation, resource_type)


def _topic_exists(ctx: RequestContext, topic: str, partition: int) -> bool:
    topics = getattr(ctx.broker, "topics", None)
    return topics is not None and topics.get(topic, partition) is not None


@handles(InitProducerIdRequest, InitProducerIdResponse, max_version=6)
def handle_init_producer_id(ctx: RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
    version = ctx.api_version
    enable_2pc = version >= 6 and bool(req.enable2_pc)
    keep_prepared = version >= 6 and bool(req.keep_prepared_txn)

    def reply(result: PidEpoch) -> InitProducerIdResponse:
        return InitProducerIdResponse(
            throttle_time_ms=0,
            error_code=_fenced_compat(result.error, version, 4),
            producer_id=result.producer_id,
            producer_epoch=result.producer_epoch,
            ongoing_txn_producer_id=NO_PRODUCER_ID,
            ongoing_txn_producer_epoch=NO_PRODUCER_EPOCH,
        )

    transactional_id = req.transactional_id
    if transactional_id is not None:
        if not ctx.authorized("WRITE", "TRANSACTIONAL_ID", transactional_id) or (
            enable_2pc and not ctx.authorized("TWO_PHASE_COMMIT", "TRANSACTIONAL_ID", transactional_id)
        ):
            return reply(PidEpoch(Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    elif not (
        ctx.authorized("IDEMPOTENT_WRITE", "CLUSTER", CLUSTER_NAME)
        or _authorizer_allows_any(ctx, "WRITE", "TOPIC")
    ):
        return reply(PidEpoch(Err.CLUSTER_AUTHORIZATION_FAILED))
    producer_id, producer_epoch = (req.producer_id, req.producer_epoch) if version >= 3 else (-1, -1)
    if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
        return reply(PidEpoch(Err.INVALID_REQUEST))
    return reply(
        coordinator_for(ctx.broker).init_producer_id(
            transactional_id,
            req.transaction_timeout_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            enable_2pc=enable_2pc,
            keep_prepared_txn=keep_prepared,
        )
    )


@handles(EndTxnRequest, EndTxnResponse, max_version=5)
def handle_end_txn(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    version = ctx.api_version
    if not ctx.authorized("WRITE", "TRANSACTIONAL_ID", req.transactional_id):
        result = PidEpoch(Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    else:
        coordinator = coordinator_for(ctx.broker)
        # Kafka picks the table by the request version alone (TransactionVersion
        # .transactionVersionForEndTxn): v5 takes the TV2 path even where the finalized
        # transaction.version is 1 (ApiVersions only stops advertising v5 there)
        tv2 = version >= 5
        result = coordinator.end_txn(
            req.transactional_id, req.producer_id, req.producer_epoch, bool(req.committed), tv2=tv2
        )
    return EndTxnResponse(
        throttle_time_ms=0,
        error_code=_fenced_compat(result.error, version, 2),
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )


def _partition_results(response_cls: type, by_topic: dict[str, dict[int, int]]) -> list:
    topic_cls = response_cls.AddPartitionsToTxnTopicResult
    partition_cls = topic_cls.AddPartitionsToTxnPartitionResult
    return [
        topic_cls(
            name=topic,
            results_by_partition=[
                partition_cls(partition_index=p, partition_error_code=code) for p, code in parts.items()
            ],
        )
        for topic, parts in by_topic.items()
    ]


def _add_partitions_client(
    ctx: RequestContext, transactional_id: str, pid: int, epoch: int, topics: list
) -> dict[str, dict[int, int]]:
    """The v0-v3 (client) form: KafkaApis' ACL and existence checks, then the coordinator."""
    version = ctx.api_version
    requested = [(t.name, p) for t in topics for p in t.partitions]

    def all_with(code: int) -> dict[str, dict[int, int]]:
        result: dict[str, dict[int, int]] = {}
        for topic, partition in requested:
            result.setdefault(topic, {})[partition] = code
        return result

    if not ctx.authorized("WRITE", "TRANSACTIONAL_ID", transactional_id):
        return all_with(Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    failed: dict[tuple[str, int], int] = {}
    for topic, partition in requested:
        if not ctx.authorized("WRITE", "TOPIC", topic):
            failed[(topic, partition)] = Err.TOPIC_AUTHORIZATION_FAILED
        elif not _topic_exists(ctx, topic, partition):
            failed[(topic, partition)] = Err.UNKNOWN_TOPIC_OR_PARTITION
    if failed:
        result = all_with(Err.OPERATION_NOT_ATTEMPTED)
        for (topic, partition), code in failed.items():
            result[topic][partition] = code
        return result
    err = coordinator_for(ctx.broker).add_partitions(transactional_id, pid, epoch, requested)
    return all_with(_fenced_compat(err, version, 2))


@handles(AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, max_version=5)
def handle_add_partitions_to_txn(ctx: RequestContext, req: AddPartitionsToTxnRequest):
    response = AddPartitionsToTxnResponse
    if ctx.api_version <= 3:
        by_topic = _add_partitions_client(
            ctx,
            req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            req.v3_and_below_topics,
        )
        return response(
            throttle_time_ms=0, results_by_topic_v3_and_below=_partition_results(response, by_topic)
        )
    # v4+: the broker-to-broker batch used by partition leaders (verify, or add under TV2).
    if not ctx.authorized("CLUSTER_ACTION", "CLUSTER", CLUSTER_NAME):
        return response(
            throttle_time_ms=0, error_code=Err.CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[]
        )
    coordinator = coordinator_for(ctx.broker)
    results = []
    for txn in req.transactions:
        by_topic: dict[str, dict[int, int]] = {}
        for topic in txn.topics:
            for partition in topic.partitions:
                err = coordinator.verify_partition(
                    txn.transactional_id,
                    txn.producer_id,
                    txn.producer_epoch,
                    topic.name,
                    partition,
                    implicit_add=not txn.verify_only,
                )
                if txn.verify_only and err is Err.INVALID_TXN_STATE:
                    # handleVerifyPartitionsInTransaction: a partition not in the transaction
                    # (whatever the state) is TRANSACTION_ABORTABLE for the leader to pass on.
                    err = Err.TRANSACTION_ABORTABLE
                by_topic.setdefault(topic.name, {})[partition] = int(err)
        results.append(
            response.AddPartitionsToTxnResult(
                transactional_id=txn.transactional_id, topic_results=_partition_results(response, by_topic)
            )
        )
    return response(throttle_time_ms=0, error_code=0, results_by_transaction=results)


@handles(AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, max_version=4)
def handle_add_offsets_to_txn(ctx: RequestContext, req: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if not ctx.authorized("WRITE", "TRANSACTIONAL_ID", req.transactional_id):
        err = Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.authorized("READ", "GROUP", req.group_id):
        err = Err.GROUP_AUTHORIZATION_FAILED
    else:
        err = coordinator_for(ctx.broker).add_offsets(
            req.transactional_id, req.producer_id, req.producer_epoch, req.group_id
        )
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=_fenced_compat(err, ctx.api_version, 2))


@handles(TxnOffsetCommitRequest, TxnOffsetCommitResponse, max_version=5)
def handle_txn_offset_commit(ctx: RequestContext, req: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    response = TxnOffsetCommitResponse
    topic_cls = response.TxnOffsetCommitResponseTopic
    partition_cls = topic_cls.TxnOffsetCommitResponsePartition
    codes: dict[tuple[str, int], int] = {}
    offsets: dict[tuple[str, int], tuple[int, str | None]] = {}
    if not ctx.authorized("WRITE", "TRANSACTIONAL_ID", req.transactional_id):
        common = Err.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.authorized("READ", "GROUP", req.group_id):
        common = Err.GROUP_AUTHORIZATION_FAILED
    else:
        common = None
    for topic in req.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            if common is not None:
                codes[key] = common
            elif not ctx.authorized("READ", "TOPIC", topic.name):
                codes[key] = Err.TOPIC_AUTHORIZATION_FAILED
            elif not _topic_exists(ctx, *key):
                codes[key] = Err.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[key] = (p.committed_offset, p.committed_metadata)
    if offsets:
        coordinator = coordinator_for(ctx.broker)
        err = coordinator.txn_offset_commit(
            req.transactional_id,
            req.group_id,
            req.producer_id,
            req.producer_epoch,
            offsets,
            implicit_add=ctx.api_version >= 5 and coordinator.transaction_version >= 2,
        )
        codes.update(dict.fromkeys(offsets, int(err)))
    by_topic: dict[str, list] = {}
    for (topic, partition), code in codes.items():
        by_topic.setdefault(topic, []).append(partition_cls(partition_index=partition, error_code=int(code)))
    return response(
        throttle_time_ms=0, topics=[topic_cls(name=t, partitions=parts) for t, parts in by_topic.items()]
    )


def _refuse_producer(txn: TxnMetadata | None, producer_id: int, producer_epoch: int) -> Err | None:
    """The checks Kafka makes first when a producer adds partitions (explicitly or by producing).

    Unknown id or another producer id, then a stale epoch, then a pending transition; ``None``
    when the producer may go on.
    """
    if txn is None or txn.producer_id != producer_id:
        return Err.INVALID_PRODUCER_ID_MAPPING
    if txn.producer_epoch != producer_epoch:
        return Err.PRODUCER_FENCED
    if txn.state in PREPARE_STATES:
        return Err.CONCURRENT_TRANSACTIONS
    return None
