"""Record placement: rows without a partition column land where the Java client would put them.

The Java client's default partitioner puts a keyed record in ``toPositive(murmur2(key)) %
partitions``. The expected hashes below are kafka-clients' own test vectors
(``UtilsTest.testMurmur2``, data, not code); the expected partition is computed from those
constants, not from our implementation, and must equal what ``kafka/producers/partitioner.py`` computes
and where the writer really put each key, as a read_committed consumer sees it, through both
producer paths: librdkafka (``partitioner=murmur2_random``) and the Arrow producer
(``kafka/producers/partitioner.py``).
"""

from __future__ import annotations

from collections import Counter

import pytest

from airflow_provider_kafka_eos.kafka.producers.librdkafka import DEFAULT_PARTITIONER, producer_settings
from airflow_provider_kafka_eos.kafka.producers.partitioner import partition_for_key
from airflow_provider_kafka_eos.spark.writer import write_exactly_once
from kafka_eos_testing.spark import commit_manifest
from kafka_eos_testing.verify import assert_exactly_once, count_keys, key_placement

# kafka-clients UtilsTest.testMurmur2: key -> Utils.murmur2(key) (a signed 32-bit int).
JAVA_MURMUR2 = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}
TOPIC_PARTITIONS = 7
# Null-keyed records stick to one partition per task for a while on both paths (below), so their
# spread comes from the tasks: each starts at its own random partition.
TASKS = 12


def _java_partition(murmur2_hash: int, partitions: int) -> int:
    """Java's BuiltInPartitioner.partitionForKey: Utils.toPositive(hash) % numPartitions."""
    return (murmur2_hash & 0x7FFFFFFF) % partitions


def test_the_librdkafka_producer_defaults_to_java_murmur2_and_keeps_an_explicit_choice():
    assert DEFAULT_PARTITIONER == "murmur2_random"
    assert producer_settings({}, "t-0-1", 60_000)["partitioner"] == "murmur2_random"
    assert producer_settings({"partitioner": "consistent_random"}, "t-0-1", 60_000)["partitioner"] == (
        "consistent_random"
    )


@pytest.mark.spark
@pytest.mark.broker
@pytest.mark.parametrize("producer", ["librdkafka", "arrow"])
def test_writer_places_keys_where_the_java_client_would(spark, kafka_broker, tmp_path, unique_name, producer):
    from confluent_kafka.admin import AdminClient, NewTopic

    prefix, topic = unique_name("placement"), unique_name("placed")
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(topic, TOPIC_PARTITIONS, 1)])[topic].result(30)
    del admin
    keys = [*JAVA_MURMUR2, *(f"user-{i}" for i in range(300))]
    null_keyed = 30
    rows = [(k, f"v-{k}") for k in keys] + [(None, f"null-{i}") for i in range(null_keyed)]
    df = spark.createDataFrame(rows, "key string, value string").repartition(TASKS)

    manifest = write_exactly_once(df, topic=topic, kafka_config=kafka_broker.client_config(),
                                  transactional_id_prefix=prefix, checkpoint_id=1,
                                  manifest_base_uri=str(tmp_path), producer=producer)
    commit_manifest(kafka_broker.bootstrap, manifest)

    placement = key_placement(kafka_broker.bootstrap, topic)
    where = {key: partition for (key, partition) in placement if key is not None}
    for key, java_hash in JAVA_MURMUR2.items():
        expected = _java_partition(java_hash, TOPIC_PARTITIONS)
        assert partition_for_key(key.encode(), TOPIC_PARTITIONS) == expected, key
        assert where[key.encode()] == expected, key
    for key in keys:
        assert where[key.encode()] == partition_for_key(key.encode(), TOPIC_PARTITIONS), key
    assert len(set(where.values())) == TOPIC_PARTITIONS  # 306 keys reach every partition
    # Null keys have no hash. Both paths are sticky, as Java's partitioner is: librdkafka keeps a
    # random partition for sticky.partitioning.linger.ms (10 ms), longer than a small task takes to
    # produce its records; the Arrow producer keeps one per batch. The 30 null-keyed records are
    # spread over the 12 tasks round robin, each task starting at its own random partition: all in
    # one partition has p = 7**-11 (with 3 tasks, 1 in 49: the apache pass once saw it).
    null_partitions = Counter(p for (k, p), n in placement.items() if k is None for _ in range(n))
    assert sum(null_partitions.values()) == null_keyed
    assert len(null_partitions) > 1, null_partitions

    counts = count_keys(kafka_broker.bootstrap, topic)
    assert counts.pop(b"") == null_keyed  # count_keys files null keys under b""
    assert_exactly_once(counts, keys)


@pytest.mark.spark
@pytest.mark.broker
def test_arrow_null_keys_spread_across_tasks_like_javas_sticky_partitioner(spark, kafka_broker, tmp_path,
                                                                           unique_name):
    """Twelve tasks, each with about three batches of null-keyed records (batch.size = 50 records):
    each task fills a batch on one partition, then moves to the next, from its own random start.
    Every task starting at partition 0 (the old behaviour) would leave partitions 3 and 4 empty;
    random starts leave one empty with probability 5 x (2/5)**12 < 1e-4."""
    from confluent_kafka.admin import AdminClient, NewTopic

    prefix, topic = unique_name("sticky"), unique_name("sticky-out")
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(topic, 5, 1)])[topic].result(30)
    del admin
    n, tasks = 1800, 12
    df = spark.createDataFrame([(None, f"n-{i:08d}") for i in range(n)], "key string, value string")
    config = {**kafka_broker.client_config(), "batch.size": 50 * (10 + 12)}  # 10-byte values + framing
    manifest = write_exactly_once(df.repartition(tasks), topic=topic, kafka_config=config,
                                  transactional_id_prefix=prefix, checkpoint_id=1,
                                  manifest_base_uri=str(tmp_path), producer="arrow")
    assert len(manifest.committables) == tasks
    commit_manifest(kafka_broker.bootstrap, manifest)

    per_partition = Counter()
    for (key, partition), count in key_placement(kafka_broker.bootstrap, topic).items():
        assert key is None
        per_partition[partition] += count
    assert sum(per_partition.values()) == n
    assert all(per_partition[p] >= 50 for p in range(5)), per_partition  # at least a batch each
    assert count_keys(kafka_broker.bootstrap, topic) == {b"": n}
