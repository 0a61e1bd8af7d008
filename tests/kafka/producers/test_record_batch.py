"""RecordBatch v2 encoding from Arrow columns, byte for byte against kafka-python's builder.

kafka-python's ``DefaultRecordBatchBuilder`` is an independent implementation of Kafka's
``DefaultRecordBatch`` (one Python call per record); the vectorised encoder must produce the
same bytes for the same records, CRC32C included. The broker tests read the bytes back with
librdkafka and kafka-python consumers.
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from airflow_provider_kafka_eos.kafka.producers.record_batch import (
    BATCH_OVERHEAD,
    encode_batch,
    zigzag_varints,
)

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _reference(keys, values, headers, timestamps, *, pid=4711, epoch=3, seq=17, transactional=True) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, transactional, pid, epoch, seq, 1 << 30)
    for i, (k, v) in enumerate(zip(keys, values, strict=True)):
        row_headers = [(h["key"], h["value"]) for h in (headers[i] or [])] if headers else []
        builder.append(i, timestamps[i], k, v, row_headers)
    data = bytearray(builder.build())
    # partitionLeaderEpoch (bytes 12-15, outside the CRC): the Java producer sends -1
    # (NO_PARTITION_LEADER_EPOCH) as we do; kafka-python's builder leaves 0.
    data[12:16] = b"\xff\xff\xff\xff"
    return bytes(data)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bytes_equal_kafka_python_builder(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([1, 7, 300])
    keys = [None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 1, 5, 200])) for _ in range(n)]
    values = [None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 3, 64, 20000])) for _ in range(n)]
    headers = [
        None if rng.random() < 0.3 else [
            {"key": f"h{j}", "value": None if rng.random() < 0.2 else rng.randbytes(rng.choice([0, 9, 300]))}
            for j in range(rng.choice([0, 1, 3]))
        ]
        for _ in range(n)
    ]
    base = 1_700_000_000_000
    timestamps = [base + rng.randint(-5000, 10**9) for _ in range(n)]
    got = encode_batch(
        pa.array(keys, pa.binary()), pa.array(values, pa.binary()), headers=pa.array(headers, HEADERS),
        timestamps_ms=np.array(timestamps), producer_id=4711, producer_epoch=3, base_sequence=17,
    )
    assert got.data == _reference(keys, values, headers, timestamps)
    assert got.record_count == n and got.last_sequence == 17 + n - 1
    batch = DefaultRecordBatch(got.data)
    assert batch.validate_crc() and batch.is_transactional


def test_without_headers_strings_and_sliced_columns() -> None:
    keys = pa.array(["a", "bb", None, "dddd"]).slice(1, 3)
    values = pa.array(["x" * 200, None, "z"]).slice(0, 3)
    got = encode_batch(keys, values, producer_id=1, producer_epoch=0, base_sequence=0, now_ms=1234,
                       transactional=False)
    assert got.data == _reference([b"bb", None, b"dddd"], [b"x" * 200, None, b"z"], None, [1234] * 3,
                                  pid=1, epoch=0, seq=0, transactional=False)
    assert len(got.data) > BATCH_OVERHEAD


def test_map_headers_and_null_lists_with_child_entries() -> None:
    """A null headers list may still span child entries in Arrow: they must not be written."""
    offsets = pa.array([0, 1, 2, 3], pa.int32())
    items = pa.array(
        [{"key": "a", "value": b"1"}, {"key": "dropped", "value": b"2"}, {"key": "c", "value": None}],
        HEADERS.value_type,
    )
    headers = pa.ListArray.from_arrays(offsets, items, mask=pa.array([False, True, False]))
    keys = pa.array([b"k1", b"k2", b"k3"])
    got = encode_batch(keys, keys, headers=headers, producer_id=9, producer_epoch=1, base_sequence=0,
                       now_ms=5)
    expected = [[{"key": "a", "value": b"1"}], None, [{"key": "c", "value": None}]]
    assert got.data == _reference([b"k1", b"k2", b"k3"], [b"k1", b"k2", b"k3"], expected, [5] * 3, pid=9,
                                  epoch=1, seq=0)
    as_map = pa.array([[("a", b"1")], [], [("c", None)]], pa.map_(pa.string(), pa.binary()))
    assert encode_batch(keys, keys, headers=as_map, producer_id=9, producer_epoch=1, base_sequence=0,
                        now_ms=5).data == got.data


def test_zigzag_varints_match_kafka() -> None:
    from kafka.record.util import encode_varint

    values = [0, -1, 1, 63, -64, 64, 300, -(2**31), 2**31 - 1, 2**40, -(2**62)]
    matrix, sizes = zigzag_varints(np.array(values, dtype=np.int64))
    for row, size, value in zip(matrix, sizes, values, strict=True):
        expected = bytearray()
        encode_varint(value, expected.append)
        assert bytes(row[:size]) == bytes(expected)


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        encode_batch(pa.array([], pa.binary()), pa.array([], pa.binary()), producer_id=1, producer_epoch=0,
                     base_sequence=0)
    with pytest.raises(TypeError, match="binary or string"):
        encode_batch(None, pa.array([1, 2]), producer_id=1, producer_epoch=0, base_sequence=0)
    with pytest.raises(ValueError, match="same length"):
        encode_batch(pa.array([b"a"]), pa.array([b"a", b"b"]), producer_id=1, producer_epoch=0,
                     base_sequence=0)


@pytest.mark.parametrize("name", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_carry_the_codec_and_decode_in_kafka_python(name: str) -> None:
    """Each codec: the attributes' low bits name it, the CRC covers the compressed bytes, and
    kafka-python (kafka/codec.py, an independent decoder) reads back the same records as the
    uncompressed batch holds."""
    from kafka.record.default_records import DefaultRecordBatch as Batch

    from airflow_provider_kafka_eos.kafka.producers.compression import CODECS, Codec

    n = 500
    keys = pa.array([f"key-{i}".encode() for i in range(n)], pa.binary())
    values = pa.array([b"compressible " * (i % 40) if i % 7 else None for i in range(n)], pa.binary())
    headers = pa.array([[{"key": "h", "value": str(i).encode()}] if i % 3 == 0 else None for i in range(n)],
                       HEADERS)
    common = dict(headers=headers, producer_id=9, producer_epoch=1, base_sequence=0, now_ms=1_700_000_000_000)
    plain = encode_batch(keys, values, **common)
    packed = encode_batch(keys, values, codec=Codec(name), **common)
    assert len(packed.data) < len(plain.data) / 3  # the repetitive values really were compressed
    batch = Batch(packed.data)
    assert batch.validate_crc() and batch.is_transactional
    assert batch.compression_type == CODECS[name].attribute != 0
    got = [(r.key, r.value, list(r.headers)) for r in batch]
    want = [(r.key, r.value, list(r.headers)) for r in Batch(plain.data)]
    assert got == want and len(got) == n


def test_compression_levels_are_applied_and_checked() -> None:
    from airflow_provider_kafka_eos.kafka.errors import ConfigError
    from airflow_provider_kafka_eos.kafka.producers.compression import Codec, codec_for

    values = pa.array([bytes(random.Random(i).choices(b"abcdefgh", k=4000)) for i in range(50)], pa.binary())
    common = dict(producer_id=9, producer_epoch=1, base_sequence=0, now_ms=1)
    fast = encode_batch(None, values, codec=Codec("zstd", 1), **common)
    strong = encode_batch(None, values, codec=Codec("zstd", 19), **common)
    assert len(strong.data) < len(fast.data)
    assert codec_for("ZSTD", "19", where="w") == Codec("zstd", 19)
    for name, level, fragment in [("gzip", 10, "0-9"), ("lz4", 13, "0-12"), ("zstd", 0, "1-22"),
                                  ("snappy", 3, "takes no level"), ("brotli", None, "not a Kafka codec"),
                                  ("gzip", "high", "must be an integer")]:
        with pytest.raises(ConfigError, match=fragment) as info:
            codec_for(name, level, where="connection (producer path 'arrow')")
        assert "compression." in str(info.value) and "producer path 'arrow'" in str(info.value)
