"""An Arrow-native transactional producer: Arrow columns in, a prepared Kafka transaction out.

Why it exists: librdkafka cannot set KIP-939's ``Enable2Pc`` (no Python client can), and a
Python loop calling ``produce()`` per record caps a Spark task's throughput. This producer
speaks the transaction protocol itself through the wire layer (``kafka/protocol/wire.py``) and encodes
whole Arrow columns into RecordBatch v2 bytes (``kafka/producers/record_batch.py``), so it can open a
two-phase-commit transaction that never times out, and spends no Python call per record.

Protocol, as Kafka's Java producer does it:

1. InitProducerId through :meth:`TransactionAdmin.fence` (FindCoordinator, CONCURRENT_TRANSACTIONS
   retried; v6 with ``Enable2Pc`` when ``two_phase``): fences every earlier attempt of the id.
2. Metadata: the topic's partition count and each partition's leader.
3. Under TV1, AddPartitionsToTxn (v<=3) for each partition before its first batch; under TV2
   Produce v12 adds the partition implicitly (KIP-890).
4. Produce (acks=all) to each leader, one batch per partition in flight, idempotent sequences
   from 0 per partition. Retriable answers (leader moved, NOT_ENOUGH_REPLICAS, timeouts, a
   broker restarting) are re-sent with the *same* batch and sequence until
   ``delivery_timeout_ms``; DUPLICATE_SEQUENCE_NUMBER means an earlier send landed. A batch
   refused as too large (MESSAGE_TOO_LARGE / RECORD_LIST_TOO_LARGE) is split and its parts sent
   in order with the same sequence numbers (as Java's producer splits it); later batches are cut
   to what was learned. One record the broker refuses alone is a UsageError naming its key.
5. :meth:`prepare` verifies on the coordinator (``producer.verified_committable``) and returns
   the same :class:`Committable` as the librdkafka path, ``two_phase=True`` under 2PC.

Memory is bounded: rows are buffered up to ``buffer_bytes`` (Arrow slices, no copy), then
encoded and sent wave by wave (one batch of at most ``batch_bytes`` per partition).
The connection's producer keys (compression, batch and buffer sizes, linger, request size,
timeouts, retries) reach it as :class:`ArrowProducerSettings` (``kafka/producers/producer_config.py``,
which refuses by name what this producer cannot honour).
The transaction is never ended here: the commit task commits it (commit-by-resume).
No Airflow imports: this runs inside Spark executors.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
import time
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from kafka.protocol.admin import DescribeConfigsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest

from airflow_provider_kafka_eos.kafka.errors import (
    AuthorizationError,
    BrokerUnreachableError,
    DataLossError,
    KafkaEosError,
    ProducerFencedError,
    UsageError,
)
from airflow_provider_kafka_eos.kafka.producers.compression import codec_for
from airflow_provider_kafka_eos.kafka.producers.librdkafka import TransactionProtocol, verified_committable
from airflow_provider_kafka_eos.kafka.producers.partitioner import (
    StickyNullKeyPartitioner,
    partitions_for_keys,
)
from airflow_provider_kafka_eos.kafka.producers.producer_config import ArrowProducerSettings
from airflow_provider_kafka_eos.kafka.producers.record_batch import (
    BATCH_OVERHEAD,
    EncodedBatch,
    encode_batch,
    record_sizes,
)
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable
from airflow_provider_kafka_eos.kafka.protocol.error_codes import (
    CONCURRENT_TRANSACTIONS,
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    DUPLICATE_SEQUENCE_NUMBER,
    FENCED_LEADER_EPOCH,
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    KAFKA_STORAGE_ERROR,
    LEADER_NOT_AVAILABLE,
    NETWORK_EXCEPTION,
    NONE,
    NOT_COORDINATOR,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
    OPERATION_NOT_ATTEMPTED,
    PRODUCER_FENCED,
    REQUEST_TIMED_OUT,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    UNKNOWN_LEADER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
    error_name,
)

__all__ = ["ArrowPartitionTransaction", "ProducerStats"]

log = logging.getLogger(__name__)

# Kafka's RetriableException subclasses a producer meets on Produce / AddPartitionsToTxn.
RETRIABLE = frozenset({
    UNKNOWN_TOPIC_OR_PARTITION,  # metadata not propagated yet
    LEADER_NOT_AVAILABLE,
    NOT_LEADER_OR_FOLLOWER,
    REQUEST_TIMED_OUT,
    NETWORK_EXCEPTION,
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    CONCURRENT_TRANSACTIONS,
    KAFKA_STORAGE_ERROR,
    FENCED_LEADER_EPOCH,
    UNKNOWN_LEADER_EPOCH,
})
_REFRESH_METADATA = frozenset({
    UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, NETWORK_EXCEPTION,
    KAFKA_STORAGE_ERROR, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
})
_FENCED = frozenset({INVALID_PRODUCER_EPOCH, PRODUCER_FENCED})
_AUTH = frozenset({TOPIC_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
# AddPartitionsToTxn: a partition Kafka skipped because another in the same request failed is
# sent again with the failed ones, as Java's producer does. (This used to name 52,
# TRANSACTION_COORDINATOR_FENCED, a WriteTxnMarkers answer between brokers: now an error.)
_ADD_PARTITIONS_RESENT = OPERATION_NOT_ATTEMPTED
_PRODUCE_MAX_VERSION = 12  # v13 addresses topics by id; v12 is what TV2's implicit add needs
_TOO_LARGE = frozenset({10, 18})  # MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE
_BASE_TIMESTAMP = struct.Struct(">q")  # a RecordBatch v2's baseTimestamp, at byte 27
# A Produce request's bytes besides its batches: header, client id, transactional id, topic name,
# per-partition framing. Generous, so that a request of batches below the limit stays below it.
_REQUEST_OVERHEAD = 1024


@dataclass
class ProducerStats:
    """What the producer did (benchmarks and tests read it)."""

    records: int = 0
    batches: int = 0
    bytes: int = 0
    produce_requests: int = 0
    retries: int = 0
    peak_buffered_bytes: int = 0
    largest_request_bytes: int = 0  # record batches of the largest Produce request (plus its framing)
    refused_too_large: int = 0  # batches the broker refused as too large (each then split and re-sent)


@dataclass(frozen=True)
class _Rows:
    """One buffer's rows, sorted by partition, that its record batches are cut from: kept until
    the buffer's last wave is acknowledged, so that a batch the broker refuses as too large can be
    encoded again in smaller parts (no copy: the batches are slices of these columns)."""

    keys: Any
    values: Any
    headers: Any
    stamps: np.ndarray | None
    sizes: np.ndarray  # record_sizes of each row (the unit of batch_bytes)


@dataclass(frozen=True)
class _Batch:
    """One encoded record batch and the rows it holds (``rows[start:end]``)."""

    encoded: EncodedBatch
    rows: _Rows
    start: int
    end: int

    @property
    def estimated_bytes(self) -> int:
        return int(self.rows.sizes[self.start:self.end].sum())


class ArrowPartitionTransaction:
    """One Spark partition's transaction on the Arrow path; the same life cycle as
    :class:`~airflow_provider_kafka_eos.kafka.producers.librdkafka.PartitionTransaction`:
    ``begin()``, ``write_columns(...)`` any number of times, ``prepare()`` -> Committable | None.

    ``admin`` is a ``TransactionAdmin`` owned by the caller (its wire carries every request).
    """

    def __init__(
        self,
        *,
        admin: Any,
        transactional_id: str,
        topic: str,
        transaction_timeout_ms: int,
        protocol: TransactionProtocol,
        two_phase: bool = False,
        settings: ArrowProducerSettings | None = None,
        batch_bytes: int | None = None,
        buffer_bytes: int | None = None,
        delivery_timeout_ms: int | None = None,
        request_timeout_ms: int | None = None,
        sticky: StickyNullKeyPartitioner | None = None,
    ) -> None:
        """``settings``: the connection's producer keys (``arrow_producer_settings``); the keyword
        arguments after it override single fields (tests and benchmarks)."""
        overrides = {name: value for name, value in (
            ("batch_bytes", batch_bytes), ("buffer_bytes", buffer_bytes),
            ("delivery_timeout_ms", delivery_timeout_ms), ("request_timeout_ms", request_timeout_ms),
        ) if value is not None}
        self.settings = dataclasses.replace(settings or ArrowProducerSettings(), **overrides)
        self.admin = admin
        self.wire = admin.wire
        self.transactional_id = transactional_id
        self.topic = topic
        self.transaction_timeout_ms = int(transaction_timeout_ms)
        self.protocol = protocol
        self.two_phase = two_phase
        self.batch_bytes = self.settings.batch_bytes
        self.buffer_bytes = self.settings.buffer_bytes
        self.delivery_timeout_ms = self.settings.delivery_timeout_ms
        self.request_timeout_ms = self.settings.request_timeout_ms
        # The largest record that can be sent (None: no known limit) and which setting sets it.
        self._record_limit: tuple[int, str] | None = None
        limit = self.settings.max_request_bytes
        if limit is not None:
            # One batch must fit one request; a record that cannot fit is refused by name.
            self._fit(limit - _REQUEST_OVERHEAD - BATCH_OVERHEAD,
                      f"the producer's request limit message.max.bytes (max.request.size) = {limit} bytes")
        self._sticky = sticky if sticky is not None else StickyNullKeyPartitioner(self.batch_bytes)
        self._own_sticky = sticky is None
        if self.settings.codec.compresses:  # the executor may lack the codec package the driver has
            codec_for(self.settings.codec.name, self.settings.codec.level,
                      where=f"connection (producer path 'arrow', task of {transactional_id})")
        self.producer_id = -1
        self.producer_epoch = -1
        self.stats = ProducerStats()
        self._leaders: dict[int, int] = {}
        self._num_partitions = 0
        self._next_sequence: dict[int, int] = defaultdict(int)  # acknowledged
        self._encoded_sequence: dict[int, int] = defaultdict(int)  # assigned to encoded batches
        self._executor: ThreadPoolExecutor | None = None
        self._added: set[int] = set()
        self._written: set[int] = set()
        self._first_offsets: dict[int, int] = {}  # partition -> base offset of its first acknowledged batch
        # (keys, values, headers, timestamps in ms or None, partition of each row)
        self._pending: list[tuple[pa.Array, pa.Array, pa.Array | None, np.ndarray | None, np.ndarray]] = []
        self._pending_bytes = 0
        self._pending_records = 0
        self._pending_since = 0.0
        self._produced = 0
        self._released = False
        self._learned_logged = False  # the INFO line on a batch size learned from the broker
        self._topic_limit: int | None = None  # the topic's max.message.bytes, when DescribeConfigs read it

    # -- the transaction ---------------------------------------------------------------------

    def begin(self) -> None:
        """InitProducerId (fences earlier attempts; Enable2Pc under 2PC) and read the topic's leaders."""
        result = self.admin.fence(
            self.transactional_id, self.transaction_timeout_ms, enable_2pc=self.two_phase
        )
        self.producer_id, self.producer_epoch = result.producer_id, result.producer_epoch
        log.info("%s: transaction open under producer id %d, epoch %d%s", self.transactional_id,
                 self.producer_id, self.producer_epoch, " (two-phase commit)" if self.two_phase else "")
        self._refresh_metadata()
        self._fit_topic_limit()

    def _fit(self, largest_records: int, what: str) -> None:
        """Cut batches to ``largest_records`` bytes of records when that is below ``batch_bytes``."""
        if self._record_limit is None or largest_records < self._record_limit[0]:
            self._record_limit = (largest_records, what)
        if largest_records < self.batch_bytes:
            self.batch_bytes = max(1, largest_records)
            if getattr(self, "_own_sticky", False):
                self._sticky.batch_bytes = self.batch_bytes

    def _fit_topic_limit(self) -> None:
        """Batches cut to fit the topic's ``max.message.bytes``, as far as DescribeConfigs may read
        it (a principal without DESCRIBE_CONFIGS on the topic keeps ``batch.size``; a batch the
        broker still refuses as too large is then split by :meth:`_split_refused`)."""
        resource = DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=2, resource_name=self.topic, configuration_keys=["max.message.bytes"]  # 2: TOPIC
        )
        try:
            response = self.wire.send(DescribeConfigsRequest(resources=[resource], include_synonyms=False))
        except Exception as exc:  # best effort: without it, a batch refused as too large is split
            log.info("%s: the topic's max.message.bytes could not be read (%s); batches follow batch.size",
                     self.transactional_id, getattr(exc, "cause", type(exc).__name__))
            return
        for result in response.results:
            if result.error_code:
                log.info("%s: the topic's max.message.bytes could not be read (%s); batches follow "
                         "batch.size", self.transactional_id, error_name(result.error_code))
            for entry in result.configs if not result.error_code else []:
                if entry.name == "max.message.bytes" and str(entry.value or "").isdigit():
                    limit = int(entry.value)
                    self._topic_limit = limit
                    # the broker counts a batch with its 12-byte log overhead (offset + length)
                    self._fit(limit - 12 - BATCH_OVERHEAD,
                              f"topic {self.topic}'s max.message.bytes = {limit} bytes")

    def identity(self) -> tuple[int, int]:
        return self.producer_id, self.producer_epoch

    def write_columns(
        self,
        keys: pa.Array | pa.ChunkedArray | None,
        values: pa.Array | pa.ChunkedArray,
        headers: pa.Array | pa.ChunkedArray | None = None,
        partitions: pa.Array | pa.ChunkedArray | None = None,
        timestamps: pa.Array | pa.ChunkedArray | None = None,
    ) -> int:
        """Buffer one batch of rows (Arrow columns); send when the buffer is full. Returns the row count.

        ``timestamps``: each record's CreateTime (epoch milliseconds, or an Arrow timestamp column);
        a null, or no column, is the time the rows are encoded (as Java stamps a record without one).
        """
        self._check_open()
        n = len(values)
        if n == 0:
            return 0
        keys, values, headers, partitions = (_combine(c) for c in (keys, values, headers, partitions))
        sizes = record_sizes(keys, values)
        self._check_record_sizes(keys, sizes)
        targets = self._partitions_for(keys, partitions, sizes)
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.append((keys, values, headers, _millis(timestamps), targets))
        self._pending_bytes += int(sizes.sum())
        self._pending_records += n
        self.stats.peak_buffered_bytes = max(self.stats.peak_buffered_bytes, self._pending_bytes)
        self._produced += n
        if self._buffer_full():
            self._send_pending()
        return n

    def _buffer_full(self) -> bool:
        """Send now? The buffer's bytes or records reached their bound, or its oldest rows waited
        ``linger.ms`` (checked as rows arrive; :meth:`flush` sends the rest)."""
        s = self.settings
        if self._pending_bytes >= self.buffer_bytes:
            return True
        if s.buffer_records is not None and self._pending_records >= s.buffer_records:
            return True
        return s.linger_ms is not None and (time.monotonic() - self._pending_since) * 1000 >= s.linger_ms

    def _check_record_sizes(self, keys: Any, sizes: np.ndarray) -> None:
        """A record larger than one Produce request may be (``message.max.bytes``) or than the topic
        takes (``max.message.bytes``) can never be sent: refuse it by its key before it is buffered."""
        if self._record_limit is None:
            return
        largest, what = self._record_limit
        too_large = np.flatnonzero(sizes > largest)
        if too_large.size:
            row = int(too_large[0])
            key = keys[row].as_py() if keys is not None else None
            shown = repr(key) if len(repr(key)) <= 100 else f"{repr(key)[:97]}..."
            raise UsageError(
                f"record with key {shown} is about {int(sizes[row])} bytes, larger than {what} allows "
                f"(for topic {self.topic}); raise that limit (message.max.bytes in the connection, the "
                "topic's max.message.bytes on the broker) or make the record smaller",
                transactional_id=self.transactional_id, runbook="configuration",
            )

    def flush(self) -> None:
        """Send everything buffered and wait for every acknowledgement."""
        self._check_open()
        self._send_pending()

    def prepare(self) -> Committable | None:
        """Flush, verify on the coordinator; ``None`` for an empty partition (nothing to commit)."""
        try:
            self.flush()
            if self._produced == 0:
                return None
            return verified_committable(
                describe=self.admin.describe,
                transactional_id=self.transactional_id,
                topic=self.topic,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                written_partitions=self._written,
                record_count=self._produced,
                protocol=self.protocol,
                two_phase=self.two_phase,
                first_offsets=self._first_offsets,
            )
        finally:
            self.release()

    def release(self) -> None:
        """Forget buffered rows. Nothing is closed or aborted: the transaction stays open for the commit."""
        self._pending.clear()
        self._pending_bytes = 0
        self._released = True
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    # -- partitioning ------------------------------------------------------------------------

    def _partitions_for(self, keys: Any, partitions: Any, sizes: np.ndarray) -> np.ndarray:
        """Explicit partition column first; else Java's murmur2 of the key; null keys as Java's
        uniform sticky partitioner places them (one partition per batch, random start per task)."""
        n = len(sizes)
        if partitions is not None:
            target = np.asarray(partitions.cast(pa.int32()).fill_null(-1).to_numpy(zero_copy_only=False))
        elif keys is not None:
            target = partitions_for_keys(keys, self._num_partitions)
        else:
            target = np.full(n, -1, dtype=np.int32)
        if (target < 0).any():
            if keys is not None and partitions is not None:
                missing = target < 0
                by_key = partitions_for_keys(keys, self._num_partitions)
                target = np.where(missing & (by_key >= 0), by_key, target)
            missing = target < 0
            target = target.astype(np.int32, copy=True)
            target[missing] = self._sticky.assign(sizes[missing], self._num_partitions)
        bad = target >= self._num_partitions
        if bad.any():
            raise UsageError(
                f"row partition {int(target[bad][0])} does not exist: topic {self.topic} has "
                f"{self._num_partitions} partition(s); fix the partition column",
                transactional_id=self.transactional_id,
            )
        return target.astype(np.int32, copy=False)

    # -- sending -----------------------------------------------------------------------------

    def _send_pending(self) -> None:
        if not self._pending:
            return
        pending, self._pending, self._pending_bytes, self._pending_records = self._pending, [], 0, 0
        keys = _concat([p[0] for p in pending])
        values = _concat([p[1] for p in pending])
        headers = _concat([p[2] for p in pending])
        stamps = _stamps([(p[3], len(p[1])) for p in pending])
        targets = np.concatenate([p[4] for p in pending])
        order = np.argsort(targets, kind="stable")
        sorted_targets = targets[order]
        take = pa.array(order)
        keys = keys.take(take) if keys is not None else None
        values = values.take(take)
        headers = headers.take(take) if headers is not None else None
        stamps = stamps[order] if stamps is not None else None
        sizes = record_sizes(keys, values)
        bounds = np.flatnonzero(np.diff(sorted_targets)) + 1
        starts = np.concatenate([[0], bounds])
        ends = np.concatenate([bounds, [len(sorted_targets)]])
        queues: dict[int, list[tuple[int, int]]] = {}
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):  # one step per partition
            queues[int(sorted_targets[start])] = _chunks(sizes[start:end], start, self.batch_bytes,
                                                         self.settings.batch_records)
        rows = _Rows(keys, values, headers, stamps, sizes)
        # One wave in flight while the next is encoded (the IO runs on the wire's network thread
        # and in the sender thread; numpy/Arrow/crc32c release the GIL for the large steps).
        in_flight: Future[None] | None = None
        try:
            in_flight = self._encode_and_send(queues, rows)
        finally:
            if in_flight is not None:
                in_flight.result()

    def _encode_and_send(self, queues: dict[int, list[tuple[int, int]]], rows: _Rows) -> Future[None] | None:
        in_flight: Future[None] | None = None
        while queues:
            wave: dict[int, _Batch] = {}
            for partition in list(queues):
                start, end = queues[partition].pop(0)
                if end - start > 1 and int(rows.sizes[start:end].sum()) > self.batch_bytes:
                    # batch_bytes was lowered (a batch refused as too large): cut to it from the start
                    runs = _chunks(rows.sizes[start:end], start, self.batch_bytes)
                    start, end = runs[0]
                    queues[partition][:0] = runs[1:]
                if not queues[partition]:
                    del queues[partition]
                wave[partition] = self._encode(rows, start, end, self._encoded_sequence[partition])
                self._encoded_sequence[partition] += wave[partition].encoded.record_count
            if in_flight is not None:
                in_flight.result()  # waves go out in order: at most one in flight per partition
            in_flight = self._sender().submit(self._send_wave, wave)
        return in_flight

    def _encode(
        self, rows: _Rows, start: int, end: int, base_sequence: int, now_ms: int | None = None
    ) -> _Batch:
        """``rows[start:end]`` as one record batch whose first record has ``base_sequence``; rows
        without timestamps are stamped ``now_ms`` (default: now)."""
        n = end - start
        encoded = encode_batch(
            rows.keys.slice(start, n) if rows.keys is not None else None,
            rows.values.slice(start, n),
            headers=rows.headers.slice(start, n) if rows.headers is not None else None,
            timestamps_ms=rows.stamps[start:end] if rows.stamps is not None else None,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=base_sequence,
            codec=self.settings.codec,
            now_ms=now_ms,
        )
        return _Batch(encoded, rows, start, end)

    def _split(self, batch: _Batch, budget: int) -> list[_Batch]:
        """``batch``'s rows encoded again as runs of at most ``budget`` bytes, in order, with the
        same sequence numbers: the first run starts at the batch's base sequence, the next continue
        (the records are unchanged, so batches encoded after it stay in sequence), and the same
        CreateTime where the rows had none (the batch's base timestamp)."""
        stamped = _BASE_TIMESTAMP.unpack_from(batch.encoded.data, 27)[0]  # after baseOffset..lastOffsetDelta
        sizes = batch.rows.sizes[batch.start:batch.end]
        runs = split_runs(sizes, batch.start, batch.encoded.base_sequence, budget)
        return [self._encode(batch.rows, start, end, sequence, stamped) for start, end, sequence in runs]

    def _split_refused(self, partition: int, batch: _Batch, code: int, message: str | None) -> list[_Batch]:
        """The broker refused ``batch`` as too large (the topic's ``max.message.bytes``, unread or
        lower at the broker): lower ``batch_bytes`` below it for every later batch, and return its
        parts (halves or smaller) to send in its place. One record refused alone is a UsageError."""
        self.stats.refused_too_large += 1
        if batch.encoded.record_count == 1:
            raise self._record_too_large(partition, batch, code, message)
        refused = batch.estimated_bytes
        learned = max(1, min(self.batch_bytes, refused // 2))
        if learned < self.batch_bytes:
            self.batch_bytes = learned  # read by the encoding thread for the batches it cuts next
            level = logging.DEBUG if self._learned_logged else logging.INFO
            self._learned_logged = True
            log.log(level, "%s: %s-%d refused a record batch of %d bytes (%d records) as too large (%s): "
                    "split and re-sent; batches cut to %d bytes of records from now on",
                    self.transactional_id, self.topic, partition, len(batch.encoded.data),
                    batch.encoded.record_count, error_name(code), self.batch_bytes)
        return self._split(batch, self.batch_bytes)

    def _record_too_large(self, partition: int, batch: _Batch, code: int, message: str | None) -> UsageError:
        keys = batch.rows.keys
        key = keys[batch.start].as_py() if keys is not None else None
        shown = repr(key) if len(repr(key)) <= 100 else f"{repr(key)[:97]}..."
        detail = f" ({message})" if message else ""
        limit = (f"the topic's max.message.bytes reads {self._topic_limit} bytes, the broker applies less"
                 if self._topic_limit is not None else
                 "the topic's max.message.bytes, which this producer could not read (DescribeConfigs)")
        return UsageError(
            f"record with key {shown} was refused by {self.topic}-{partition} with "
            f"{error_name(code)}{detail}: alone in a record batch it is {len(batch.encoded.data)} bytes, "
            f"larger than the broker accepts ({limit}); nothing more was sent for it. Raise the topic's "
            "max.message.bytes (and the broker's message.max.bytes) or make the record smaller",
            transactional_id=self.transactional_id, runbook="configuration",
        )

    def _sender(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafka-eos-arrow-send")
        return self._executor

    def _send_wave(self, wave: dict[int, _Batch]) -> None:
        """One batch per partition, one Produce request per leader, retried until acknowledged.

        A batch refused as too large is replaced by its parts (:meth:`_split_refused`), sent one
        after the other in later rounds: still one batch per partition in flight."""
        deadline = time.monotonic() + self.delivery_timeout_ms / 1000
        backoff = 0.02
        todo: dict[int, _Batch] = {}
        after: dict[int, list[_Batch]] = {}  # a partition's parts waiting for the one in todo
        for partition, batch in wave.items():
            self._next_part(partition, [batch], todo, after)
        last: dict[int, str] = {}
        resends = 0
        while todo:
            if self.protocol.transaction_version < 2:
                self._add_partitions(sorted(set(todo) - self._added), deadline)
            by_leader: dict[int, list[int]] = defaultdict(list)
            for partition in todo:
                by_leader[self._leaders.get(partition, -1)].append(partition)
            requests, groups = [], []
            for leader, parts in by_leader.items():
                for share in self._request_shares(parts, todo):
                    request = self._produce_request({p: todo[p].encoded for p in share})
                    size = _REQUEST_OVERHEAD + sum(len(todo[p].encoded.data) + 16 for p in share)
                    self.stats.largest_request_bytes = max(self.stats.largest_request_bytes, size)
                    requests.append((request, leader if leader >= 0 else None))
                    groups.append(share)
            self.stats.produce_requests += len(requests)
            refresh = retry = False
            for parts, response in zip(groups, self.wire.send_all(requests, raise_errors=False), strict=True):
                if isinstance(response, BrokerUnreachableError):
                    refresh = retry = True
                    last.update({p: str(response.cause) for p in parts})
                    continue
                for topic in response.responses:
                    for row in topic.partition_responses:
                        partition, code = row.index, row.error_code
                        if partition not in todo:
                            continue
                        message = getattr(row, "error_message", None)
                        if code in (NONE, DUPLICATE_SEQUENCE_NUMBER):
                            self._acknowledged(partition, todo.pop(partition).encoded,
                                               getattr(row, "base_offset", -1) if code == NONE else -1)
                            self._next_part(partition, after.pop(partition, []), todo, after)
                        elif code in _TOO_LARGE:  # never appended: its parts take its sequences
                            parts_of = self._split_refused(partition, todo.pop(partition), code, message)
                            self._next_part(partition, parts_of + after.pop(partition, []), todo, after)
                        elif code in RETRIABLE:
                            refresh |= code in _REFRESH_METADATA
                            retry = True
                            last[partition] = error_name(code)
                        else:
                            raise self._produce_error(partition, code, message)
            if not todo:
                return
            if time.monotonic() + (backoff if retry else 0) > deadline:
                partition = min(todo)
                raise BrokerUnreachableError(
                    f"{len(todo)} batch(es) were not acknowledged within delivery timeout "
                    f"{self.delivery_timeout_ms} ms (partition {self.topic}-{partition}: last answer "
                    f"{last.get(partition, 'none')})",
                    transactional_id=self.transactional_id,
                )
            if not retry:
                continue  # only the next parts of split batches: send them at once
            self.stats.retries += 1
            resends += 1
            if self.settings.retries is not None and resends > self.settings.retries:
                partition = min(todo)
                raise BrokerUnreachableError(
                    f"{len(todo)} batch(es) were not acknowledged after {self.settings.retries} resend(s) "
                    f"(the connection's retries; partition {self.topic}-{partition}: last answer "
                    f"{last.get(partition, 'none')})",
                    transactional_id=self.transactional_id,
                )
            time.sleep(backoff)  # a backoff between protocol retries, bounded by the delivery deadline
            backoff = min(backoff * 2, 0.5)
            if refresh:
                self._refresh_metadata(required=False)

    def _next_part(self, partition: int, queue: list[_Batch], todo: dict[int, _Batch],
                   after: dict[int, list[_Batch]]) -> None:
        """Put a partition's next batch in ``todo`` (the rest in ``after``); a batch cut before
        ``batch_bytes`` was lowered is split to it before it is sent."""
        if not queue:
            return
        first = queue[0]
        if first.encoded.record_count > 1 and first.estimated_bytes > self.batch_bytes:
            queue = self._split(first, self.batch_bytes) + queue[1:]
        todo[partition] = queue[0]
        if len(queue) > 1:
            after[partition] = queue[1:]

    def _request_shares(self, parts: list[int], todo: dict[int, _Batch]) -> list[list[int]]:
        """One leader's partitions split so that no request exceeds ``message.max.bytes``
        (every batch alone fits: ``batch_bytes`` was cut to the limit)."""
        limit = self.settings.max_request_bytes
        if limit is None:
            return [parts]
        shares: list[list[int]] = [[]]
        used = _REQUEST_OVERHEAD
        for partition in sorted(parts):
            size = len(todo[partition].encoded.data) + 16  # + partition index and records length framing
            if shares[-1] and used + size > limit:
                shares.append([])
                used = _REQUEST_OVERHEAD
            shares[-1].append(partition)
            used += size
        return shares

    def _acknowledged(self, partition: int, batch: EncodedBatch, base_offset: int) -> None:
        self._next_sequence[partition] = batch.last_sequence + 1
        if partition not in self._written and base_offset >= 0:
            self._first_offsets[partition] = base_offset  # where the transaction begins on it
        self._written.add(partition)
        self.stats.records += batch.record_count
        self.stats.batches += 1
        self.stats.bytes += len(batch.data)

    def _produce_request(self, batches: dict[int, EncodedBatch]) -> Any:
        topic_data = ProduceRequest.TopicProduceData
        partition_data = topic_data.PartitionProduceData
        version = min(self.wire.api_version(ProduceRequest) or 3, _PRODUCE_MAX_VERSION)
        if self.protocol.transaction_version >= 2 and version < 12:
            raise KafkaEosError(
                f"the cluster finalized transaction.version 2 but offers Produce v{version} only",
                transactional_id=self.transactional_id,
                runbook="capabilities",
            )
        return ProduceRequest(
            transactional_id=self.transactional_id,
            acks=-1,
            timeout_ms=self.request_timeout_ms,
            topic_data=[
                topic_data(
                    name=self.topic,
                    partition_data=[
                        partition_data(index=p, records=b.data) for p, b in sorted(batches.items())
                    ],
                )
            ],
            version=version,
        )

    def _add_partitions(self, partitions: list[int], deadline: float) -> None:
        """TV1: AddPartitionsToTxn before a partition's first batch (v<=3: the client's versions)."""
        backoff = 0.02
        while partitions:
            version = min(self.wire.api_version(AddPartitionsToTxnRequest) or 0, 3)
            topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
            request = AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=self.producer_id,
                v3_and_below_producer_epoch=self.producer_epoch,
                v3_and_below_topics=[topic(name=self.topic, partitions=partitions)],
                version=version,
            )
            node = self.wire.coordinators([self.transactional_id]).get(self.transactional_id)
            response = self.wire.send_all([(request, node if isinstance(node, int) else None)],
                                          raise_errors=False)[0]
            again: list[int] = []
            last = "no answer"
            if isinstance(response, BrokerUnreachableError):
                again, last = partitions, str(response.cause)
            else:
                for result in response.results_by_topic_v3_and_below:
                    for row in result.results_by_partition:
                        code = row.partition_error_code
                        if code == NONE:
                            self._added.add(row.partition_index)
                        elif code in RETRIABLE or code == _ADD_PARTITIONS_RESENT:
                            if code == NOT_COORDINATOR:
                                self.wire.forget_coordinator(self.transactional_id)
                            again.append(row.partition_index)
                            last = error_name(code)
                        else:
                            raise self._produce_error(
                                row.partition_index, code, None, api="AddPartitionsToTxn"
                            )
            partitions = again
            if partitions:
                if time.monotonic() + backoff > deadline:
                    raise BrokerUnreachableError(
                        f"AddPartitionsToTxn did not succeed within {self.delivery_timeout_ms} ms "
                        f"(last answer {last})",
                        transactional_id=self.transactional_id,
                    )
                time.sleep(backoff)  # protocol retry backoff, bounded by the deadline
                backoff = min(backoff * 2, 0.5)

    def _refresh_metadata(self, required: bool = True) -> None:
        """Partition count and leaders of the topic (Metadata, allowing auto-creation as the Java
        producer does); an unknown or leaderless topic is asked again until the delivery deadline."""
        deadline = time.monotonic() + self.delivery_timeout_ms / 1000
        backoff = 0.05
        while True:
            request = MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=self.topic)],
                allow_auto_topic_creation=self.settings.allow_auto_create_topics,
                max_version=12,
            )
            try:
                response = self.wire.send(request)
            except BrokerUnreachableError:
                if not required:
                    return  # keep the old leaders; the produce retry loop decides
                raise
            code, parts = -1, []
            for topic in response.topics:
                if topic.name == self.topic:
                    code, parts = topic.error_code, topic.partitions
            if code == NONE and parts and all(p.leader_id >= 0 for p in parts):
                self._num_partitions = len(parts)
                self._leaders = {p.partition_index: p.leader_id for p in parts}
                return
            if code in _AUTH:
                raise AuthorizationError(
                    f"Metadata for topic {self.topic} was refused ({error_name(code)}): WRITE and DESCRIBE "
                    "on the topic are needed",
                    transactional_id=self.transactional_id,
                )
            if not required:
                return
            still_coming = (NONE, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE)
            if code not in still_coming or time.monotonic() + backoff > deadline:
                answer = error_name(code) if code >= 0 else "not in the answer"
                raise KafkaEosError(
                    f"topic {self.topic} has no usable metadata ({answer}) after "
                    f"{self.delivery_timeout_ms} ms: does it exist (auto-creation off?)",
                    transactional_id=self.transactional_id,
                    runbook="troubleshooting",
                )
            time.sleep(backoff)  # topic being created / leader being elected; bounded by the deadline
            backoff = min(backoff * 2, 0.5)

    def _produce_error(
        self, partition: int, code: int, message: str | None, api: str = "Produce"
    ) -> KafkaEosError:
        where = f"{api} to {self.topic}-{partition} was refused with {error_name(code)}"
        detail = f" ({message})" if message else ""
        tid = self.transactional_id
        if code in _FENCED:
            return ProducerFencedError(
                f"{where}{detail}: a newer attempt owns this transactional id",
                transactional_id=tid, runbook="speculative-execution",
            )
        if code in _AUTH:
            return AuthorizationError(f"{where}: WRITE on the topic and the TransactionalId is needed",
                                      transactional_id=tid)
        if code == INVALID_TXN_STATE:
            return DataLossError(
                f"{where}: the transaction is no longer open (aborted by the coordinator?); the "
                "task fails so that its retry writes the partition again",
                transactional_id=tid,
            )
        return KafkaEosError(f"{where}{detail}", transactional_id=tid, runbook="troubleshooting")

    def _check_open(self) -> None:
        if self._released:
            raise KafkaEosError("the producer was already released", transactional_id=self.transactional_id,
                                runbook="troubleshooting")
        if self.producer_id < 0:
            raise KafkaEosError("begin() was not called", transactional_id=self.transactional_id,
                                runbook="troubleshooting")


