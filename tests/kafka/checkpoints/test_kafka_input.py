"""Kafka as the input, the Kafka half without Spark: ranges, the offsets transaction, commit and give-up.

Against the embedded broker, or real Kafka 4.4 (``KAFKA_EOS_TEST_KAFKA=apache``). The Spark job's
read of a range is played here by a read_committed consumer assigned to exactly that range (the
Spark test, tests/spark/test_kafka_input_job.py, reads it with Spark's own Kafka source). One topic
pair and one TransactionAdmin per module; each test ends with a read_committed count of the output
and the group's committed offsets.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from ops_support import client_config, create_topic, keys_for, unique

from airflow_provider_kafka_eos.kafka.admin.input_offsets import group_offsets, read_input_offsets
from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.abort_strategies import AbortStrategy
from airflow_provider_kafka_eos.kafka.checkpoints.identity import InputRecord
from airflow_provider_kafka_eos.kafka.checkpoints.input_ranges import (
    offsets_transactional_id,
    plan_checkpoint_input,
    read_plan,
)
from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import abort_checkpoint, commit_checkpoint
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import Manifest, ManifestStatus, write_manifest
from airflow_provider_kafka_eos.kafka.checkpoints.restore import restore_pipeline
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
from airflow_provider_kafka_eos.kafka.errors import InputCheckpointPendingError, InputRangeLostError
from airflow_provider_kafka_eos.kafka.producers.librdkafka import TransactionProtocol
from airflow_provider_kafka_eos.kafka.producers.offsets_transaction import prepare_group_offsets
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable
from kafka_eos_testing.transactions import produce_transaction, wait_until_committed
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def admin(kafka_broker):
    with TransactionAdmin(client_config(kafka_broker.bootstrap)) as txn_admin:
        yield txn_admin


def _produce_input(bootstrap: str, topic: str, tag: str) -> tuple[list[bytes], list[bytes]]:
    """Committed transactional, aborted transactional and plain records; (expected keys, aborted keys)."""
    committed = keys_for(f"{tag}-txn", 12)
    produce_transaction(bootstrap, unique(f"{tag}-in"), topic, committed, commit=True, partitions=(0, 1, 2))
    aborted = keys_for(f"{tag}-aborted", 6)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique(f"{tag}-ab")})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i, key in enumerate(aborted):
        producer.produce(topic, key=key, value=b"x", partition=i % 3)
    assert producer.flush(30) == 0
    producer.abort_transaction(30)
    plain = keys_for(f"{tag}-plain", 9)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, key in enumerate(plain):
        producer.produce(topic, key=key, value=b"p", partition=i % 3)
    assert producer.flush(30) == 0
    return committed + plain, aborted


def _read_range(bootstrap: str, kafka_input) -> list[bytes]:
    """What the job reads: exactly [from, to) per partition, read_committed (the Spark source's role)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"),
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": True})
    wanted = {(r.topic, r.partition): r for r in kafka_input.ranges if not r.empty}
    consumer.assign([ConfluentPartition(t, p, r.start) for (t, p), r in wanted.items()])
    keys: list[bytes] = []
    done: set[tuple[str, int]] = set()
    deadline = time.monotonic() + 30
    try:
        while len(done) < len(wanted):
            assert time.monotonic() < deadline, f"range not read in time: {sorted(set(wanted) - done)}"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            key = (msg.topic(), msg.partition())
            if msg.error() is not None:  # partition EOF: everything up to the LSO was read
                position = consumer.position([ConfluentPartition(*key)])[0].offset
                if key in wanted and position >= wanted[key].end:
                    done.add(key)
                continue
            if msg.offset() < wanted[key].end:
                keys.append(msg.key())
            if msg.offset() + 1 >= wanted[key].end:
                done.add(key)
    finally:
        consumer.close()
    return keys


class Pipeline:
    """The driver's part of a Kafka-input checkpoint: plan, (read, write), prepare offsets, vote."""

    def __init__(self, bootstrap, admin, store, topic_in, topic_out, group):
        self.bootstrap, self.admin, self.store = bootstrap, admin, store
        self.topic_in, self.topic_out, self.group = topic_in, topic_out, group
        self.pipeline = unique("kin")
        self.prefix = self.pipeline

    def plan(self, checkpoint_id, start="earliest", **kwargs):
        return plan_checkpoint_input(
            self.store, pipeline_id=self.pipeline, checkpoint_id=checkpoint_id,
            facts_for=lambda s: read_input_offsets(self.admin, [self.topic_in], start=s, group=self.group),
            topics=[self.topic_in], group=self.group, start=start,
            offsets_transactional_id=offsets_transactional_id(self.prefix), **kwargs)

    def prepare(self, checkpoint_id, kafka_input) -> str:
        keys = _read_range(self.bootstrap, kafka_input)
        output_id = f"{self.prefix}-{checkpoint_id}-0"
        first = produce_transaction(self.bootstrap, output_id, self.topic_out, keys)
        offsets = prepare_group_offsets(
            offsets=kafka_input.end_offsets(), group=self.group,
            confluent_config={"bootstrap.servers": self.bootstrap},
            transactional_id=kafka_input.offsets_transactional_id, topic=self.topic_in,
            transaction_timeout_ms=60_000, protocol=TransactionProtocol.from_admin(self.admin),
            describe=self.admin.describe)
        output = self.admin.describe([output_id])[output_id]
        tv = TransactionProtocol.from_admin(self.admin)
        out = Committable(output_id, output.producer_id, output.producer_epoch, output.partitions, len(keys),
                          int(time.time() * 1000), output.start_time_ms, output.timeout_ms,
                          tv.transaction_version, tv.end_txn_version, first_offsets=first)
        now = int(time.time() * 1000)
        uri = self.store.uri(self.pipeline, checkpoint_id)
        record = InputRecord(f"kafka-{checkpoint_id}", None, kafka_input)
        write_manifest(uri, Manifest(self.pipeline, checkpoint_id, self.prefix, "INCREMENTING",
                                     self.topic_out, ManifestStatus.PREPARED, [out, offsets], now, now,
                                     input=record))
        return uri

    def group_offsets(self):
        parts = [(self.topic_in, p) for p in range(3)]
        return group_offsets(self.admin, self.group, parts)


def test_checkpoints_read_each_input_record_once_and_the_group_follows_the_committed_to(
        kafka_broker, admin, tmp_path):
    bootstrap = kafka_broker.bootstrap
    topic_in = create_topic(bootstrap, unique("kin-in"), partitions=3)
    topic_out = create_topic(bootstrap, unique("kin-out"), partitions=2)
    pipe = Pipeline(bootstrap, admin, ManifestStore(str(tmp_path)), topic_in, topic_out, unique("kin-group"))

    first, aborted = _produce_input(bootstrap, topic_in, "a")
    plan1 = pipe.plan(1)
    assert {r.start for r in plan1.ranges} == {0}
    uri1 = pipe.prepare(1, plan1)
    assert pipe.group_offsets() == {}  # prepared: neither output nor offsets visible yet
    with pytest.raises(InputCheckpointPendingError, match=r"older checkpoint 1 .* still PREPARED"):
        pipe.plan(2)
    commit_checkpoint(admin, uri1, committed_by="test")
    wait_until_committed(admin, [f"{pipe.prefix}-1-0", plan1.offsets_transactional_id])
    assert pipe.group_offsets() == plan1.end_offsets()
    assert_exactly_once(count_keys(bootstrap, topic_out), first)

    # Checkpoint 2 reads the next range, is given up: nothing visible, the group stays.
    second, aborted2 = _produce_input(bootstrap, topic_in, "b")
    plan2 = pipe.plan(2)
    assert plan2.based_on == 1
    ends = {(p, o) for (_, p), o in plan1.end_offsets().items()}
    assert {(r.partition, r.start) for r in plan2.ranges} == ends
    uri2 = pipe.prepare(2, plan2)
    abort_checkpoint(admin, uri2, aborted_by="test")
    assert pipe.group_offsets() == plan1.end_offsets()
    assert_exactly_once(count_keys(bootstrap, topic_out), first)

    # Checkpoint 3 reads checkpoint 2's range again (and whatever came since).
    third, _ = _produce_input(bootstrap, topic_in, "c")
    plan3 = pipe.plan(3)
    assert plan3.based_on == 1 and plan3.ranges[0].start == plan2.ranges[0].start
    uri3 = pipe.prepare(3, plan3)
    commit_checkpoint(admin, uri3, committed_by="test")
    wait_until_committed(admin, [f"{pipe.prefix}-3-0", plan3.offsets_transactional_id])
    assert pipe.group_offsets() == plan3.end_offsets()
    counts = count_keys(bootstrap, topic_out)
    assert_exactly_once(counts, first + second + third)
    assert not set(aborted + aborted2) & set(counts)


def test_the_range_ends_at_the_last_stable_offset_of_an_open_input_transaction(
        kafka_broker, admin, tmp_path):
    bootstrap = kafka_broker.bootstrap
    topic_in = create_topic(bootstrap, unique("kin-lso-in"), partitions=3)
    topic_out = create_topic(bootstrap, unique("kin-lso-out"), partitions=1)
    pipe = Pipeline(bootstrap, admin, ManifestStore(str(tmp_path)), topic_in, topic_out, unique("kin-g"))
    before, _ = _produce_input(bootstrap, topic_in, "d")
    lingering = unique("kin-linger")
    produce_transaction(bootstrap, lingering, topic_in, keys_for("open", 3), partitions=(0,))
    late = keys_for("late", 3)
    producer = Producer({"bootstrap.servers": bootstrap})
    for key in late:
        producer.produce(topic_in, key=key, value=b"l", partition=0)
    assert producer.flush(30) == 0
    try:
        plan = pipe.plan(1)
        (status,) = admin.lso_probe([(topic_in, 0)])
        assert plan.range_of(topic_in, 0).end == status.last_stable_offset < status.high_watermark
        uri = pipe.prepare(1, plan)
        commit_checkpoint(admin, uri, committed_by="test")
        wait_until_committed(admin, [f"{pipe.prefix}-1-0"])
        assert_exactly_once(count_keys(bootstrap, topic_out), before)  # nothing past the open transaction
        assert pipe.group_offsets() == plan.end_offsets()
    finally:
        admin.abort([lingering])


def _lost_range_refused_and_nothing_committed(pipe, admin, bootstrap, lose, match, *, topic_deleted=False):
    """Checkpoint 1 commits; ``lose()`` removes unread input; checkpoint 2 is refused by name.

    ``topic_deleted``: Kafka 4.4 removes a deleted topic's committed group offsets (asynchronously,
    seen in a clean-clone CI run); the embedded broker keeps them. Either way none may move past
    checkpoint 1's end."""
    first, _ = _produce_input(bootstrap, pipe.topic_in, "r")
    plan1 = pipe.plan(1)
    commit_checkpoint(admin, pipe.prepare(1, plan1), committed_by="test")
    wait_until_committed(admin, [f"{pipe.prefix}-1-0", plan1.offsets_transactional_id])
    _produce_input(bootstrap, pipe.topic_in, "s")
    lose()
    with pytest.raises(InputRangeLostError, match=match):
        pipe.plan(2)
    assert read_plan(pipe.store.base_uri, pipe.pipeline, 2) is None  # nothing planned, nothing read
    offsets = pipe.group_offsets()
    if topic_deleted:
        assert all(plan1.end_offsets()[tp] == offset for tp, offset in offsets.items()), offsets
    else:
        assert offsets == plan1.end_offsets()
    assert_exactly_once(count_keys(bootstrap, pipe.topic_out), first)
    return plan1


def test_retention_deleting_an_unread_range_is_a_named_error_and_skipping_it_is_recorded(
        kafka_broker, admin, tmp_path):
    if kafka_broker.embedded:
        pytest.skip("needs DeleteRecords (moving a partition's log start offset), which the embedded broker "
                    "does not implement; the deleted-topic test covers the refusal there")
    from kafka.structs import TopicPartition as KafkaTopicPartition

    bootstrap = kafka_broker.bootstrap
    topic_in = create_topic(bootstrap, unique("kin-ret-in"), partitions=3)
    topic_out = create_topic(bootstrap, unique("kin-ret-out"), partitions=1)
    pipe = Pipeline(bootstrap, admin, ManifestStore(str(tmp_path)), topic_in, topic_out, unique("kin-g"))
    cut: dict[str, int] = {}

    def lose():
        end = read_input_offsets(admin, [topic_in]).stable[(topic_in, 0)]
        cut["at"] = end - 1
        admin.wire.admin.delete_records({KafkaTopicPartition(topic_in, 0): end - 1})

    plan1 = _lost_range_refused_and_nothing_committed(
        pipe, admin, bootstrap, lose, rf"{topic_in}-0 \[\d+, \d+\): retention removed offsets")
    plan2 = pipe.plan(2, skip_lost_ranges=True)
    (skipped,) = plan2.skipped
    assert (skipped.partition, skipped.start, skipped.end) == (0, plan1.range_of(topic_in, 0).end, cut["at"])
    assert plan2.range_of(topic_in, 0).start == cut["at"]


def test_a_deleted_input_topic_is_a_named_error_and_nothing_is_committed(kafka_broker, admin, tmp_path):
    from confluent_kafka.admin import AdminClient

    bootstrap = kafka_broker.bootstrap
    topic_in = create_topic(bootstrap, unique("kin-del-in"), partitions=3)
    topic_out = create_topic(bootstrap, unique("kin-del-out"), partitions=1)
    pipe = Pipeline(bootstrap, admin, ManifestStore(str(tmp_path)), topic_in, topic_out, unique("kin-g"))

    def lose():
        client = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures resolve
        for future in client.delete_topics([topic_in], operation_timeout=20).values():
            future.result(timeout=30)
        deadline = time.monotonic() + 30
        while topic_in not in read_input_offsets(admin, [topic_in]).missing_topics:
            assert time.monotonic() < deadline, f"{topic_in} still listed 30 s after its deletion"
            time.sleep(0.2)

    _lost_range_refused_and_nothing_committed(
        pipe, admin, bootstrap, lose, rf"{topic_in}-0 \[\d+, \?\): topic {topic_in} no longer exists",
        topic_deleted=True)


def test_restore_fences_a_dead_attempts_offsets_transaction_and_never_a_prepared_one(
        kafka_broker, admin, tmp_path):
    """The offsets id is not generated by the prefix (LISTING skips it): restore fences it by rule 5."""
    bootstrap = kafka_broker.bootstrap
    topic_in = create_topic(bootstrap, unique("kin-fence-in"), partitions=3)
    topic_out = create_topic(bootstrap, unique("kin-fence-out"), partitions=1)
    pipe = Pipeline(bootstrap, admin, ManifestStore(str(tmp_path)), topic_in, topic_out, unique("kin-g"))
    expected, aborted_input = _produce_input(bootstrap, topic_in, "f")
    plan = pipe.plan(1)
    offsets_id = plan.offsets_transactional_id

    listing = AbortStrategy.LISTING.aborter(checkpoint_id=1, partitions_hint=1)

    def restore():
        return restore_pipeline(admin, store=pipe.store, manifests=pipe.store.manifests(pipe.pipeline),
                                pipeline_id=pipe.pipeline,
                                transactional_id_prefix=pipe.prefix, checkpoint_id=1,
                                abort_lingering=listing, also_owned=[offsets_id])

    # Attempt 1 prepares the group's offsets and dies before its manifest: nobody will commit them.
    dead = prepare_group_offsets(
        offsets=plan.end_offsets(), group=pipe.group, confluent_config={"bootstrap.servers": bootstrap},
        transactional_id=offsets_id, topic=topic_in, transaction_timeout_ms=60_000,
        protocol=TransactionProtocol.from_admin(admin), describe=admin.describe)
    report = restore()  # the retry's restore, before it writes
    assert offsets_id in report.aborted_transactions
    after = admin.describe([offsets_id])[offsets_id]
    assert str(after.state) != "Ongoing" and after.producer_epoch > dead.producer_epoch
    assert pipe.group_offsets() == {}

    # The retry prepares and votes; restore run again (the job retried after its manifest) must
    # leave the offsets transaction its PREPARED manifest lists alone, and the commit moves the group.
    uri = pipe.prepare(1, plan)
    again = restore()
    assert again.existing is not None and offsets_id not in again.aborted_transactions
    assert offsets_id in again.protected_transactions
    assert str(admin.describe([offsets_id])[offsets_id].state) == "Ongoing"
    commit_checkpoint(admin, uri, committed_by="test")
    wait_until_committed(admin, [f"{pipe.prefix}-1-0", offsets_id])
    assert pipe.group_offsets() == plan.end_offsets()
    counts = count_keys(bootstrap, topic_out)
    assert_exactly_once(counts, expected)
    assert not set(aborted_input) & set(counts)


@pytest.mark.parametrize("coordinator", ["still-open", "gone"])
def test_the_next_run_settles_an_older_prepared_checkpoint_by_itself_and_reads_on(
        kafka_broker, admin, tmp_path, coordinator):
    """Issue 35: a run prepared checkpoint 1 and died before its commit; the next run, with no person in
    between, settles it with restore's rules in the Spark job's own planning step: committed while its
    transactions can be committed, else (the coordinator aborted them: "gone") marked ABORTED and its
    range read again. Every input record once in the output, the group's lag 0."""
    from kafka_input_support import commit_and_wait, kafka_input_job_arguments

    from airflow_provider_kafka_eos.kafka.checkpoints.manifest import read_manifest
    from airflow_provider_kafka_eos.spark import job as eos_job

    bootstrap = kafka_broker.bootstrap
    topic_in = create_topic(bootstrap, unique("kin-in"), partitions=3)
    topic_out = create_topic(bootstrap, unique("kin-out"), partitions=2)
    base = tmp_path / "manifests"
    pipe = Pipeline(bootstrap, admin, ManifestStore(str(base)), topic_in, topic_out, unique("kin-group"))

    def job_plan(checkpoint_id: int):  # the job's planning step (spark/job.py), in this process
        args = eos_job.build_arg_parser().parse_args(kafka_input_job_arguments(
            prefix=pipe.prefix, topic_in=topic_in, topic_out=topic_out, group=pipe.group, manifest_base=base,
            checkpoint=checkpoint_id))
        return eos_job.plan_kafka_input(args, client_config(bootstrap))

    first, _ = _produce_input(bootstrap, topic_in, "a")
    plan1 = job_plan(1)
    uri1 = pipe.prepare(1, plan1)  # ... and the run dies: no commit task, nobody resolves it
    if coordinator == "gone":  # what the coordinator does at the transaction timeout
        admin.abort([c.transactional_id for c in read_manifest(uri1).committables])
    second, _ = _produce_input(bootstrap, topic_in, "b")

    plan2 = job_plan(2)
    settled = read_manifest(uri1)
    if coordinator == "gone":
        assert settled.status is ManifestStatus.ABORTED and settled.commit_report["aborted_by"] == "restore"
        assert plan2.based_on is None and {r.start for r in plan2.ranges} == {r.start for r in plan1.ranges}
    else:
        assert settled.status is ManifestStatus.COMMITTED
        assert settled.commit_report["committed_by"] == "restore"
        assert plan2.based_on == 1 and plan2.ranges != plan1.ranges
    commit_and_wait(admin, pipe.prepare(2, plan2))

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("watermarks")})
    try:
        ends = {(topic_in, p): consumer.get_watermark_offsets(ConfluentPartition(topic_in, p), timeout=10)[1]
                for p in range(3)}
    finally:
        consumer.close()
    assert pipe.group_offsets() == ends == plan2.end_offsets()  # lag 0: the group is at the input's end
    assert_exactly_once(count_keys(bootstrap, topic_out), first + second)
