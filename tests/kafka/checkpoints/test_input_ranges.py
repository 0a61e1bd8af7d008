"""The Kafka input range planner (kafka/checkpoints/input_ranges.py) and its manifest form (schema 4).

Pure logic: the Kafka facts are a value (what kafka/admin/input_offsets.py reads; its broker test is
tests/kafka/checkpoints/test_kafka_input.py), the store a temp folder.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass, field

import pytest
from counting_store import CountingStore

from airflow_provider_kafka_eos.kafka.checkpoints.identity import InputRecord
from airflow_provider_kafka_eos.kafka.checkpoints.input_ranges import (
    plan_checkpoint_input,
    plan_input,
    record_plan,
)
from airflow_provider_kafka_eos.kafka.checkpoints.kafka_input import KafkaInput, PartitionRange, StartChoice
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    Manifest,
    ManifestStatus,
    read_manifest,
    write_manifest,
)
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
from airflow_provider_kafka_eos.kafka.errors import (
    CheckpointConflictError,
    InputCheckpointPendingError,
    InputRangeLostError,
    ManifestError,
    UsageError,
)
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition


@dataclass
class Facts:
    stable: dict
    earliest: dict = field(default_factory=dict)
    missing_topics: frozenset = frozenset()
    at_start: dict = field(default_factory=dict)


def _kafka(ranges, topics=("in",), based_on=None) -> KafkaInput:
    parts = tuple(PartitionRange("in", p, a, b) for p, a, b in ranges)
    return KafkaInput(tuple(topics), "g", "earliest", parts, based_on, 1)


def _manifest(checkpoint_id, status, kafka=None) -> Manifest:
    c = Committable(f"p-{checkpoint_id}-0", 4001, 0, (TopicPartition("out", 0),), 3, 1, 1, 60_000, 2, 5)
    return Manifest("p", checkpoint_id, "p", "INCREMENTING", "out", status, [c], 1, 2,
                    input=InputRecord(f"kafka:{checkpoint_id}", None, kafka) if kafka else None)


def _plan(manifests, facts, checkpoint_id=10, **kw):
    kw.setdefault("start", "earliest")
    return plan_input(pipeline_id="p", checkpoint_id=checkpoint_id, manifests=manifests, topics=["in"],
                      group="g", facts=facts, now_ms=5, **kw)


def test_first_checkpoint_starts_where_the_user_chose_and_ends_at_the_last_stable_offset():
    facts = Facts(stable={("in", 0): 50, ("in", 1): 7}, earliest={("in", 0): 3, ("in", 1): 0})
    plan = _plan([], facts)
    assert [r.to_dict() for r in plan.ranges] == [{"topic": "in", "partition": 0, "from": 3, "to": 50},
                                                  {"topic": "in", "partition": 1, "from": 0, "to": 7}]
    assert plan.based_on is None and plan.start == "earliest"
    grouped = _plan([], Facts(stable={("in", 0): 50}, at_start={("in", 0): 20}), start="group")
    assert grouped.ranges == (PartitionRange("in", 0, 20, 50),)
    with pytest.raises(UsageError, match=r"group 'g' has no committed offset for in-1"):
        _plan([], Facts(stable={("in", 0): 5, ("in", 1): 5}, at_start={("in", 0): 1}), start="group")


def test_from_is_the_last_committed_to_and_a_given_up_checkpoint_moves_nothing():
    manifests = [
        _manifest(1, ManifestStatus.COMMITTED, _kafka([(0, 0, 10), (1, 0, 4)])),
        _manifest(2, ManifestStatus.ABORTED, _kafka([(0, 10, 30), (1, 4, 9)], based_on=1)),
    ]
    facts = Facts(stable={("in", 0): 40, ("in", 1): 9, ("in", 2): 6}, earliest={("in", 2): 2})
    plan = _plan(manifests, facts)
    assert plan.ranges == (PartitionRange("in", 0, 10, 40), PartitionRange("in", 1, 4, 9),
                           PartitionRange("in", 2, 2, 6))  # partition 2 is new: from earliest
    assert plan.based_on == 1


def test_an_older_prepared_or_unvoted_checkpoint_refuses_a_newer_one_by_name():
    manifests = [_manifest(1, ManifestStatus.COMMITTED, _kafka([(0, 0, 10)])),
                 _manifest(2, ManifestStatus.PREPARED, _kafka([(0, 10, 20)], based_on=1))]
    facts = Facts(stable={("in", 0): 40})
    with pytest.raises(InputCheckpointPendingError, match=r"older checkpoint 2 .* still PREPARED"):
        _plan(manifests, facts)
    with pytest.raises(InputCheckpointPendingError, match=r"checkpoint 3 planned its input range but "
                                                           "wrote no"):
        _plan(manifests[:1], facts, planned_without_manifest=[3])
    with pytest.raises(InputCheckpointPendingError, match="already COMMITTED the input after it"):
        _plan([_manifest(20, ManifestStatus.COMMITTED, _kafka([(0, 0, 10)]))], facts)


def test_a_range_fallen_out_of_retention_or_a_deleted_topic_is_named_unless_skipping_is_chosen():
    manifests = [_manifest(1, ManifestStatus.COMMITTED, _kafka([(0, 0, 10), (1, 0, 4)]))]
    facts = Facts(stable={("in", 0): 40, ("in", 1): 9}, earliest={("in", 0): 25, ("in", 1): 0})
    with pytest.raises(InputRangeLostError, match=r"in-0 \[10, 25\): retention removed offsets 10..24"):
        _plan(manifests, facts)
    plan = _plan(manifests, facts, skip_lost_ranges=True)
    assert plan.ranges[0] == PartitionRange("in", 0, 25, 40)
    assert [s.to_dict()["from"] for s in plan.skipped] == [10] and plan.skipped[0].end == 25
    gone = Facts(stable={}, missing_topics=frozenset({"in"}))
    with pytest.raises(InputRangeLostError, match=r"in-0 \[10, \?\): topic in no longer exists"):
        _plan(manifests, gone)
    with pytest.raises(UsageError, match=r"input topic.s. in do not exist"):
        _plan([], gone)


def test_start_choice_is_explicit_and_refused_by_name():
    assert StartChoice.parse("timestamp:1767225600000") == StartChoice("timestamp", 1767225600000)
    for bad in ("", "newest", "timestamp:", "timestamp:x", "earliest:1"):
        with pytest.raises(UsageError, match="input_start="):
            StartChoice.parse(bad)


def test_schema_4_round_trips_the_ranges_and_refuses_a_bad_range_by_name(tmp_path):
    kafka = _kafka([(0, 3, 9)])
    uri = f"{tmp_path}/p/checkpoint-000000000001.json"
    write_manifest(uri, _manifest(1, ManifestStatus.PREPARED, kafka))
    on_disk = json.loads(pathlib.Path(uri).read_text())
    assert on_disk["schema_version"] == 4
    assert on_disk["input"]["kafka"]["ranges"] == [{"topic": "in", "partition": 0, "from": 3, "to": 9}]
    assert read_manifest(uri).input.kafka == kafka
    bad = [{"topic": "in", "partition": 0, "from": 9, "to": 3}]
    on_disk["input"]["kafka"] = dict(kafka.to_dict(), ranges=bad)
    pathlib.Path(uri).write_text(json.dumps(on_disk))
    with pytest.raises(ManifestError, match=r"input.kafka.ranges\[0\]"):
        read_manifest(uri)


def test_the_plan_is_recorded_before_reading_and_a_retry_gets_the_first_plan_back(tmp_path):
    store = ManifestStore(str(tmp_path))
    asked = []

    def facts_for(start):
        asked.append(start)
        return Facts(stable={("in", 0): 10 * len(asked)})

    def plan(checkpoint_id):
        return plan_checkpoint_input(store, pipeline_id="p", checkpoint_id=checkpoint_id, facts_for=facts_for,
                                     topics=["in"], group="g", start="earliest")

    first = plan(1)
    again = plan(1)
    assert again == first and first.ranges[0].end == 10 and len(asked) == 1
    other = KafkaInput(("other",), "g", "earliest", (), None, 1)
    with pytest.raises(CheckpointConflictError, match="planned topics in with group 'g' first"):
        record_plan(store.base_uri, "p", 1, other)
    with pytest.raises(InputCheckpointPendingError, match="checkpoint 1 planned its input range"):
        plan(2)


def test_the_spark_source_gets_exactly_the_range_and_the_connection_or_a_refusal_by_key():
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from airflow_provider_kafka_eos.kafka.errors import ConfigError
    from airflow_provider_kafka_eos.spark.kafka_source import source_options

    ranges = (PartitionRange("a", 0, 5, 9), PartitionRange("b", 1, 0, 0))
    plan = KafkaInput(("a", "b"), "g", "earliest", ranges)
    starting, ending = plan.spark_offsets()
    assert json.loads(starting) == {"a": {"0": 5}, "b": {"1": 0}}
    assert json.loads(ending) == {"a": {"0": 9}, "b": {"1": 0}}
    tls = KafkaClientConfig.from_mapping({"bootstrap.servers": "b:9093", "security.protocol": "SSL",
                                          "ssl.ca.location": "/ca.pem", "linger.ms": 5})
    assert source_options(tls) == {"kafka.bootstrap.servers": "b:9093", "kafka.security.protocol": "SSL",
                                   "kafka.ssl.truststore.type": "PEM",
                                   "kafka.ssl.truststore.location": "/ca.pem"}
    sasl = KafkaClientConfig.from_mapping({"bootstrap.servers": "b:9093", "security.protocol": "SASL_SSL",
                                           "sasl.mechanisms": "PLAIN", "sasl.username": "u",
                                           "sasl.password": "pw"})
    with pytest.raises(ConfigError, match=r"key 'sasl\.mechanisms' cannot be passed to Spark's") as err:
        source_options(sasl)
    assert "pw" not in str(err.value)


def test_two_checkpoints_planning_from_one_point_one_claims_it_and_a_given_up_claim_is_taken_over(tmp_path):
    """Without the claim a newer run planning first (or two at once) left the older one free to plan
    the same range: both would have read it and written it twice."""
    from airflow_provider_kafka_eos.kafka.checkpoints.input_ranges import basis_uri, claim_basis, read_plan

    store = ManifestStore(str(tmp_path))

    def plan(checkpoint_id):
        return plan_checkpoint_input(store, pipeline_id="p", checkpoint_id=checkpoint_id,
                                     facts_for=lambda start: Facts(stable={("in", 0): 10}),
                                     topics=["in"], group="g", start="earliest")

    plan(2)  # the newer run planned first
    with pytest.raises(InputCheckpointPendingError, match="checkpoint 2 already reads on from the pipeline"):
        plan(1)
    assert read_plan(store.base_uri, "p", 1) is None  # refused before its plan was stored
    assert json.loads(pathlib.Path(basis_uri(store.base_uri, "p", None)).read_text()) == {"checkpoint_id": 2}
    # Checkpoint 2 given up (ABORTED): its range is read again, by whoever plans from that point next.
    claim_basis(store.base_uri, "p", 3, None, [_manifest(2, ManifestStatus.ABORTED, _kafka([(0, 0, 10)]))])
    assert json.loads(pathlib.Path(basis_uri(store.base_uri, "p", None)).read_text()) == {"checkpoint_id": 3}
    claim_basis(store.base_uri, "p", 3, None, [])  # a retry of the holder passes
    with pytest.raises(InputCheckpointPendingError, match="checkpoint 3 already reads on"):
        claim_basis(store.base_uri, "p", 4, None,
                    [_manifest(3, ManifestStatus.PREPARED, _kafka([(0, 0, 10)]))])


def test_sparks_data_loss_error_becomes_input_range_lost_naming_the_planned_range():
    """The texts are Spark's own (kafka-error-conditions.json of spark-sql-kafka 4.x, and 3.x's
    "Cannot fetch offset"); the real error, read from Kafka 4.4 after DeleteRecords, is proven by
    tests/system/faults/test_kafka_input_data_loss.py."""
    from airflow_provider_kafka_eos.kafka.errors import InputRangeLostError
    from airflow_provider_kafka_eos.spark.kafka_source import data_loss_error, input_loss_translated

    plan = KafkaInput(("in-12",), "g", "earliest", (PartitionRange("in-12", 0, 5, 40),
                                                    PartitionRange("in-12", 1, 0, 7)), based_on=3)
    spark4 = ("Job aborted due to stage failure: Task 0 in stage 1.0 failed 3 times, most recent failure: "
              "org.apache.spark.SparkIllegalStateException: "
              "[KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE] Some data may have been lost because they are "
              "not available in Kafka any more; ... Reason: Could "
              "not read records in offset [5, 40) for topic partition in-12-0 with consumer group "
              "spark-kafka-relation-1-executor. SQLSTATE: 22000")
    spark3 = ("java.lang.IllegalStateException: Cannot fetch offset 5 (GroupId: spark-kafka-relation-1, "
              "TopicPartition: in-12-0). Some data may have been lost because they are not available")
    cases = ((spark4, "offsets [5, 40) could not be read"), (spark3, "offset 5 could not be fetched"))
    for text, what in cases:
        err = data_loss_error(RuntimeError(text), plan, pipeline_id="p", checkpoint_id=9, base_uri="/m")
        assert isinstance(err, InputRangeLostError)
        assert f"in-12-0 [5, 40): {what}" in str(err) and "in-12-1" not in str(err)
        assert "/m/p/_inputs/kafka-checkpoint-000000000009.json" in str(err)
        assert "/m/p/_inputs/kafka-after-000000000003.json" in str(err)
        assert "lost-input-ranges" in str(err)
    assert data_loss_error(RuntimeError("Task failed: OutOfMemoryError"), plan, pipeline_id="p",
                           checkpoint_id=9, base_uri="/m") is None
    translated = input_loss_translated(plan, pipeline_id="p", checkpoint_id=9, base_uri="/m")
    with pytest.raises(InputRangeLostError, match=r"in-12-0 \[5, 40\)"), translated:
        raise RuntimeError(spark4)
    untouched = input_loss_translated(plan, pipeline_id="p", checkpoint_id=9, base_uri="/m")
    with pytest.raises(ValueError, match="unrelated"), untouched:  # any other failure is not touched
        raise ValueError("unrelated")


def test_the_plan_lists_the_pipeline_once_and_plans_from_the_settled_listing():
    """Issue 36: settling and planning read one listing; the plan starts after what settling
    committed (here checkpoint 2, PREPARED in the listing, settled to COMMITTED)."""
    import dataclasses

    base = CountingStore.fresh_base()
    store = ManifestStore(base)
    write_manifest(f"{base}/p/checkpoint-000000000001.json",
                   _manifest(1, ManifestStatus.COMMITTED, _kafka([(0, 0, 10)])))
    write_manifest(f"{base}/p/checkpoint-000000000002.json",
                   _manifest(2, ManifestStatus.PREPARED, _kafka([(0, 10, 20)], based_on=1)))
    seen = []

    def settle(listing):
        seen.append(listing)
        return [(uri, dataclasses.replace(m, status=ManifestStatus.COMMITTED)) for uri, m in listing]

    try:
        CountingStore.listings.clear()
        plan = plan_checkpoint_input(store, pipeline_id="p", checkpoint_id=3, settle=settle,
                                     facts_for=lambda start: Facts(stable={("in", 0): 40}),
                                     topics=["in"], group="g", start="earliest")
        assert CountingStore.listed(base, "p") == 1, dict(CountingStore.listings)
        assert [m.checkpoint_id for _, m in seen[0]] == [1, 2]
        assert plan.ranges == (PartitionRange("in", 0, 20, 40),) and plan.based_on == 2
    finally:
        CountingStore().rm(base, recursive=True)
