"""Java-compatible key partitioning: Kafka's ``Utils.murmur2`` and ``toPositive(hash) % n``.

Why: records written by our Arrow producer, by librdkafka (``partitioner=murmur2_random``) and by
the Java client must land in the same partition for the same key, or per-key ordering and
compaction break when a pipeline switches producers. The Java client's default partitioner is
``toPositive(murmur2(keyBytes)) % numPartitions`` for keyed records; this module is the one place
that rule lives in the provider.

Two forms of the same function:

- :func:`murmur2` / :func:`partition_for_key`: one key (tests, the CLI, a single record);
- :func:`murmur2_array` / :func:`partitions_for_keys`: a whole Arrow binary (or string) column,
  vectorised with numpy: the Python loop runs once per 4-byte word of the longest key, never
  once per record, so a Spark task partitions a batch of a million keys in a few numpy passes.

Null keys have no hash: :func:`partitions_for_keys` gives them ``-1``, and
:class:`StickyNullKeyPartitioner` places them as Java's default (uniform sticky) partitioner
does: one partition until a batch's worth of bytes went there, then the next, starting at a
random partition in each producer, so that many Spark tasks do not all pile their null-keyed
records onto partition 0. An empty (non-null) key is hashed like any other, as in Java.
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa

__all__ = [
    "NULL_KEY_PARTITION",
    "StickyNullKeyPartitioner",
    "murmur2",
    "murmur2_array",
    "partition_for_key",
    "partitions_for_keys",
    "to_positive",
]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF
NULL_KEY_PARTITION = -1


def _signed32(value: int) -> int:
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2(byte[])``: a signed 32-bit int, exactly as Java returns it."""
    raw = bytes(data)
    length = len(raw)
    h = (_SEED ^ length) & _MASK32
    full = length & ~3
    for i in range(0, full, 4):
        k = int.from_bytes(raw[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = length & 3
    if tail:
        if tail == 3:
            h ^= raw[full + 2] << 16
        if tail >= 2:
            h ^= raw[full + 1] << 8
        h ^= raw[full]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return _signed32(h)


def to_positive(value: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``: MIN_VALUE maps to 0)."""
    return value & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Java's default partitioner picks for a non-null key."""
    _check_partitions(num_partitions)
    return to_positive(murmur2(key)) % num_partitions


def _binary_parts(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets int64 [n+1], data uint8, valid bool [n]) of a binary-like Arrow column, zero-copy
    where Arrow allows it (a chunked column is combined once)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.large_binary() if pa.types.is_large_string(column.type) else pa.binary())
    if pa.types.is_binary_view(column.type) or pa.types.is_string_view(column.type):
        column = column.cast(pa.large_binary())
    if pa.types.is_binary(column.type):
        offset_type = np.int32
    elif pa.types.is_large_binary(column.type):
        offset_type = np.int64
    else:
        raise TypeError(f"keys must be a binary or string Arrow column, not {column.type}")
    n = len(column)
    _, offsets_buf, data_buf = column.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=offset_type)[column.offset : column.offset + n + 1]
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    valid = (
        np.ones(n, dtype=bool)
        if column.null_count == 0
        else np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    )
    return offsets, data, valid


