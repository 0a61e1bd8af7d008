"""A Kafka-input pipeline (Kafka -> Spark -> Kafka) through a node's death on a real 3-node Kafka 4.4.

One node is given three of the pipeline's roles at once: it leads an input partition, it
coordinates the pipeline's consumer group (the group's committed offsets live in its
``__consumer_offsets`` partition) and it coordinates the offsets transaction ``<prefix>-offsets``
(the pipeline id and the group are picked by FindCoordinator lookups so that they land there).
It is killed (``kill -9``) after checkpoint 1's commit committed the output's transactions and
before the offsets transaction: the commit's retry must find the offsets transaction on its new
coordinator and have its markers written to the group's new coordinator. Checkpoint 2 is then
planned and read while the node is still dead (the last stable offsets and Spark's Kafka source
from the partitions' new leaders), prepared, and committed after the node came back.

Each step ends with a read_committed count of the output (every input record of a COMMITTED
checkpoint exactly once, aborted input never) and the group's committed offsets equal to the last
COMMITTED checkpoint's ``to``. The job runs in this process (``spark/job.py``'s ``run``, in the
session's local SparkSession with Spark's Kafka connector) rather than under spark-submit: the CI
time of two JVM starts. The single-node faults of the same pipeline (a task killed mid-read, the
job killed after its manifest, a checkpoint given up) are ``tests/system/faults/test_kafka_input_job.py``.
"""

from __future__ import annotations

import json

import pytest
from cluster_helpers import (
    coordinators,
    create_topic,
    group_coordinators,
    healthy,
    leaders,
    settled_count,
    transaction_admin,
)
from kafka_input_support import (
    commit_and_wait,
    kafka_input_job_arguments,
    produce_round,
    settled_group_offsets,
)

from airflow_provider_kafka_eos.kafka.checkpoints.input_ranges import offsets_transactional_id
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest
from airflow_provider_kafka_eos.spark import job as eos_job
from kafka_eos_testing.verify import assert_exactly_once

pytestmark = [pytest.mark.kafka_cluster, pytest.mark.spark]

# A commit that meets a dead coordinator waits for the controller to fence it (broker session 3 s)
# and for the survivors to load its transaction-log and offsets partitions.
MOVE_TIMEOUT_S = 120


def _one_node_for_all(cluster, topic_in: str, base: str, group_base: str) -> tuple[int, str, str]:
    """A node that leads an input partition and coordinates a candidate pipeline's offsets transaction
    and a candidate group; that pipeline id (= transactional-id prefix) and group.

    Chosen from where leadership is now, not fixed: earlier tests of the session kill nodes, and the
    internal topics' leaders stay where they moved (node 1 may lead none of them for a while).
    """
    candidates = {offsets_transactional_id(f"{base}{i}"): f"{base}{i}" for i in range(24)}
    offsets = coordinators(cluster, list(candidates))
    groups = group_coordinators(cluster, [f"{group_base}{i}" for i in range(24)])
    led = set(leaders(cluster, topic_in).values())
    for node in sorted(led):
        tids = [t for t, n in offsets.items() if n == node]
        named = [g for g, n in groups.items() if n == node]
        if tids and named:
            return node, candidates[tids[0]], named[0]
    raise AssertionError(f"no node leads an input partition ({sorted(led)}) and coordinates one of 24 "
                         f"candidate offsets ids ({offsets}) and groups ({groups})")


def test_kafka_input_checkpoint_survives_the_death_of_its_leader_and_coordinators(
        cluster, spark, tmp_path, unique_name, monkeypatch):
    topic_in, topic_out = unique_name("k2k-in"), unique_name("k2k-out")
    create_topic(cluster, topic_in)
    create_topic(cluster, topic_out)
    node, prefix, group = _one_node_for_all(cluster, topic_in, unique_name("k2k"), unique_name("k2k-group"))
    # The job reads its Kafka config as under spark-submit (the variable, never argv).
    monkeypatch.delenv(eos_job.CONFIG_FILE_ENV, raising=False)
    monkeypatch.setenv(eos_job.CONFIG_ENV, json.dumps(cluster.client_config()))

    def prepared(checkpoint: int):
        args = kafka_input_job_arguments(prefix=prefix, topic_in=topic_in, topic_out=topic_out, group=group,
                                         manifest_base=tmp_path / "manifests", checkpoint=checkpoint)
        manifest = read_manifest(eos_job.run(eos_job.build_arg_parser().parse_args(args)))
        assert manifest.status is ManifestStatus.PREPARED
        return manifest

    expected = produce_round(cluster.bootstrap, topic_in, "a")
    first = prepared(1)
    kafka1 = first.input.kafka
    assert kafka1.offsets_transactional_id == offsets_transactional_id(prefix)
    with transaction_admin(cluster) as admin:
        admin.commit(first.output_committables)  # ... and the commit task is killed here, with the node
    cluster.kill_node(node)
    with transaction_admin(cluster) as admin:  # the commit's retry, on the two nodes left
        commit_and_wait(admin, first.uri, timeout_s=MOVE_TIMEOUT_S)
        assert read_manifest(first.uri).status is ManifestStatus.COMMITTED
        assert settled_group_offsets(admin, group, topic_in, timeout_s=MOVE_TIMEOUT_S) == kafka1.end_offsets()
    assert node not in coordinators(cluster, [kafka1.offsets_transactional_id]).values()
    assert node not in group_coordinators(cluster, [group]).values()
    assert_exactly_once(settled_count(cluster, topic_out), expected)

    # Checkpoint 2 plans and reads while the node is dead: from = checkpoint 1's to.
    round_b = produce_round(cluster.bootstrap, topic_in, "b")
    second = prepared(2)
    kafka2 = second.input.kafka
    assert kafka2.based_on == 1
    assert {(r.topic, r.partition): r.start for r in kafka2.ranges} == kafka1.end_offsets()
    assert node not in leaders(cluster, topic_in).values()
    healthy(cluster)  # the node restarts while checkpoint 2 is PREPARED
    with transaction_admin(cluster) as admin:
        commit_and_wait(admin, second.uri, timeout_s=MOVE_TIMEOUT_S)
        assert settled_group_offsets(admin, group, topic_in) == kafka2.end_offsets()
    counts = settled_count(cluster, topic_out)
    assert_exactly_once(counts, expected + round_b)
    assert not [k for k in counts if b"aborted" in k]
