"""What the partitions' data says about one prepared transaction: committed, aborted, still open.

The coordinator forgets a producer id / epoch: a TV2 completion at epoch 32766 rotates the id to
a new producer id, a reuse of the transactional id (POOLING) moves the epoch on, an idle id
expires. The partitions do not forget while they hold the records: a completed transaction's
records lie below the partition's last stable offset (LSO), and an aborted one is listed in the
partition's aborted-transaction index, which a ``read_committed`` Fetch returns beside the data
(``AbortedTransactions``: producer id + first offset, for the fetched range). So with the offset
of the transaction's first record on each partition (recorded by the producer in the
committable), one Fetch per partition answers the question from the data itself:

- the batch at that offset is not the committable's producer id / epoch: it is not our record
  (the recorded offset is wrong, or the log was truncated) -> no reading;
- the aborted index lists our producer id at or before that offset -> ``aborted``;
- otherwise, below the LSO, the records are stable and not aborted -> ``committed``;
- at or past the LSO (a transaction there, ours or an earlier one of another producer, is still
  open): the transaction marker decides. The coordinator ends a transaction by writing a control
  record (COMMIT or ABORT) for its producer id after its records on each partition, so the first
  control batch of our producer id after our first offset, read ``read_uncommitted``, is this
  transaction's outcome; no marker up to the high watermark -> ``open``. The scan is bounded
  (``_SCAN_BYTES``); past it the reading says so;
- the log no longer holds the offset (retention) -> ``gone``.

Read-only; one request per partition (a few more for a marker scan), sent to its leader. No
Airflow imports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer import FetchRequest
from kafka.record.memory_records import MemoryRecords
from kafka.structs import TopicPartition as KafkaTopicPartition

from airflow_provider_kafka_eos.kafka.errors import BrokerUnreachableError
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition
from airflow_provider_kafka_eos.kafka.protocol.error_codes import NONE, OFFSET_OUT_OF_RANGE, error_name
from airflow_provider_kafka_eos.kafka.protocol.wire import Wire

__all__ = ["PartitionReading", "data_outcome", "read_transaction_data"]

_READ_UNCOMMITTED, _READ_COMMITTED = 0, 1
# One batch is enough (Kafka returns at least the first batch whatever the limit, KIP-74); a small
# limit keeps a reading of 10,000 partitions cheap.
_MAX_BYTES = 64 * 1024
_FETCH_VERSION = 12  # isolation level, log start offset and the aborted index; no topic ids needed
_SCAN_CHUNK = 1024 * 1024
_SCAN_BYTES = 16 * _SCAN_CHUNK  # how far past its first record a transaction's marker is looked for


@dataclass(frozen=True)
class PartitionReading:
    """One partition's answer: ``outcome`` is committed / aborted / open / gone / unreadable."""

    partition: TopicPartition
    first_offset: int
    outcome: str
    detail: str

    def __str__(self) -> str:
        return f"{self.partition} at offset {self.first_offset}: {self.outcome} ({self.detail})"


def read_transaction_data(wire: Wire, committable: Committable) -> list[PartitionReading]:
    """A reading for every partition whose first offset the committable recorded (none: empty)."""
    offsets = list(committable.first_offsets)
    if not offsets:
        return []
    kafka_tps = [KafkaTopicPartition(tp.topic, tp.partition) for tp, _ in offsets]
    try:
        leaders = wire.leaders(kafka_tps)
    except BrokerUnreachableError as exc:
        return [PartitionReading(tp, at, "unreadable", f"no leader: {exc.cause}") for tp, at in offsets]
    batch = [(_fetch(tp, at, _READ_COMMITTED), leaders.get(ktp))
             for (tp, at), ktp in zip(offsets, kafka_tps, strict=True)]
    answers = wire.send_all(batch, raise_errors=False)
    readings = []
    for (tp, at), ktp, answer in zip(offsets, kafka_tps, answers, strict=True):
        reading = _reading(committable, tp, at, answer)
        if reading is None:  # past the last stable offset: the marker decides
            reading = _scan_for_marker(wire, leaders.get(ktp), committable, tp, at)
        readings.append(reading)
    return readings


def _fetch(tp: TopicPartition, offset: int, isolation: int, max_bytes: int = _MAX_BYTES) -> Any:
    fetch_topic = FetchRequest.FetchTopic
    return FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=isolation,
        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
        topics=[fetch_topic(topic=tp.topic, partitions=[fetch_topic.FetchPartition(
            partition=tp.partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
            partition_max_bytes=max_bytes)])],
        max_version=_FETCH_VERSION,
    )


def _row(answer: Any) -> tuple[Any, str | None]:
    """The one partition row of a Fetch answer, or why there is none."""
    if isinstance(answer, BrokerUnreachableError):
        return None, f"no answer: {answer.cause}"
    rows = [row for topic in answer.responses for row in topic.partitions]
    if len(rows) != 1:
        return None, f"the leader answered {len(rows)} partitions"
    return rows[0], None


