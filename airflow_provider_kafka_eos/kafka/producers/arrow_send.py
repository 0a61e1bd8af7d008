"""The Arrow producer's send and transaction-protocol stage: record batches -> acknowledged Produce.

:class:`ArrowSender` is the half of the Arrow producer's transaction (``arrow.py``'s
:class:`ArrowPartitionTransaction`) that talks to the brokers: Metadata (the topic's leaders),
AddPartitionsToTxn under TV1, one Produce request per leader per wave, retried with the same batch and
sequence until ``delivery_timeout_ms``, a batch refused as too large split and re-sent in order, each answer
named (fenced, unauthorized, transaction no longer open). The transaction half (``arrow.py``)
buffers, partitions and cuts the rows; the state both read (producer id and epoch, the learned
``batch_bytes``, sequences, statistics) is the transaction's, set up by its ``__init__``.
No Airflow imports: this runs inside Spark executors.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

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
from airflow_provider_kafka_eos.kafka.producers.arrow_encode import (
    BASE_TIMESTAMP,
    Batch,
    Rows,
    encode_run,
    split_runs,
)
from airflow_provider_kafka_eos.kafka.producers.librdkafka import TransactionProtocol
from airflow_provider_kafka_eos.kafka.producers.producer_config import ArrowProducerSettings
from airflow_provider_kafka_eos.kafka.producers.record_batch import (
    EncodedBatch,
)
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
# A Produce request's bytes besides its batches: header, client id, transactional id, topic name,
# per-partition framing. Generous, so that a request of batches below the limit stays below it.
REQUEST_OVERHEAD = 1024



class ArrowSender:
    """Sends a transaction's record batches and speaks its protocol (see the module docstring).

    A base class, not a component: the attributes it reads are set by
    :class:`~airflow_provider_kafka_eos.kafka.producers.arrow.ArrowPartitionTransaction`'s ``__init__``.
    """

    settings: ArrowProducerSettings
    wire: Any
    transactional_id: str
    topic: str
    protocol: TransactionProtocol
    batch_bytes: int
    delivery_timeout_ms: int
    request_timeout_ms: int
    producer_id: int
    producer_epoch: int
    stats: Any
    _leaders: dict[int, int]
    _num_partitions: int
    _next_sequence: dict[int, int]
    _executor: ThreadPoolExecutor | None
    _added: set[int]
    _written: set[int]
    _first_offsets: dict[int, int]
    _learned_logged: bool
    _topic_limit: int | None

    def _encode(
        self, rows: Rows, start: int, end: int, base_sequence: int, now_ms: int | None = None
    ) -> Batch:
        """``rows[start:end]`` as one record batch of this producer (:func:`encode_run`)."""
        return encode_run(rows, start, end, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                          base_sequence=base_sequence, codec=self.settings.codec, now_ms=now_ms)

    def _split(self, batch: Batch, budget: int) -> list[Batch]:
        """``batch``'s rows encoded again as runs of at most ``budget`` bytes, in order, with the
        same sequence numbers: the first run starts at the batch's base sequence, the next continue
        (the records are unchanged, so batches encoded after it stay in sequence), and the same
        CreateTime where the rows had none (the batch's base timestamp)."""
        stamped = BASE_TIMESTAMP.unpack_from(batch.encoded.data, 27)[0]  # after baseOffset..lastOffsetDelta
        sizes = batch.rows.sizes[batch.start:batch.end]
        runs = split_runs(sizes, batch.start, batch.encoded.base_sequence, budget)
        return [self._encode(batch.rows, start, end, sequence, stamped) for start, end, sequence in runs]

    def _split_refused(self, partition: int, batch: Batch, code: int, message: str | None) -> list[Batch]:
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

    def _record_too_large(self, partition: int, batch: Batch, code: int, message: str | None) -> UsageError:
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

    def _send_wave(self, wave: dict[int, Batch]) -> None:
        """One batch per partition, one Produce request per leader, retried until acknowledged.

        A batch refused as too large is replaced by its parts (:meth:`_split_refused`), sent one
        after the other in later rounds: still one batch per partition in flight."""
        deadline = time.monotonic() + self.delivery_timeout_ms / 1000
        backoff = 0.02
        todo: dict[int, Batch] = {}
        after: dict[int, list[Batch]] = {}  # a partition's parts waiting for the one in todo
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
                    size = REQUEST_OVERHEAD + sum(len(todo[p].encoded.data) + 16 for p in share)
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

    def _next_part(self, partition: int, queue: list[Batch], todo: dict[int, Batch],
                   after: dict[int, list[Batch]]) -> None:
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

    def _request_shares(self, parts: list[int], todo: dict[int, Batch]) -> list[list[int]]:
        """One leader's partitions split so that no request exceeds ``message.max.bytes``
        (every batch alone fits: ``batch_bytes`` was cut to the limit)."""
        limit = self.settings.max_request_bytes
        if limit is None:
            return [parts]
        shares: list[list[int]] = [[]]
        used = REQUEST_OVERHEAD
        for partition in sorted(parts):
            size = len(todo[partition].encoded.data) + 16  # + partition index and records length framing
            if shares[-1] and used + size > limit:
                shares.append([])
                used = REQUEST_OVERHEAD
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

