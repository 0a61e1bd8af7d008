"""Record batch v2 headers, read and written as bytes.

The broker never decodes individual records of an uncompressed batch on the produce or fetch
path: it only needs the fixed 61-byte batch header (offsets, producer id/epoch, sequence, flags),
and Kafka's CRC does not cover the first 16 bytes (base offset, length, partition leader epoch),
so the broker can assign offsets by rewriting those bytes without touching the rest. A
compressed batch is decompressed once on produce, as Kafka's ``LogValidator`` does, so that one
that does not decode under its codec is refused (:func:`compression_problem`); it is stored as
sent. The only records built here are control records (transaction markers), which are tiny.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafka.record.util import calc_crc32c

# Offsets inside a v2 batch header (see Kafka's DefaultRecordBatch).
HEADER_SIZE = 61
LOG_OVERHEAD = 12  # base offset (8) + batch length (4): the part not counted in the batch length
_MAGIC_OFFSET = 16
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21

TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

# base offset, batch length, partition leader epoch, magic, crc, attributes, last offset delta,
# first timestamp, max timestamp, producer id, producer epoch, base sequence, record count
_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qii")  # the part Kafka rewrites on append (not covered by the CRC)


class CorruptBatchError(ValueError):
    """The bytes are not a well-formed record batch v2 (maps to CORRUPT_MESSAGE)."""


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The header fields the broker acts on; ``size`` is the whole batch in bytes."""

    base_offset: int
    size: int
    magic: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % 2**31

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


def parse_header(data: bytes | memoryview, pos: int = 0) -> BatchHeader:
    """Decode the batch header at ``pos``; raise :class:`CorruptBatchError` when it cannot be one."""
    if len(data) - pos < HEADER_SIZE:
        raise CorruptBatchError(f"{len(data) - pos} bytes left, a batch header needs {HEADER_SIZE}")
    (
        base_offset,
        length,
        _leader_epoch,
        magic,
        _crc,
        attributes,
        last_delta,
        first_ts,
        max_ts,
        pid,
        epoch,
        base_seq,
        count,
    ) = _HEADER.unpack_from(data, pos)
    size = LOG_OVERHEAD + length
    if magic != 2:
        raise CorruptBatchError(f"record batch magic {magic}; only v2 batches are supported")
    if length < HEADER_SIZE - LOG_OVERHEAD or pos + size > len(data):
        raise CorruptBatchError(f"record batch length {length} does not fit the {len(data) - pos} bytes sent")
    if count < 0 or last_delta < 0:
        raise CorruptBatchError("negative record count or offset delta")
    return BatchHeader(
        base_offset, size, magic, attributes, last_delta, first_ts, max_ts, pid, epoch, base_seq, count
    )


def split_batches(data: bytes) -> list[tuple[BatchHeader, memoryview]]:
    """Every batch in a produce request's records field, each with its bytes (no copy)."""
    view = memoryview(data)
    out = []
    pos = 0
    while pos < len(data):
        header = parse_header(view, pos)
        out.append((header, view[pos : pos + header.size]))
        pos += header.size
    return out


_CODEC_MASK = 0x07
_KNOWN_CODECS = range(0, 5)  # none, gzip, snappy, lz4, zstd


def compression_problem(header: BatchHeader, batch: memoryview | bytes) -> str | None:
    """Why a compressed batch cannot be read (``None`` when it can, or is not compressed).

    The records are decoded with kafka-python's reader (its ``kafka/codec.py`` decompressors, the
    same packages the Arrow producer compresses with), and their number must match the header.
    """
    codec = header.attributes & _CODEC_MASK
    if codec == 0:
        return None
    if codec not in _KNOWN_CODECS:
        return f"unknown compression codec id {codec}"
    from kafka.record.default_records import DefaultRecordBatch

    try:
        count = sum(1 for _ in DefaultRecordBatch(bytes(batch)))
    except Exception as exc:  # whatever the codec library raises for a payload it cannot decode
        return f"the records do not decode under codec id {codec} ({type(exc).__name__})"
    if count != header.record_count:
        return f"the batch header says {header.record_count} records, the payload holds {count}"
    return None


def with_base_offset(batch: memoryview | bytes, base_offset: int, leader_epoch: int = 0) -> bytes:
    """The batch with Kafka's append-time rewrite of base offset and leader epoch (CRC unaffected).

    One copy: the 16-byte prefix and a view of the rest are joined straight into the result.
    """
    view = memoryview(batch)
    length = struct.unpack_from(">i", view, 8)[0]
    return b"".join((_PREFIX.pack(base_offset, length, leader_epoch), view[16:]))


def _varint(value: int) -> bytes:
    """Zig-zag varint, as Kafka encodes record fields."""
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
    return (raw >> 1) ^ -(raw & 1), pos


def control_batch(
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
) -> bytes:
    """A transaction marker: one control record, key (version 0, type), value (version 0, epoch)."""
    key = struct.pack(">hh", 0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = struct.pack(">hi", 0, coordinator_epoch)
    body = (
        b"\x00" + _varint(0) + _varint(0) + _varint(len(key)) + key + _varint(len(value)) + value + _varint(0)
    )
    record = _varint(len(body)) + body
    attributes = TRANSACTIONAL_FLAG | CONTROL_FLAG
    # everything from attributes on is covered by the CRC
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            0,
            timestamp_ms,
            timestamp_ms,
            producer_id,
            producer_epoch,
            NO_SEQUENCE,
            1,
        )
        + record
    )
    crc = calc_crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)  # leader epoch + magic + crc + rest
    return _PREFIX.pack(base_offset, length, 0) + struct.pack(">bI", 2, crc) + after_crc


def control_type(batch: bytes | memoryview) -> int:
    """CONTROL_COMMIT or CONTROL_ABORT, read from a control batch's single record key."""
    pos = HEADER_SIZE
    _length, pos = _read_varint(batch, pos)
    pos += 1  # record attributes
    _ts_delta, pos = _read_varint(batch, pos)
    _offset_delta, pos = _read_varint(batch, pos)
    key_length, pos = _read_varint(batch, pos)
    if key_length < 4:
        raise CorruptBatchError("control record without a key")
    return struct.unpack_from(">h", batch, pos + 2)[0]
