"""One topic-partition's log: batches, producer states, open transactions, aborted index.

Kafka's partition-side transaction rules live here (``ProducerAppendInfo`` / ``UnifiedLog`` in
Kafka): idempotent sequence checks, the first transactional batch of a producer opening a
transaction at its base offset, the last stable offset, and control markers closing
transactions. The log keeps every batch in memory (tests are small) and, with a data
directory, also appends it to one file that is scanned on start to rebuild all of that state.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
import time
from collections import deque
from dataclasses import dataclass, field

from . import codes
from .records import (
    CONTROL_COMMIT,
    BatchHeader,
    CorruptBatchError,
    compression_problem,
    control_batch,
    control_type,
    parse_header,
    split_batches,
    with_base_offset,
)

log = logging.getLogger(__name__)

_RECENT_BATCHES = 5  # Kafka keeps the last five batches per producer for duplicate detection


class ProducerEpochError(Exception):
    """A marker or batch from an older producer epoch than the partition has seen."""

    error_code = codes.INVALID_PRODUCER_EPOCH


@dataclass
class ProducerState:
    """What the partition remembers about a producer (DescribeProducers reports these fields)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int = -1
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_start_offset: int = -1
    # (first sequence, last sequence, base offset) of the last few batches, for duplicates
    recent: deque = field(default_factory=lambda: deque(maxlen=_RECENT_BATCHES), repr=False)

    def duplicate_of(self, header: BatchHeader) -> int | None:
        """The base offset the same batch got when it was first appended, if it is a retry."""
        if header.producer_epoch != self.producer_epoch:
            return None
        for first, last, offset in self.recent:
            if first == header.base_sequence and last == header.last_sequence:
                return offset
        return None

    def bump_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.producer_epoch = epoch
            self.last_sequence = -1
            self.recent.clear()