def _combine(column: Any) -> Any:
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks()
    return column


def _concat(columns: list[Any]) -> Any:
    if columns[0] is None:
        return None
    return columns[0] if len(columns) == 1 else pa.concat_arrays([c.cast(columns[0].type) for c in columns])


def _millis(column: Any) -> np.ndarray | None:
    """A timestamp column as epoch milliseconds (int64; -1 marks a null: stamped when encoded)."""
    if column is None:
        return None
    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.timestamp("ms", tz=column.type.tz)).cast(pa.int64())
    elif not pa.types.is_integer(column.type):
        raise TypeError(f"the timestamp column must be a timestamp or epoch milliseconds, not {column.type}")
    return np.asarray(column.cast(pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


def _stamps(parts: list[tuple[np.ndarray | None, int]]) -> np.ndarray | None:
    """The buffered rows' timestamps in one array; rows without one get the current time."""
    if all(stamps is None for stamps, _ in parts):
        return None
    now = int(time.time() * 1000)
    joined = np.concatenate([stamps if stamps is not None else np.full(n, -1, np.int64)
                             for stamps, n in parts])
    joined[joined < 0] = now
    return joined


def _chunks(
    sizes: np.ndarray, offset: int, budget: int, max_records: int | None = None
) -> list[tuple[int, int]]:
    """Split one partition's rows (their byte sizes) into [start, end) runs of at most ``budget``
    bytes and ``max_records`` rows (at least one row each); positions are shifted by ``offset``."""
    total = np.cumsum(sizes)
    cuts = []
    start = 0
    n = len(sizes)
    base = 0
    while start < n:
        end = int(np.searchsorted(total, base + budget, side="right"))
        end = max(end, start + 1)
        if max_records is not None:
            end = min(end, start + max_records)
        cuts.append((offset + start, offset + end))
        base = int(total[end - 1])
        start = end
    return cuts


def split_runs(sizes: np.ndarray, offset: int, base_sequence: int, budget: int) -> list[tuple[int, int, int]]:
    """A refused batch's rows (their byte sizes) as ``[start, end)`` runs of at most ``budget`` bytes
    (at least one row each), positions shifted by ``offset``, each with its base sequence: the first
    run keeps ``base_sequence``, each next one continues where the previous ended. With ``budget``
    below the batch's bytes, a batch of two or more rows gives two runs or more."""
    return [(start, end, base_sequence + start - offset) for start, end in _chunks(sizes, offset, budget)]
