"""Kafka -> Spark -> Kafka exactly once, through spark-submit: the job reads the planned range with
Spark's own Kafka source (spark-sql-kafka of the running Spark, fetched with Maven into a cache).

One module-scoped input/output topic pair carries K checkpoints and the faults in order (each
spark-submit costs seconds, so they share the pipeline): the job killed after its manifest and
retried, a checkpoint given up and its range read again (with a Spark task killed mid-read and
mid-write), the commit killed between the output's and the offsets' transactions. After each
step: a read_committed count of the output (every input record that a COMMITTED checkpoint read,
exactly once; aborted input never) and the group's committed offsets equal to the last COMMITTED
checkpoint's ``to``. The test ran under spark-submit's ``local[2,3]`` master, so a killed task is retried.
"""

from __future__ import annotations

import pathlib

import pytest
from confluent_kafka import Producer

from airflow_provider_kafka_eos.kafka.admin.input_offsets import group_offsets
from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import abort_checkpoint, commit_checkpoint
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.spark.faults import EXIT_AFTER_MANIFEST
from kafka_eos_testing import fault_job
from kafka_eos_testing.spark import job_arguments, reported_manifest_uri, spark_submit_job
from kafka_eos_testing.transactions import produce_transaction, wait_until_committed
from kafka_eos_testing.verify import assert_exactly_once, count_keys

# provider_logic: the apache pass leaves it out (CI time: three spark-submits). What Kafka 4.4 itself does
# here (the offsets transaction, last stable offsets, retention) is proven on it by
# tests/kafka/checkpoints/test_kafka_input.py; this test passed on Kafka 4.4 too when run by hand with
# KAFKA_EOS_TEST_KAFKA=apache.
pytestmark = [pytest.mark.faults, pytest.mark.spark, pytest.mark.broker, pytest.mark.provider_logic]

HERE = pathlib.Path(__file__).resolve().parent
PARTITIONS = 3


@pytest.fixture(scope="module")
def connector_jars():
    import pyspark

    from benchmarks.bench_spark_vs_sink import sink_jars

    version = pyspark.__version__
    return sink_jars(version, "2.12" if version.startswith("3.") else "2.13")


