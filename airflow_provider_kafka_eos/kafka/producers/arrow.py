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
The stages live apart: encoding rows into record batches is ``arrow_encode.py`` (pure functions),
sending them and the protocol's answers ``arrow_send.py`` (:class:`ArrowSender`, this class's base);
this module is the transaction (begin, buffer, partition, cut into batches, prepare).
The transaction is never ended here: the commit task commits it (commit-by-resume).
No Airflow imports: this runs inside Spark executors.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
from kafka.protocol.admin import DescribeConfigsRequest

from airflow_provider_kafka_eos.kafka.errors import (
    KafkaEosError,
    UsageError,
)
from airflow_provider_kafka_eos.kafka.producers.arrow_encode import (
    Batch,
    Rows,
    chunk_runs,
    combine_chunks,
    concat_columns,
    joined_stamps,
    millis,
)
from airflow_provider_kafka_eos.kafka.producers.arrow_send import REQUEST_OVERHEAD, ArrowSender
from airflow_provider_kafka_eos.kafka.producers.compression import codec_for
from airflow_provider_kafka_eos.kafka.producers.librdkafka import TransactionProtocol, verified_committable
from airflow_provider_kafka_eos.kafka.producers.partitioner import (
    StickyNullKeyPartitioner,
    partitions_for_keys,
)
from airflow_provider_kafka_eos.kafka.producers.producer_config import ArrowProducerSettings
from airflow_provider_kafka_eos.kafka.producers.record_batch import (
    BATCH_OVERHEAD,
    record_sizes,
)
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable
from airflow_provider_kafka_eos.kafka.protocol.error_codes import (
    error_name,
)

__all__ = ["ArrowAdmin", "ArrowPartitionTransaction", "ProducerStats"]


class ArrowAdmin(Protocol):
    """What the Arrow producer needs of the admin handed in (a TransactionAdmin): its wire (every
    request), InitProducerId (``fence``) and DescribeTransactions (``prepare``'s verification)."""

    wire: Any

    def fence(
        self, transactional_id: str, transaction_timeout_ms: int, *, enable_2pc: bool = False
    ) -> Any: ...

    def describe(self, ids: Any, *, missing_ok: bool = False) -> dict[str, Any]: ...

log = logging.getLogger(__name__)

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






class ArrowPartitionTransaction(ArrowSender):
    """One Spark partition's transaction on the Arrow path; the same life cycle as
    :class:`~airflow_provider_kafka_eos.kafka.producers.librdkafka.PartitionTransaction`:
    ``begin()``, ``write_columns(...)`` any number of times, ``prepare()`` -> Committable | None.

    ``admin`` is a ``TransactionAdmin`` owned by the caller (its wire carries every request).
    """

    def __init__(
        self,
        *,
        admin: ArrowAdmin,
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
            self._fit(limit - REQUEST_OVERHEAD - BATCH_OVERHEAD,
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
        keys, values, headers, partitions = (combine_chunks(c) for c in (keys, values, headers, partitions))
        sizes = record_sizes(keys, values)
        self._check_record_sizes(keys, sizes)
        targets = self._partitions_for(keys, partitions, sizes)
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.append((keys, values, headers, millis(timestamps), targets))
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
        keys = concat_columns([p[0] for p in pending])
        values = concat_columns([p[1] for p in pending])
        headers = concat_columns([p[2] for p in pending])
        stamps = joined_stamps([(p[3], len(p[1])) for p in pending])
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
            queues[int(sorted_targets[start])] = chunk_runs(sizes[start:end], start, self.batch_bytes,
                                                         self.settings.batch_records)
        rows = Rows(keys, values, headers, stamps, sizes)
        # One wave in flight while the next is encoded (the IO runs on the wire's network thread
        # and in the sender thread; numpy/Arrow/crc32c release the GIL for the large steps).
        in_flight: Future[None] | None = None
        try:
            in_flight = self._encode_and_send(queues, rows)
        finally:
            if in_flight is not None:
                in_flight.result()

    def _encode_and_send(self, queues: dict[int, list[tuple[int, int]]], rows: Rows) -> Future[None] | None:
        in_flight: Future[None] | None = None
        while queues:
            wave: dict[int, Batch] = {}
            for partition in list(queues):
                start, end = queues[partition].pop(0)
                if end - start > 1 and int(rows.sizes[start:end].sum()) > self.batch_bytes:
                    # batch_bytes was lowered (a batch refused as too large): cut to it from the start
                    runs = chunk_runs(rows.sizes[start:end], start, self.batch_bytes)
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














    def _check_open(self) -> None:
        if self._released:
            raise KafkaEosError("the producer was already released", transactional_id=self.transactional_id,
                                runbook="troubleshooting")
        if self.producer_id < 0:
            raise KafkaEosError("begin() was not called", transactional_id=self.transactional_id,
                                runbook="troubleshooting")












