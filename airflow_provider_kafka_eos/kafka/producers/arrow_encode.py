"""The Arrow producer's encode stage: buffered Arrow columns -> runs of rows -> record batches.

Pure functions of columns and sizes (no network, no state): the rows of one buffer sorted by
partition (:class:`Rows`), the runs a partition's rows are cut into (:func:`chunk_runs`, at most
``batch.size`` bytes and ``batch_records`` rows), a refused batch's runs with their sequence
numbers (:func:`split_runs`), and one run encoded as a RecordBatch v2 (:func:`encode_run`).
No Airflow imports: this runs inside Spark executors.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from airflow_provider_kafka_eos.kafka.producers.record_batch import (
    EncodedBatch,
    encode_batch,
)

BASE_TIMESTAMP = struct.Struct(">q")  # a RecordBatch v2's baseTimestamp, at byte 27


@dataclass(frozen=True)
class Rows:
    """One buffer's rows, sorted by partition, that its record batches are cut from: kept until
    the buffer's last wave is acknowledged, so that a batch the broker refuses as too large can be
    encoded again in smaller parts (no copy: the batches are slices of these columns)."""

    keys: Any
    values: Any
    headers: Any
    stamps: np.ndarray | None
    sizes: np.ndarray  # record_sizes of each row (the unit of batch_bytes)


@dataclass(frozen=True)
class Batch:
    """One encoded record batch and the rows it holds (``rows[start:end]``)."""

    encoded: EncodedBatch
    rows: Rows
    start: int
    end: int

    @property
    def estimated_bytes(self) -> int:
        return int(self.rows.sizes[self.start:self.end].sum())


def combine_chunks(column: Any) -> Any:
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks()
    return column


def concat_columns(columns: list[Any]) -> Any:
    if columns[0] is None:
        return None
    return columns[0] if len(columns) == 1 else pa.concat_arrays([c.cast(columns[0].type) for c in columns])


def millis(column: Any) -> np.ndarray | None:
    """A timestamp column as epoch milliseconds (int64; -1 marks a null: stamped when encoded)."""
    if column is None:
        return None
    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.timestamp("ms", tz=column.type.tz)).cast(pa.int64())
    elif not pa.types.is_integer(column.type):
        raise TypeError(f"the timestamp column must be a timestamp or epoch milliseconds, not {column.type}")
    return np.asarray(column.cast(pa.int64()).fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


def joined_stamps(parts: list[tuple[np.ndarray | None, int]]) -> np.ndarray | None:
    """The buffered rows' timestamps in one array; rows without one get the current time."""
    if all(stamps is None for stamps, _ in parts):
        return None
    now = int(time.time() * 1000)
    joined = np.concatenate([stamps if stamps is not None else np.full(n, -1, np.int64)
                             for stamps, n in parts])
    joined[joined < 0] = now
    return joined


def chunk_runs(
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
    return [(start, end, base_sequence + start - offset) for start, end in chunk_runs(sizes, offset, budget)]


def encode_run(
    rows: Rows, start: int, end: int, *, producer_id: int, producer_epoch: int, base_sequence: int,
    codec: Any, now_ms: int | None = None,
) -> Batch:
    """``rows[start:end]`` as one record batch whose first record has ``base_sequence``; rows
    without timestamps are stamped ``now_ms`` (default: now)."""
    n = end - start
    encoded = encode_batch(
        rows.keys.slice(start, n) if rows.keys is not None else None,
        rows.values.slice(start, n),
        headers=rows.headers.slice(start, n) if rows.headers is not None else None,
        timestamps_ms=rows.stamps[start:end] if rows.stamps is not None else None,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        codec=codec,
        now_ms=now_ms,
    )
    return Batch(encoded, rows, start, end)
