"""Helpers of the Kafka-input tests (Kafka -> Spark -> Kafka) in more than one folder.

``tests/system/faults`` runs the job under spark-submit on one node; ``tests/system/cluster`` runs
it in-process on three. Both produce the same kind of input (committed and aborted transactional
batches, plain records), read the consumer group's committed offsets the same way and commit a
checkpoint as the commit task does, waiting for its markers before anything is counted.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from airflow_provider_kafka_eos.kafka.admin.input_offsets import group_offsets
from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import read_manifest
from airflow_provider_kafka_eos.kafka.errors import KafkaEosError
from kafka_eos_testing.spark import job_arguments
from kafka_eos_testing.transactions import produce_transaction, wait_until_committed

PARTITIONS = 3
# The user's callable of these tests: every input record forwarded as it is.
APPLICATION = f"{Path(__file__).resolve().with_name('kafka_input_app.py')}:build_dataframe"


@functools.cache
def connector_jars() -> tuple[str, ...]:
    """Spark's Kafka connector (spark-sql-kafka of the running PySpark) and its dependencies:
    fetched once with Maven into ``~/.cache/kafka-eos``, as the benchmarks and the demo do."""
    import pyspark

    from benchmarks.bench_spark_vs_sink import sink_jars

    version = pyspark.__version__
    return tuple(sink_jars(version, "2.12" if version.startswith("3.") else "2.13"))


def produce_round(bootstrap: str, topic: str, tag: str, partitions: int = PARTITIONS) -> list[str]:
    """Committed and aborted transactional batches and plain records, spread over ``partitions``;
    the keys that must arrive (the aborted ones, ``<tag>-aborted<i>``, never may)."""
    committed = [f"{tag}-t{i}" for i in range(15)]
    produce_transaction(bootstrap, f"{topic}-{tag}-in", topic, [k.encode() for k in committed], commit=True,
                        partitions=range(partitions))
    aborting = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-{tag}-ab"})
    aborting.init_transactions(30)
    aborting.begin_transaction()
    for i in range(8):
        aborting.produce(topic, key=f"{tag}-aborted{i}".encode(), value=b"x", partition=i % partitions)
    assert aborting.flush(30) == 0
    aborting.abort_transaction(30)
    plain = [f"{tag}-p{i}" for i in range(10)]
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, key in enumerate(plain):
        producer.produce(topic, key=key.encode(), value=b"p", partition=i % partitions)
    assert producer.flush(30) == 0
    return committed + plain


def kafka_input_job_arguments(*, prefix: str, topic_in: str, topic_out: str, group: str,
                              manifest_base: str | Path, checkpoint: int,
                              application: str = APPLICATION) -> list[str]:
    """The job's command line for one checkpoint of a Kafka-input pipeline (pipeline id = prefix),
    its first checkpoint starting at the earliest offsets."""
    args = job_arguments(prefix=prefix, topic=topic_out, checkpoint=checkpoint, manifest_base=manifest_base,
                         application=application, params={})
    return [*args, "--input-topics", topic_in, "--input-group", group, "--input-start", "earliest"]


def topic_group_offsets(admin: Any, group: str, topic: str, partitions: int = PARTITIONS) -> dict:
    """The group's committed offsets of ``topic``'s partitions (OffsetFetch)."""
    return group_offsets(admin, group, [(topic, p) for p in range(partitions)])


# What OffsetFetch answers while a group's coordinator is not ready: a fresh cluster still creating
# __consumer_offsets, or a coordinator that moved after its node died. Kafka's own clients retry these.
COORDINATOR_NOT_READY = ("CoordinatorNotAvailable", "NotCoordinator", "CoordinatorLoadInProgress")


def settled_group_offsets(admin: Any, group: str, topic: str, partitions: int = PARTITIONS,
                          timeout_s: float = 60.0) -> dict:
    """:func:`topic_group_offsets`, asked again (with a deadline) while the group's coordinator
    answers that it is not ready; any other error is raised at once."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return topic_group_offsets(admin, group, topic, partitions)
        except KafkaEosError as exc:
            if not any(name in str(exc) for name in COORDINATOR_NOT_READY) or time.monotonic() > deadline:
                raise
        time.sleep(0.5)  # polling interval of a deadline-bounded wait


def commit_and_wait(admin: Any, uri: str, timeout_s: float = 30.0) -> Any:
    """Commit the checkpoint as the commit task does, then wait until every transaction it lists
    (the offsets transaction too) is CompleteCommit, so the markers are written; its manifest."""
    manifest = read_manifest(uri)
    commit_checkpoint(admin, uri, committed_by="test")
    wait_until_committed(admin, [c.transactional_id for c in manifest.committables], timeout_s=timeout_s)
    return manifest