@dataclass(frozen=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset


@dataclass
class AppendResult:
    error_code: int
    base_offset: int = -1
    error_message: str | None = None


def _in_sequence(last: int, first: int) -> bool:
    return first == (last + 1) % 2**31 or (last == -1 and first == 0)


class PartitionLog:
    """The append-only log of one partition (Kafka's UnifiedLog + ProducerStateManager, minus replication)."""

    def __init__(self, topic: str, partition: int, directory: str | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.log_start_offset = 0
        self.high_watermark = 0
        self._batches: list[bytes] = []
        self._last_offsets: list[int] = []  # last offset of each batch, for bisect
        self._base_offsets: list[int] = []
        self._producers: dict[int, ProducerState] = {}
        self._open_txns: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._aborted: list[AbortedTransaction] = []
        self._waiters: list[asyncio.Future] = []
        self.size_bytes = 0
        self._file = None
        self._path: str | None = None
        if directory is not None:
            os.makedirs(directory, exist_ok=True)
            self._path = os.path.join(directory, "00000000000000000000.log")
            self._load()
            self._file = open(self._path, "ab")  # noqa: SIM115 - kept open for the log's lifetime

    # ------------------------------------------------------------------ state queries

    @property
    def last_stable_offset(self) -> int:
        """First offset of the oldest open transaction, or the high watermark when none is open."""
        if not self._open_txns:
            return self.high_watermark
        return min(min(self._open_txns.values()), self.high_watermark)

    def producer_states(self) -> list[ProducerState]:
        return list(self._producers.values())

    def producer_state(self, producer_id: int) -> ProducerState | None:
        return self._producers.get(producer_id)

    def open_transactions(self) -> dict[int, int]:
        """Producer id -> first offset, for every transaction still open on this partition."""
        return dict(self._open_txns)

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTransaction]:
        """Aborted transactions overlapping offsets [start, end) (what read_committed fetches need)."""
        return [a for a in self._aborted if a.last_offset >= start and a.first_offset < end]

    # ------------------------------------------------------------------ append

    def append_records(self, records: bytes, *, transactional_ok=None) -> AppendResult:
        """Validate and append a produce request's record batches (Kafka's producer-state rules).

        ``transactional_ok(header) -> error code`` lets the caller veto transactional batches
        (the coordinator's verification); it runs before anything is appended.
        """
        try:
            batches = split_batches(records)
        except CorruptBatchError as exc:
            return AppendResult(codes.CORRUPT_MESSAGE, error_message=str(exc))
        if not batches:
            return AppendResult(codes.CORRUPT_MESSAGE, error_message="no record batch in the request")
        for header, data in batches:  # before anything is appended, as Kafka validates a request
            problem = compression_problem(header, data)
            if problem is not None:
                # Kafka 4.4 answers UNKNOWN_SERVER_ERROR, no message
                # (tests/kafka/producers/test_record_batch_compressed.py)
                log.warning("refused a compressed batch: %s", problem)
                return AppendResult(codes.UNKNOWN_SERVER_ERROR)
        first_offset = -1
        for header, data in batches:
            if header.is_control:
                return AppendResult(
                    codes.INVALID_RECORD, error_message="clients may not write control batches"
                )
            if header.is_transactional and transactional_ok is not None:
                code = transactional_ok(header)
                if code:
                    return AppendResult(code)
            result = self._append_data_batch(header, data)
            if result.error_code:
                return result
            if first_offset < 0:
                first_offset = result.base_offset
        self._flush()
        self._wake()
        return AppendResult(codes.NONE, first_offset)

    def _append_data_batch(self, header: BatchHeader, data: memoryview) -> AppendResult:
        pid = header.producer_id
        state = self._producers.get(pid) if header.has_producer_id else None
        if state is not None:
            if header.producer_epoch < state.producer_epoch:
                return AppendResult(
                    codes.INVALID_PRODUCER_EPOCH,
                    error_message=f"producer {pid} epoch {header.producer_epoch} is older "
                    f"than {state.producer_epoch}",
                )
            duplicate = state.duplicate_of(header)
            if duplicate is not None:
                return AppendResult(codes.NONE, duplicate)
            if header.producer_epoch == state.producer_epoch:
                if not _in_sequence(state.last_sequence, header.base_sequence):
                    return AppendResult(
                        codes.OUT_OF_ORDER_SEQUENCE_NUMBER,
                        error_message=f"producer {pid}: sequence {header.base_sequence} after "
                        f"{state.last_sequence}",
                    )
            elif header.base_sequence not in (0, -1):
                return AppendResult(
                    codes.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    error_message=f"producer {pid}: new epoch must start at sequence 0",
                )
            if not header.is_transactional and pid in self._open_txns:
                return AppendResult(
                    codes.INVALID_TXN_STATE,
                    error_message=f"producer {pid} sent non-transactional data during its open transaction",
                )
        base = self.high_watermark
        self._store(with_base_offset(data, base), header, base)
        return AppendResult(codes.NONE, base)

    def append_control_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
    ) -> int:
        """Write a COMMIT/ABORT marker for the producer; returns its offset.

        Ends the producer's open transaction on this partition (an abort adds it to the aborted
        index). A marker with no open transaction is still written but moves no LSO, as in
        Kafka. Raises :class:`ProducerEpochError` for an epoch older than the partition's.
        """
        state = self._producers.get(producer_id)
        if state is not None and producer_epoch < state.producer_epoch:
            raise ProducerEpochError(
                f"marker epoch {producer_epoch} is older than producer {producer_id}'s {state.producer_epoch}"
            )
        base = self.high_watermark
        batch = control_batch(
            base, producer_id, producer_epoch, commit, coordinator_epoch, int(time.time() * 1000)
        )
        self._store(batch, parse_header(batch), base)
        self._flush()
        self._wake()
        return base

    def _store(self, batch: bytes, header: BatchHeader, base: int) -> None:
        """Apply one batch (already validated, offsets assigned) to memory, state and file."""
        last = base + header.last_offset_delta
        self._batches.append(batch)
        self._base_offsets.append(base)
        self._last_offsets.append(last)
        self.high_watermark = last + 1
        self.size_bytes += len(batch)
        self._apply_producer_state(header, batch, base, last)
        if self._file is not None:
            self._file.write(batch)

    def _apply_producer_state(
        self, header: BatchHeader, batch: bytes | memoryview, base: int, last: int
    ) -> None:
        if not header.has_producer_id:
            return
        pid = header.producer_id
        state = self._producers.get(pid)
        if state is None:
            state = self._producers[pid] = ProducerState(pid, header.producer_epoch)
        state.bump_epoch(header.producer_epoch)
        state.last_timestamp = header.max_timestamp
        if header.is_control:
            commit = control_type(batch) == CONTROL_COMMIT
            state.coordinator_epoch = int.from_bytes(bytes(batch[-5:-1]), "big", signed=True)
            start = self._open_txns.pop(pid, None)
            if start is not None and not commit:
                self._aborted.append(AbortedTransaction(pid, start, base))
            state.current_txn_start_offset = -1
            return
        if header.base_sequence >= 0:
            state.last_sequence = header.last_sequence
            state.recent.append((header.base_sequence, header.last_sequence, base))
        if header.is_transactional and pid not in self._open_txns:
            self._open_txns[pid] = base
            state.current_txn_start_offset = base

    # ------------------------------------------------------------------ read

    def read(self, offset: int, max_bytes: int, upper: int) -> list[bytes]:
        """Whole batches from the one holding ``offset`` up to (excluding) ``upper``.

        At least one batch is returned when any is available, even beyond ``max_bytes``
        (KIP-74), so a consumer can never get stuck behind a large batch.
        """
        index = bisect.bisect_left(self._last_offsets, offset)
        out: list[bytes] = []
        total = 0
        batches, bases = self._batches, self._base_offsets
        while index < len(batches) and bases[index] < upper:
            batch = batches[index]
            if out and total + len(batch) > max_bytes:
                break
            out.append(batch)
            total += len(batch)
            index += 1
        return out

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int]:
        """(offset, timestamp) of the first batch whose max timestamp >= ``timestamp``, or (-1, -1)."""
        for base, batch in zip(self._base_offsets, self._batches, strict=True):
            header = parse_header(batch)
            if header.max_timestamp >= timestamp and not header.is_control:
                return base, header.max_timestamp
        return -1, -1

    def max_timestamp(self) -> tuple[int, int]:
        best = (-1, -1)
        for base, batch in zip(self._base_offsets, self._batches, strict=True):
            header = parse_header(batch)
            if header.max_timestamp > best[1]:
                best = (base + header.last_offset_delta, header.max_timestamp)
        return best

    # ------------------------------------------------------------------ long poll

    def waiter(self) -> asyncio.Future:
        """A future resolved at the next append (data or marker) on this partition."""
        future = asyncio.get_running_loop().create_future()
        if len(self._waiters) > 64:  # long polls on an idle partition: drop the finished ones
            self._waiters = [w for w in self._waiters if not w.done()]
        self._waiters.append(future)
        return future

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    # ------------------------------------------------------------------ persistence

    def _flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def _load(self) -> None:
        """Rebuild batches, HW, producer states, open transactions and the aborted index from disk."""
        assert self._path is not None
        if not os.path.exists(self._path):
            return
        with open(self._path, "rb") as fh:
            data = fh.read()
        view = memoryview(data)
        pos = 0
        while pos < len(data):
            try:
                header = parse_header(view, pos)
            except CorruptBatchError:
                log.warning(
                    "%s-%d: truncating a partial batch at byte %d of %s",
                    self.topic,
                    self.partition,
                    pos,
                    self._path,
                )
                break
            batch = bytes(view[pos : pos + header.size])
            last = header.base_offset + header.last_offset_delta
            self._batches.append(batch)
            self._base_offsets.append(header.base_offset)
            self._last_offsets.append(last)
            self.high_watermark = last + 1
            self.size_bytes += len(batch)
            self._apply_producer_state(header, batch, header.base_offset, last)
            pos += header.size
        if pos < len(data):
            with open(self._path, "r+b") as fh:
                fh.truncate(pos)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
