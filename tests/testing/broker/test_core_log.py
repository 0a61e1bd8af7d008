"""PartitionLog: Kafka's partition-side producer rules, on batches built by kafka-python's builder.

No broker process: these drive the log object directly with real record batch v2 bytes, which
is where the idempotence/transaction rules live (the network tests cover the rest).
"""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafka_eos_testing.broker import codes
from kafka_eos_testing.broker.log import PartitionLog, ProducerEpochError
from kafka_eos_testing.broker.records import parse_header


def batch(
    pid: int = -1, epoch: int = -1, seq: int = -1, n: int = 3, txn: bool = False, key: str = "k"
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=txn,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=1 << 20,
    )
    for i in range(n):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=f"k{i}".encode(), value=b"v", headers=[])
    return bytes(builder.build())


def aborted(log: PartitionLog, start: int, end: int) -> list[tuple[int, int, int]]:
    return [(a.producer_id, a.first_offset, a.last_offset) for a in log.aborted_transactions(start, end)]


def test_offsets_are_assigned_and_reads_return_whole_batches():
    log = PartitionLog("t", 0)
    assert log.append_records(batch(n=3)).base_offset == 0
    assert log.append_records(batch(n=2)).base_offset == 3
    assert log.high_watermark == log.last_stable_offset == 5
    data = b"".join(log.read(4, 1 << 20, log.high_watermark))  # offset inside the 2nd batch
    record_batch = DefaultRecordBatch(data)
    assert record_batch.base_offset == 3
    assert record_batch.validate_crc()  # the offset rewrite must not break the CRC
    assert [r.offset for r in record_batch] == [3, 4]


def test_duplicate_batch_gets_its_original_offset_and_is_not_appended_twice():
    log = PartitionLog("t", 0)
    first = batch(pid=7, epoch=0, seq=0, n=3)
    assert log.append_records(first).base_offset == 0
    assert log.append_records(batch(pid=7, epoch=0, seq=3, n=2)).base_offset == 3
    retry = log.append_records(first)
    assert (retry.error_code, retry.base_offset) == (codes.NONE, 0)
    assert log.high_watermark == 5


def test_sequence_gap_and_stale_epoch_are_refused():
    log = PartitionLog("t", 0)
    log.append_records(batch(pid=7, epoch=1, seq=0, n=3))
    assert (
        log.append_records(batch(pid=7, epoch=1, seq=5, n=1)).error_code == codes.OUT_OF_ORDER_SEQUENCE_NUMBER
    )
    assert log.append_records(batch(pid=7, epoch=0, seq=3, n=1)).error_code == codes.INVALID_PRODUCER_EPOCH
    assert (
        log.append_records(batch(pid=7, epoch=2, seq=4, n=1)).error_code == codes.OUT_OF_ORDER_SEQUENCE_NUMBER
    )
    assert log.append_records(batch(pid=7, epoch=2, seq=0, n=1)).error_code == codes.NONE
    assert log.high_watermark == 4


def test_transaction_pins_the_lso_until_its_marker_and_aborts_are_indexed():
    log = PartitionLog("t", 0)
    log.append_records(batch(n=2))  # offsets 0-1, plain
    assert log.append_records(batch(pid=9, epoch=0, seq=0, n=3, txn=True)).base_offset == 2
    assert log.append_records(batch(pid=10, epoch=0, seq=0, n=1, txn=True)).base_offset == 5
    assert (log.high_watermark, log.last_stable_offset) == (6, 2)
    # non-transactional data from a producer with an open transaction: INVALID_TXN_STATE
    assert log.append_records(batch(pid=9, epoch=0, seq=3, n=1)).error_code == codes.INVALID_TXN_STATE
    state = log.producer_state(9)
    assert state.current_txn_start_offset == 2 and state.last_sequence == 2

    marker = log.append_control_marker(9, 0, commit=False, coordinator_epoch=4)
    assert marker == 6
    assert log.last_stable_offset == 5  # producer 10 still open
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in log.aborted_transactions(0, 7)] == [
        (9, 2, 6)
    ]
    assert log.aborted_transactions(7, 8) == []
    assert log.producer_state(9).current_txn_start_offset == -1
    assert log.producer_state(9).coordinator_epoch == 4

    log.append_control_marker(10, 0, commit=True, coordinator_epoch=4)
    assert log.last_stable_offset == log.high_watermark == 8
    control = DefaultRecordBatch(log.read(6, 1 << 20, 7)[0])
    assert control.is_control_batch and control.validate_crc()


def test_marker_with_a_newer_epoch_fences_late_data_and_an_older_one_is_refused():
    log = PartitionLog("t", 0)
    log.append_records(batch(pid=3, epoch=5, seq=0, n=1, txn=True))
    log.append_control_marker(3, 6, commit=False, coordinator_epoch=0)  # fenced: abort written with E+1
    late = log.append_records(batch(pid=3, epoch=5, seq=1, n=1, txn=True))
    assert late.error_code == codes.INVALID_PRODUCER_EPOCH
    with pytest.raises(ProducerEpochError):
        log.append_control_marker(3, 5, commit=True, coordinator_epoch=0)
    # the fenced producer's successor starts over at sequence 0
    assert log.append_records(batch(pid=3, epoch=7, seq=0, n=1, txn=True)).error_code == codes.NONE


def test_client_control_batches_and_garbage_are_refused_without_side_effects():
    log = PartitionLog("t", 0)
    assert log.append_records(b"\x00" * 10).error_code == codes.CORRUPT_MESSAGE
    good = batch(n=1)
    truncated = good[:-3]
    assert log.append_records(truncated).error_code == codes.CORRUPT_MESSAGE
    assert log.high_watermark == 0


def test_reload_from_disk_restores_records_producers_open_and_aborted_transactions(tmp_path):
    log = PartitionLog("t", 0, str(tmp_path))
    log.append_records(batch(pid=1, epoch=0, seq=0, n=2, txn=True))
    log.append_control_marker(1, 0, commit=False, coordinator_epoch=1)
    log.append_records(batch(pid=2, epoch=0, seq=0, n=2, txn=True))  # left open
    log.append_records(batch(pid=5, epoch=0, seq=0, n=1))
    log.close()
    with open(tmp_path / "00000000000000000000.log", "ab") as fh:
        fh.write(batch(n=1)[:20])  # a torn write from a crash: dropped on load

    again = PartitionLog("t", 0, str(tmp_path))
    assert again.high_watermark == 6
    assert again.last_stable_offset == 3
    assert again.open_transactions() == {2: 3}
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in again.aborted_transactions(0, 6)] == [
        (1, 0, 2)
    ]
    # idempotence state survived: a retry is recognised, the next sequence is accepted
    assert again.append_records(batch(pid=5, epoch=0, seq=0, n=1)).base_offset == 5
    assert again.append_records(batch(pid=5, epoch=0, seq=1, n=1)).base_offset == 6
    first = parse_header(again.read(0, 1, 1)[0])
    assert (first.base_offset, first.producer_id) == (0, 1)
    again.close()