def murmur2_array(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``murmur2`` of every value of a binary/string column, as int32 (nulls hash as empty keys;
    mask them with the column's validity, as :func:`partitions_for_keys` does).

    Rows are processed shortest-last: after sorting by word count, the rows still hashing at
    word ``j`` are a prefix of the sorted order, so each numpy pass touches only live rows.
    """
    offsets, data, valid = _binary_parts(column)
    starts = offsets[:-1]
    lengths = (offsets[1:] - starts) * valid  # a null's slot may hold garbage offsets: treat as empty
    n = len(lengths)
    m = np.uint32(_M)
    h = (np.uint32(_SEED) ^ lengths.astype(np.uint32)).astype(np.uint32)
    words = lengths >> 2
    uniform = n == 0 or int(words.min()) == int(words.max())
    order = np.arange(n) if uniform else np.argsort(-words, kind="stable")  # same-length keys: no sort
    sorted_words = words if uniform else words[order]
    sorted_starts = starts if uniform else starts[order]
    max_words = int(sorted_words[0]) if n else 0
    # live[j] = how many rows have more than j words (sorted_words is non-increasing).
    live = np.searchsorted(-sorted_words, -np.arange(max_words), side="left") if max_words else []
    hs = h if uniform else h[order]
    with np.errstate(over="ignore"):
        for j in range(max_words):
            count = int(live[j])
            pos = sorted_starts[:count] + 4 * j
            k = (
                data[pos].astype(np.uint32)
                | (data[pos + 1].astype(np.uint32) << np.uint32(8))
                | (data[pos + 2].astype(np.uint32) << np.uint32(16))
                | (data[pos + 3].astype(np.uint32) << np.uint32(24))
            )
            k *= m
            k ^= k >> np.uint32(24)
            k *= m
            head = hs[:count]
            head *= m
            head ^= k
            hs[:count] = head
        if not uniform:
            h[order] = hs
        tail = lengths & 3
        base = starts + (lengths & ~3)
        for size, shift in ((3, 16), (2, 8)):
            rows = np.nonzero(tail >= size)[0]
            if rows.size:
                h[rows] ^= data[base[rows] + (size - 1)].astype(np.uint32) << np.uint32(shift)
        rows = np.nonzero(tail >= 1)[0]
        if rows.size:
            h[rows] ^= data[base[rows]].astype(np.uint32)
            h[rows] *= m
        h ^= h >> np.uint32(13)
        h *= m
        h ^= h >> np.uint32(15)
    return h.view(np.int32)


def partitions_for_keys(column: pa.Array | pa.ChunkedArray, num_partitions: int) -> np.ndarray:
    """Java's partition for every key of the column (int32); ``-1`` for a null key."""
    _check_partitions(num_partitions)
    hashes = murmur2_array(column).view(np.uint32) & np.uint32(0x7FFFFFFF)
    result = (hashes % np.uint32(num_partitions)).astype(np.int32)
    _, _, valid = _binary_parts(column)
    if not valid.all():
        result[~valid] = NULL_KEY_PARTITION
    return result


class StickyNullKeyPartitioner:
    """Partitions for records without a key: Java's uniform sticky partitioner (KIP-480, KIP-794).

    Each producer starts at a random partition (``rng``; a fresh system-seeded one by default)
    and keeps sending null-keyed records there until the next one would not fit a batch of
    ``batch_bytes`` (the same cut the producer makes when it splits rows into batches), then moves
    to the next partition. Java picks the next partition at random; rotating in order gives
    the same even spread with less variance. The byte count carries over between calls, so the
    switch happens per batch, not per Arrow batch handed in.
    """

    def __init__(self, batch_bytes: int, rng: random.Random | None = None) -> None:
        if batch_bytes <= 0:
            raise ValueError(f"batch_bytes must be > 0, not {batch_bytes!r}")
        self.batch_bytes = int(batch_bytes)
        self._rng = rng if rng is not None else random.Random()  # noqa: S311 (placement, not security)
        self._current: int | None = None
        self._filled = 0

    def assign(self, sizes: np.ndarray, num_partitions: int) -> np.ndarray:
        """The partition of each null-keyed record, given the records' sizes in bytes (in order)."""
        _check_partitions(num_partitions)
        sizes = np.asarray(sizes, dtype=np.int64)
        if self._current is None:
            self._current = self._rng.randrange(num_partitions)
        out = np.empty(len(sizes), dtype=np.int32)
        total = np.cumsum(sizes)
        current, filled = self._current % num_partitions, self._filled
        start, base = 0, 0
        while start < len(sizes):  # one step per batch, not per record
            end = int(np.searchsorted(total, base + self.batch_bytes - filled, side="right"))
            if end == start:
                if filled:  # the next record does not fit this batch: the batch is done
                    current, filled = (current + 1) % num_partitions, 0
                    continue
                end = start + 1  # a record larger than a batch is a batch of its own
            out[start:end] = current
            filled += int(total[end - 1]) - base
            base, start = int(total[end - 1]), end
            if filled >= self.batch_bytes:
                current, filled = (current + 1) % num_partitions, 0
        self._current, self._filled = current, filled
        return out


def _check_partitions(num_partitions: int) -> None:
    if not isinstance(num_partitions, (int, np.integer)) or num_partitions <= 0:
        raise ValueError(f"num_partitions must be a positive int, not {num_partitions!r}")