def _produce_round(bootstrap: str, topic: str, tag: str) -> list[str]:
    """Committed and aborted transactional batches and plain records; the keys that must arrive."""
    committed = [f"{tag}-t{i}" for i in range(15)]
    produce_transaction(bootstrap, f"{topic}-{tag}-in", topic, [k.encode() for k in committed], commit=True,
                        partitions=range(PARTITIONS))
    aborting = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-{tag}-ab"})
    aborting.init_transactions(30)
    aborting.begin_transaction()
    for i in range(8):
        aborting.produce(topic, key=f"{tag}-aborted{i}".encode(), value=b"x", partition=i % PARTITIONS)
    assert aborting.flush(30) == 0
    aborting.abort_transaction(30)
    plain = [f"{tag}-p{i}" for i in range(10)]
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, key in enumerate(plain):
        producer.produce(topic, key=key.encode(), value=b"p", partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    return committed + plain


def _create_topic(bootstrap: str, topic: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": bootstrap})
    for future in client.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10).values():
        future.result(timeout=15)
    return topic


class Job:
    """spark-submit runs of one Kafka-input pipeline's checkpoints (the submit task's part)."""

    def __init__(self, broker, tmp_path, prefix, topic_in, topic_out, group, jars):
        self.broker, self.tmp_path, self.prefix = broker, tmp_path, prefix
        self.topic_in, self.topic_out, self.group, self.jars = topic_in, topic_out, group, jars

    def _arguments(self, checkpoint: int) -> list[str]:
        args = job_arguments(prefix=self.prefix, topic=self.topic_out, checkpoint=checkpoint,
                             manifest_base=self.tmp_path / "manifests",
                             application=f"{HERE / 'kafka_input_app.py'}:build_dataframe", params={})
        return [*args, "--input-topics", self.topic_in, "--input-group", self.group, "--input-start",
                "earliest"]

    def run(self, checkpoint: int, fault: str | None = None):
        return spark_submit_job(self._arguments(checkpoint), client_config=self.broker.client_config(),
                                work_dir=self.tmp_path,
                                conf={"spark.jars": ",".join(self.jars)},
                                env={fault_job.ENV_VAR: fault} if fault else None,
                                application_file=fault_job.FILE, timeout_s=300)

    def uri(self, checkpoint: int) -> str:
        from airflow_provider_kafka_eos.kafka.checkpoints.manifest import manifest_uri

        return manifest_uri(str(self.tmp_path / "manifests"), self.prefix, checkpoint)

    def plan(self, checkpoint: int):
        """The job's planning step in this process (what a retried driver does before reading)."""
        from airflow_provider_kafka_eos.spark import job as eos_job

        args = eos_job.build_arg_parser().parse_args(self._arguments(checkpoint))
        return eos_job.plan_kafka_input(args, KafkaClientConfig.from_mapping(self.broker.client_config()))

    def prepared(self, checkpoint: int, fault: str | None = None) -> str:
        result = self.run(checkpoint, fault)
        assert result.returncode == 0, result.stderr[-3000:]
        uri = reported_manifest_uri(result.stdout)
        assert uri is not None and read_manifest(uri).status is ManifestStatus.PREPARED
        return uri


def _group_offsets(admin, group, topic):
    return group_offsets(admin, group, [(topic, p) for p in range(PARTITIONS)])


def _commit(admin, uri):
    manifest = read_manifest(uri)
    commit_checkpoint(admin, uri, committed_by="test")
    wait_until_committed(admin, [c.transactional_id for c in manifest.committables])
    return manifest


def test_k_checkpoints_with_faults_write_each_input_record_once_and_the_group_follows(
        kafka_broker, tmp_path, unique_name, connector_jars):
    bootstrap = kafka_broker.bootstrap
    topic_in = _create_topic(bootstrap, unique_name("k2k-in"), PARTITIONS)
    topic_out = _create_topic(bootstrap, unique_name("k2k-out"), 2)
    group = unique_name("k2k-group")
    job = Job(kafka_broker, tmp_path, unique_name("k2k"), topic_in, topic_out, group, connector_jars)
    expected: list[str] = []
    with TransactionAdmin(KafkaClientConfig.from_mapping(kafka_broker.client_config())) as admin:
        # Checkpoint 1: the driver dies right after its manifest. A retry plans nothing new (the
        # stored plan comes back without asking Kafka) and the writer finds the manifest; the
        # commit makes output and offsets visible together.
        expected += _produce_round(bootstrap, topic_in, "a")
        killed = job.run(1, fault="exit_after_manifest")
        assert killed.returncode == EXIT_AFTER_MANIFEST, killed.stderr[-3000:]
        uri1 = job.uri(1)
        late = _produce_round(bootstrap, topic_in, "late")  # arrives before the retry: not checkpoint 1's
        retry = job.plan(1)
        assert retry == read_manifest(uri1).input.kafka
        first = _commit(admin, uri1)
        kafka1 = first.input.kafka
        assert all(c.producer_epoch == 0 for c in first.output_committables)  # fresh ids, no task died
        assert kafka1.offsets_transactional_id in first.transactional_ids
        assert _group_offsets(admin, group, topic_in) == kafka1.end_offsets()
        assert_exactly_once(count_keys(bootstrap, topic_out), expected)

        # Checkpoint 2 is given up: nothing visible, the group stays.
        round_b = _produce_round(bootstrap, topic_in, "b")
        uri2 = job.prepared(2)
        abort_checkpoint(admin, uri2, aborted_by="test")
        assert _group_offsets(admin, group, topic_in) == kafka1.end_offsets()
        assert_exactly_once(count_keys(bootstrap, topic_out), expected)

        # Checkpoint 3 reads checkpoint 2's range again. A Spark task dies mid-read and mid-write (the
        # Kafka source feeds the write in the same task): Spark's retry reads the same offsets again
        # and fences the dead attempt. Its commit dies after the output's transactions, before the
        # offsets', and the commit's retry completes it.
        expected += late + round_b
        uri3 = job.prepared(3, fault="kill_task_after_records=3")
        third = read_manifest(uri3)
        assert any(c.producer_epoch > 0 for c in third.output_committables), \
            "the killed task's retry should have fenced its first attempt (a higher producer epoch)"
        assert third.input.kafka.based_on == 1
        assert third.input.kafka.ranges == read_manifest(uri2).input.kafka.ranges  # the same range again
        admin.commit(third.output_committables)  # ... and the commit task is killed here
        assert _group_offsets(admin, group, topic_in) == kafka1.end_offsets()
        _commit(admin, uri3)
        assert _group_offsets(admin, group, topic_in) == third.input.kafka.end_offsets()
        counts = count_keys(bootstrap, topic_out)
        assert_exactly_once(counts, expected)
        assert not [k for k in counts if b"aborted" in k]
