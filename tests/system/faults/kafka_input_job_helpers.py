"""The fault tests' spark-submit runs of a Kafka-input pipeline on one node (``test_kafka_input_*``).

What the cluster tests share with them (input rounds, the group's offsets, the commit) is
``tests/support/kafka_input_support.py``.
"""

from __future__ import annotations

from kafka_input_support import APPLICATION, kafka_input_job_arguments

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from kafka_eos_testing import fault_job
from kafka_eos_testing.spark import reported_manifest_uri, spark_submit_job


def create_topic(bootstrap: str, topic: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": bootstrap})
    for future in client.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10).values():
        future.result(timeout=15)
    return topic


class Job:
    """spark-submit runs of one Kafka-input pipeline's checkpoints (the submit task's part)."""

    def __init__(self, broker, tmp_path, prefix, topic_in, topic_out, group, jars, application=APPLICATION):
        self.broker, self.tmp_path, self.prefix = broker, tmp_path, prefix
        self.topic_in, self.topic_out, self.group, self.jars = topic_in, topic_out, group, jars
        self.application = application

    def _arguments(self, checkpoint: int) -> list[str]:
        return kafka_input_job_arguments(prefix=self.prefix, topic_in=self.topic_in, topic_out=self.topic_out,
                                         group=self.group, manifest_base=self.tmp_path / "manifests",
                                         checkpoint=checkpoint, application=self.application)

    def run(self, checkpoint: int, fault: str | None = None, *, extra_args: tuple[str, ...] = ()):
        """One spark-submit of the checkpoint; ``extra_args``: more of the job's options
        (``--record-formats``)."""
        return spark_submit_job([*self._arguments(checkpoint), *extra_args],
                                client_config=self.broker.client_config(),
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

    def prepared(self, checkpoint: int, fault: str | None = None, *, extra_args: tuple[str, ...] = ()) -> str:
        result = self.run(checkpoint, fault, extra_args=extra_args)
        assert result.returncode == 0, result.stderr[-3000:]
        uri = reported_manifest_uri(result.stdout)
        assert uri is not None and read_manifest(uri).status is ManifestStatus.PREPARED
        return uri
