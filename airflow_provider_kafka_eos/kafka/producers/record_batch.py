"""Arrow columns -> Kafka RecordBatch v2 bytes, with no Python call per record.

Why: the Arrow producer (``arrow_producer.py``) must keep up with librdkafka, which a Python
loop over rows cannot (one ``produce()`` call per record is the cost we are removing). Every
per-record quantity (zigzag varints, sizes, offset and timestamp deltas) is computed as a numpy
array, the records are assembled by one ``pyarrow.compute.binary_join_element_wise`` call
(C++), and the CRC32C is one call into the ``crc32c`` C extension.

Layout (Kafka's ``DefaultRecordBatch`` / ``DefaultRecord``, magic 2)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 (CRC32C of everything after it) | attributes int16 | lastOffsetDelta int32 |
    baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16 |
    baseSequence int32 | recordCount int32 | records...

    record: length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
            keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
            headerCount varint | (keyLength varint | key | valueLength varint | value)*

Compression is per batch, as in Kafka: the records section (everything after the 61-byte
header) is compressed whole by the configured codec (``kafka/producers/compression.py``) and the codec id
goes in the low three bits of the attributes; the CRC covers the compressed bytes.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

import crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_kafka_eos.kafka.producers.compression import Codec

__all__ = ["BATCH_OVERHEAD", "EncodedBatch", "encode_batch", "record_sizes", "zigzag_varints"]

MAGIC = 2
TRANSACTIONAL_FLAG = 0x10
NO_PARTITION_LEADER_EPOCH = -1
# Bytes before the records: 8+4+4+1+4+2+4+8+8+8+2+4+4.
BATCH_OVERHEAD = 61
_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. recordCount (40 bytes)
_HEADER_BEFORE_CRC = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_MAX_VARINT = 10


@dataclass(frozen=True)
class EncodedBatch:
    """One RecordBatch v2: its bytes and what the producer needs to track it."""

    data: bytes
    record_count: int
    base_sequence: int

    @property
    def last_sequence(self) -> int:
        return self.base_sequence + self.record_count - 1


# -- varints ---------------------------------------------------------------------------------


def _zigzag(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.int64, copy=False)
    return ((v << np.int64(1)) ^ (v >> np.int64(63))).view(np.uint64)


def _varint_sizes(z: np.ndarray) -> np.ndarray:
    sizes = np.ones(z.shape, dtype=np.int64)
    for k in range(1, _MAX_VARINT):
        sizes += z >= np.uint64(1 << (7 * k))
    return sizes


def _varint_matrix(z: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Row i holds the varint bytes of ``z[i]`` in its first ``sizes[i]`` columns."""
    width = int(sizes.max()) if len(sizes) else 1
    out = np.empty((len(z), width), dtype=np.uint8)
    for j in range(width):
        byte = ((z >> np.uint64(7 * j)) & np.uint64(0x7F)).astype(np.uint8)
        more = (sizes > j + 1).astype(np.uint8) << np.uint8(7)
        out[:, j] = byte | more
    return out


def zigzag_varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kafka's signed (zigzag) varints of ``values``: (byte matrix, sizes)."""
    z = _zigzag(np.asarray(values))
    sizes = _varint_sizes(z)
    return _varint_matrix(z, sizes), sizes


