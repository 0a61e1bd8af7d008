"""Java-compatible murmur2 partitioning, scalar and vectorised.

The vectors are the Java client's own (``UtilsTest.testMurmur2`` in kafka-clients); the random
cross-check compares the numpy version with the scalar one and with kafka-python's independent
murmur2, so a bug must be shared by two implementations written apart to go unnoticed.
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from airflow_provider_kafka_eos.kafka.producers.partitioner import (
    NULL_KEY_PARTITION,
    murmur2,
    murmur2_array,
    partition_for_key,
    partitions_for_keys,
    to_positive,
)

# kafka-clients UtilsTest.testMurmur2 (data, not code).
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), sorted(JAVA_VECTORS.items()))
def test_scalar_matches_java_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_vectorised_matches_java_vectors() -> None:
    keys = list(JAVA_VECTORS)
    got = murmur2_array(pa.array(keys, pa.binary()))
    assert got.dtype == np.int32
    assert got.tolist() == [JAVA_VECTORS[k] for k in keys]


def test_to_positive_is_not_abs() -> None:
    assert to_positive(-(2**31)) == 0
    assert to_positive(-1) == 2**31 - 1
    assert to_positive(5) == 5


def test_random_keys_agree_with_scalar_and_kafka_python() -> None:
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

    rng = random.Random(939)
    keys = [rng.randbytes(rng.choice([0, 1, 2, 3, 4, 5, 7, 8, 13, 64, 301])) for _ in range(3000)]
    got = murmur2_array(pa.array(keys, pa.binary()))
    for key, value in zip(keys, got.tolist(), strict=True):
        assert value == murmur2(key)
        # kafka-python returns the unsigned form of the same 32 bits.
        assert value & 0xFFFFFFFF == kafka_python_murmur2(key) & 0xFFFFFFFF
    parts = partitions_for_keys(pa.array(keys, pa.binary()), 7)
    assert parts.tolist() == [partition_for_key(k, 7) for k in keys]


def test_column_kinds_slices_and_nulls() -> None:
    keys = [b"k-1", None, b"", b"a-little-bit-long-string", None, b"21"]
    column = pa.array(keys, pa.binary())
    expected = [partition_for_key(k, 12) if k is not None else NULL_KEY_PARTITION for k in keys]
    assert partitions_for_keys(column, 12).tolist() == expected
    assert partitions_for_keys(column.cast(pa.large_binary()), 12).tolist() == expected
    strings = pa.array([k.decode() if k is not None else None for k in keys], pa.string())
    assert partitions_for_keys(strings, 12).tolist() == expected
    assert partitions_for_keys(column.slice(2, 3), 12).tolist() == expected[2:5]
    chunked = pa.chunked_array([column.slice(0, 2), column.slice(2)])
    assert partitions_for_keys(chunked, 12).tolist() == expected
    assert partitions_for_keys(pa.array([], pa.binary()), 3).tolist() == []


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="num_partitions"):
        partition_for_key(b"x", 0)
    with pytest.raises(TypeError, match="binary or string"):
        partitions_for_keys(pa.array([1, 2]), 3)


def test_null_keys_stick_to_one_partition_per_batch_then_move_on() -> None:
    from airflow_provider_kafka_eos.kafka.producers.partitioner import StickyNullKeyPartitioner

    sticky = StickyNullKeyPartitioner(batch_bytes=1000, rng=random.Random(5))
    first = sticky.assign(np.full(30, 100), 7)  # 3000 bytes: three batches of ten records
    start = int(first[0])
    assert first.tolist() == [start] * 10 + [(start + 1) % 7] * 10 + [(start + 2) % 7] * 10
    # the byte count carries over: 5 more records fill half of the next partition's batch
    assert sticky.assign(np.full(5, 100), 7).tolist() == [(start + 3) % 7] * 5
    assert sticky.assign(np.full(10, 100), 7).tolist() == [(start + 3) % 7] * 5 + [(start + 4) % 7] * 5


def test_null_keys_spread_evenly_across_tasks() -> None:
    """Many tasks (each its own producer, as in a Spark job), a few batches each: every task starts
    somewhere else, so the partitions fill evenly instead of all tasks starting at partition 0."""
    from collections import Counter

    from airflow_provider_kafka_eos.kafka.producers.partitioner import StickyNullKeyPartitioner

    partitions, tasks = 6, 600
    starts, totals = Counter(), Counter()
    seeds = random.Random(27)
    for _ in range(tasks):
        sticky = StickyNullKeyPartitioner(batch_bytes=10_000, rng=random.Random(seeds.random()))
        placed = sticky.assign(np.full(250, 100), partitions)  # 2.5 batches: three partitions touched
        starts[int(placed[0])] += 1
        totals.update(placed.tolist())
    assert set(starts) == set(range(partitions))
    expected = tasks * 250 / partitions
    assert all(0.75 * expected <= totals[p] <= 1.25 * expected for p in range(partitions)), totals
    # the default generator is seeded from the system: two producers do not share a start sequence
    firsts = {int(StickyNullKeyPartitioner(100).assign(np.ones(1, np.int64), 1000)[0]) for _ in range(20)}
    assert len(firsts) > 1


def test_a_null_keyed_record_larger_than_a_batch_is_a_batch_of_its_own() -> None:
    from airflow_provider_kafka_eos.kafka.producers.partitioner import StickyNullKeyPartitioner

    sticky = StickyNullKeyPartitioner(batch_bytes=1000, rng=random.Random(1))
    placed = sticky.assign(np.array([50, 2000, 50, 960, 10]), 3).tolist()
    s = placed[0]
    # 50 starts a batch; 2000 does not fit it: next partition, alone; then 50 + 960 > 1000: the 960
    # starts the next batch, which the 10 still fits
    assert placed == [s, (s + 1) % 3, (s + 2) % 3, s, s]
    with pytest.raises(ValueError, match="batch_bytes"):
        StickyNullKeyPartitioner(0)