def _reading(c: Committable, tp: TopicPartition, offset: int, answer: Any) -> PartitionReading | None:
    """The read_committed reading; None when the offset is not yet below the last stable offset."""
    def reading(outcome: str, detail: str) -> PartitionReading:
        return PartitionReading(tp, offset, outcome, detail)

    row, why = _row(answer)
    if row is None:
        return reading("unreadable", why or "no answer")
    if row.error_code == OFFSET_OUT_OF_RANGE and 0 <= offset < row.log_start_offset:
        return reading("gone", f"the log starts at offset {row.log_start_offset} now (retention)")
    if row.error_code != NONE:
        return reading("unreadable", f"Fetch answered {error_name(row.error_code)}")
    if row.last_stable_offset <= offset:
        return None
    ours = _batch_at(bytes(row.records or b""), offset)
    mismatch = _not_ours(c, ours)
    if mismatch:
        return reading("unreadable", mismatch)
    aborted = [a for a in (row.aborted_transactions or []) if a.producer_id == c.producer_id
               and a.first_offset <= offset]
    if aborted:
        return reading("aborted", f"the partition's aborted-transaction index lists producer id "
                                  f"{c.producer_id} from offset {aborted[0].first_offset}")
    return reading("committed", f"below the last stable offset {row.last_stable_offset} and not in the "
                                "aborted-transaction index")


def _scan_for_marker(wire: Wire, leader: int | None, c: Committable, tp: TopicPartition,
                     offset: int) -> PartitionReading:
    """Read ``read_uncommitted`` from ``offset`` for the first control batch of our producer id."""
    def reading(outcome: str, detail: str) -> PartitionReading:
        return PartitionReading(tp, offset, outcome, detail)

    position, scanned, checked_ours = offset, 0, False
    while scanned < _SCAN_BYTES:
        row, why = _row(wire.send_all([(_fetch(tp, position, _READ_UNCOMMITTED, _SCAN_CHUNK), leader)],
                                      raise_errors=False)[0])
        if row is None:
            return reading("unreadable", why or "no answer")
        if row.error_code != NONE:
            return reading("unreadable", f"Fetch (read_uncommitted) answered {error_name(row.error_code)}")
        data = bytes(row.records or b"")
        if not data:
            return reading("open", f"no transaction marker of producer id {c.producer_id} up to the high "
                                   f"watermark {row.high_watermark}: the transaction is still open there")
        scanned += len(data)
        records = MemoryRecords(data)
        while records.has_next():
            batch = records.next_batch()
            if batch is None:
                break
            if not checked_ours and batch.base_offset <= offset <= batch.last_offset:
                mismatch = _not_ours(c, batch)
                if mismatch:
                    return reading("unreadable", mismatch)
                checked_ours = True
            if batch.last_offset < offset:
                continue
            if batch.is_control_batch and batch.producer_id == c.producer_id:
                marker = next(iter(batch), None)
                kind = getattr(marker, "type", None)
                if kind in (0, 1):
                    outcome = "committed" if kind == 1 else "aborted"
                    marker_text = "COMMIT" if kind == 1 else "ABORT"
                    return reading(outcome, f"the transaction marker of producer id {c.producer_id} at "
                                            f"offset {batch.base_offset} is {marker_text}")
            position = batch.next_offset
    return reading("unreadable", f"no marker of producer id {c.producer_id} within {_SCAN_BYTES} bytes "
                                 "after its first record")


def _not_ours(c: Committable, batch: Any) -> str | None:
    if batch is None:
        return "the fetched data does not hold this offset"
    pair = (batch.producer_id, batch.producer_epoch)
    if batch.is_control_batch or pair != (c.producer_id, c.producer_epoch):
        return (f"the record at this offset belongs to producer id {batch.producer_id}, epoch "
                f"{batch.producer_epoch}, not this transaction")
    return None


def _batch_at(data: bytes, offset: int) -> Any:
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            return None
        if batch.base_offset <= offset <= batch.last_offset:
            return batch
    return None


def data_outcome(readings: Sequence[PartitionReading]) -> str | None:
    """``committed`` / ``aborted`` when every partition agrees, ``open`` when any is still open and
    none disagrees, ``torn`` when partitions disagree (one transaction cannot); None: no answer."""
    outcomes = {r.outcome for r in readings}
    if not readings or outcomes & {"gone", "unreadable"}:
        return None
    if outcomes == {"committed"}:
        return "committed"
    if outcomes == {"aborted"}:
        return "aborted"
    if outcomes <= {"open", "committed"} or outcomes <= {"open", "aborted"}:
        return "open"
    return "torn"