def _concat(fields: list[tuple[np.ndarray, np.ndarray]], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate per-row byte fields (matrix, sizes) into one (matrix, sizes), row by row."""
    width = sum(m.shape[1] for m, _ in fields)
    out = np.zeros((n, width), dtype=np.uint8)
    cursor = np.zeros(n, dtype=np.int64)
    rows = np.arange(n)
    for matrix, sizes in fields:
        for j in range(matrix.shape[1]):
            live = rows[sizes > j]
            out[live, cursor[live] + j] = matrix[live, j]
        cursor += sizes
    return out, cursor


def _binary_from_matrix(matrix: np.ndarray, sizes: np.ndarray) -> pa.Array:
    """A BinaryArray whose element i is ``matrix[i, :sizes[i]]`` (built from buffers, no loop)."""
    n = len(sizes)
    mask = np.arange(matrix.shape[1]) < sizes[:, None]
    data = matrix[mask]  # row-major: row i's bytes, then row i+1's
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(sizes, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


# -- columns -------------------------------------------------------------------------------


def _as_binary(column: pa.Array | pa.ChunkedArray | None, n: int) -> tuple[pa.Array, np.ndarray]:
    """(binary array with nulls as b"", lengths with -1 for nulls)."""
    if column is None:
        empty = pa.Array.from_buffers(
            pa.binary(), n, [None, pa.py_buffer(np.zeros(n + 1, dtype=np.int32)), pa.py_buffer(b"")]
        )
        return empty, np.full(n, -1, dtype=np.int64)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_null(column.type):
        column = column.cast(pa.binary())
    kind = column.type
    if any(check(kind) for check in (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view,
                                     pa.types.is_large_binary, pa.types.is_binary_view)):
        column = column.cast(pa.binary())
    elif not pa.types.is_binary(kind):
        raise TypeError(f"key and value columns must be binary or string, not {column.type}")
    lengths = pc.binary_length(column).to_numpy(zero_copy_only=False)
    if column.null_count:
        lengths = np.where(np.asarray(column.is_valid()), np.nan_to_num(lengths, nan=0), -1).astype(np.int64)
        column = column.fill_null(b"")
    else:
        lengths = lengths.astype(np.int64)
    return column, lengths


def _headers_part(headers: pa.Array | pa.ChunkedArray | None, n: int) -> tuple[pa.Array | None, np.ndarray]:
    """Per record: headerCount varint + encoded headers, as a binary array and its sizes.

    ``headers`` is ``list<struct<key: string, value: binary>>`` or ``map<string, binary>``; a
    null list means no headers. Each header is encoded by one element-wise join over the
    flattened header columns; each record's headers are then a contiguous slice of that buffer.
    """
    if headers is None:
        return None, np.ones(n, dtype=np.int64)  # headerCount varint 0: one byte
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    if pa.types.is_map(headers.type):
        keys_col, values_col = headers.keys, headers.items
        list_offsets = np.asarray(headers.offsets)
    elif pa.types.is_list(headers.type) or pa.types.is_large_list(headers.type):
        struct = headers.values
        keys_col, values_col = struct.field("key"), struct.field("value")
        list_offsets = np.asarray(headers.offsets)
    else:
        raise TypeError(
            f"headers must be list<struct<key, value>> or map<string, binary>, not {headers.type}"
        )
    valid = np.asarray(headers.is_valid()) if headers.null_count else np.ones(n, dtype=bool)
    counts = np.diff(list_offsets).astype(np.int64) * valid
    first = int(list_offsets[0])
    total = int(list_offsets[-1]) - first
    keys_col = keys_col.slice(first, total)
    values_col = values_col.slice(first, total)
    hkeys, hkey_lengths = _as_binary(keys_col, total)
    if (hkey_lengths < 0).any():
        raise ValueError("a header key is null; Kafka header keys are non-null strings")
    hvalues, hvalue_lengths = _as_binary(values_col, total)
    kmat, ksz = zigzag_varints(hkey_lengths)
    vmat, vsz = zigzag_varints(hvalue_lengths)
    encoded = pc.binary_join_element_wise(
        _binary_from_matrix(kmat, ksz), hkeys, _binary_from_matrix(vmat, vsz), hvalues, b""
    )
    sizes = ksz + np.maximum(hkey_lengths, 0) + vsz + np.maximum(hvalue_lengths, 0)
    header_offsets = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(sizes, out=header_offsets[1:])
    # A null headers list may still span entries in Arrow's child arrays: drop them by giving
    # such a record an empty slice (start = end).
    rel = (list_offsets - first).astype(np.int64)
    starts = header_offsets[rel[:-1]]
    ends = np.where(valid, header_offsets[rel[1:]], starts)
    blob_sizes = ends - starts
    blob_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(blob_sizes, out=blob_offsets[1:])
    source = np.frombuffer(encoded.buffers()[2], dtype=np.uint8) if total else np.zeros(0, np.uint8)
    if n and (starts[1:] == ends[:-1]).all() and starts[0] == 0:
        data_buf = pa.py_buffer(source[: int(blob_offsets[-1])])  # contiguous: no copy
    else:
        # Null lists left gaps: gather the kept bytes (index arithmetic, no per-record loop).
        gather = np.repeat(starts - blob_offsets[:-1], blob_sizes) + np.arange(int(blob_offsets[-1]))
        data_buf = pa.py_buffer(source[gather])
    blob = pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(blob_offsets.astype(np.int32)), data_buf]
    )
    cmat, csz = zigzag_varints(counts)
    part = pc.binary_join_element_wise(_binary_from_matrix(cmat, csz), blob, b"")
    return part, csz + np.diff(blob_offsets)


def record_sizes(
    keys: pa.Array | pa.ChunkedArray | None, values: pa.Array | pa.ChunkedArray | None
) -> np.ndarray:
    """Approximate encoded size of each record (payload + 12 bytes of framing), for splitting
    rows into batches below a byte budget without encoding them first."""
    n = len(values) if values is not None else len(keys)
    size = np.full(n, 12, dtype=np.int64)
    for column in (keys, values):
        if column is not None:
            lengths = pc.binary_length(column).fill_null(0).to_numpy(zero_copy_only=False)
            size += lengths.astype(np.int64)
    return size


def encode_batch(
    keys: pa.Array | pa.ChunkedArray | None,
    values: pa.Array | pa.ChunkedArray | None,
    *,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    headers: pa.Array | pa.ChunkedArray | None = None,
    timestamps_ms: np.ndarray | pa.Array | None = None,
    transactional: bool = True,
    now_ms: int | None = None,
    codec: Codec | None = None,
) -> EncodedBatch:
    """Encode the rows as one RecordBatch v2 (base offset 0; the broker assigns offsets).

    ``keys``/``values``: binary or string columns (nulls allowed: a null value is a tombstone).
    ``timestamps_ms``: CreateTime per record; default: ``now_ms`` for all of them.
    ``codec``: compress the records section (default: uncompressed).
    """
    n = len(values) if values is not None else (len(keys) if keys is not None else 0)
    if n == 0:
        raise ValueError("a record batch needs at least one record")
    if (keys is not None and len(keys) != n) or (headers is not None and len(headers) != n):
        raise ValueError("key, value and header columns must have the same length")
    key_col, key_lengths = _as_binary(keys, n)
    value_col, value_lengths = _as_binary(values, n)

    if timestamps_ms is None:
        stamp = int(now_ms if now_ms is not None else time.time() * 1000)
        ts = np.full(n, stamp, dtype=np.int64)
    else:
        if isinstance(timestamps_ms, (pa.Array, pa.ChunkedArray)):
            column = timestamps_ms
            if pa.types.is_timestamp(column.type):
                column = column.cast(pa.timestamp("ms")).cast(pa.int64())
            ts = column.to_numpy(zero_copy_only=False).astype(np.int64)
        else:
            ts = np.asarray(timestamps_ms, dtype=np.int64)
        if len(ts) != n:
            raise ValueError("the timestamp column must have one value per record")
    base_ts = int(ts[0])
    max_ts = int(ts.max())

    ts_mat, ts_sz = zigzag_varints(ts - base_ts)
    off_mat, off_sz = zigzag_varints(np.arange(n, dtype=np.int64))
    klen_mat, klen_sz = zigzag_varints(key_lengths)
    vlen_mat, vlen_sz = zigzag_varints(value_lengths)
    header_part, header_sz = _headers_part(headers, n)

    body = (
        1 + ts_sz + off_sz + klen_sz + np.maximum(key_lengths, 0) + vlen_sz
        + np.maximum(value_lengths, 0) + header_sz
    )
    len_mat, len_sz = zigzag_varints(body)
    attr = (np.zeros((n, 1), dtype=np.uint8), np.ones(n, dtype=np.int64))
    prefix = _binary_from_matrix(*_concat([(len_mat, len_sz), attr, (ts_mat, ts_sz), (off_mat, off_sz),
                                           (klen_mat, klen_sz)], n))
    middle = _binary_from_matrix(vlen_mat, vlen_sz)
    if header_part is None:
        header_part = _binary_from_matrix(np.zeros((n, 1), dtype=np.uint8), np.ones(n, dtype=np.int64))
    records = _data_bytes(pc.binary_join_element_wise(prefix, key_col, middle, value_col, header_part, b""))

    attributes = TRANSACTIONAL_FLAG if transactional else 0
    if codec is not None and codec.compresses:
        records = codec.compress(records)
        attributes |= codec.attribute
    tail = _HEADER_AFTER_CRC.pack(
        attributes, n - 1, base_ts, max_ts, producer_id, producer_epoch, base_sequence, n
    )
    crc = crc32c.crc32c(records, crc32c.crc32c(tail))
    batch_length = len(tail) + len(records) + 4 + 1 + 4  # partitionLeaderEpoch + magic + crc
    head = _HEADER_BEFORE_CRC.pack(0, batch_length, NO_PARTITION_LEADER_EPOCH, MAGIC) + struct.pack(">I", crc)
    return EncodedBatch(head + tail + records, n, base_sequence)


def _data_bytes(joined: pa.Array) -> bytes:
    start = joined.offset
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32)[start : start + len(joined) + 1]
    return joined.buffers()[2].to_pybytes()[int(offsets[0]) : int(offsets[-1])]
