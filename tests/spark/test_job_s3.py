"""The Spark job (``spark/job.py``, local-mode Spark, in this process) writing its manifest to S3.

The driver has no AWS variable in its environment: the store's key, secret and endpoint come
only from the operator's private file (``store_options``, as the submit operator writes it from
the worker's Airflow connection). The manifest is read back through the raw S3 API, committed
with ``commit_checkpoint`` (COMMITTED on S3, a compare-and-set), and counted read_committed.
The same path through spark-submit and two Celery workers:
tests/system/airflow_scheduler/test_celery_workers.py.
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints import store_objects
from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import manifest_uri
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.spark import job
from kafka_eos_testing import s3_server as s3
from kafka_eos_testing.spark import local_spark_session
from kafka_eos_testing.verify import assert_exactly_once, count_keys

# The store and its credentials are the subject: one broker proves them (--kafka-facing leaves it out).
pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.provider_logic]

APP = """
from pyspark.sql import functions as F
def build(spark, params):
    df = spark.range(int(params["n"]), numPartitions=2)
    return df.select(F.concat(F.lit("s3-key-"), F.col("id").cast("string")).alias("key"),
                     F.col("id").cast("string").alias("value"))
"""


def test_the_job_writes_its_manifest_to_s3_with_credentials_from_its_private_file_only(
    s3_server, kafka_broker, tmp_path, monkeypatch, unique_name
):
    import s3fs

    for key in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
                "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    s3fs.S3FileSystem.clear_instance_cache()
    bucket = unique_name("spark-store").lower().replace("_", "-")[:60]
    base = s3_server.create_bucket(bucket) + "/manifests"
    (tmp_path / "app.py").write_text(APP)
    options = {"key": s3.ACCESS_KEY, "secret": s3.SECRET_KEY, "endpoint_url": s3_server.endpoint,
               "client_kwargs": {"region_name": s3.REGION}}
    private = tmp_path / "private.json"
    private.write_text(json.dumps({
        job.PRIVATE_FILE_CONFIG_KEY: {"bootstrap.servers": kafka_broker.bootstrap},
        job.PRIVATE_FILE_PARAMS_KEY: {"n": 60},
        job.PRIVATE_FILE_STORE_KEY: options,
    }))
    monkeypatch.setenv(job.CONFIG_FILE_ENV, str(private))
    pipeline, topic = unique_name("s3job"), unique_name("s3job-out")
    local_spark_session()  # the job's getOrCreate() takes this session (local mode)

    assert job.main(["--pipeline-id", pipeline, "--topic", topic, "--transactional-id-prefix", pipeline,
                     "--checkpoint-id", "3", "--manifest-base-uri", base,
                     "--application", f"{tmp_path / 'app.py'}:build"]) == 0

    uri = manifest_uri(base, pipeline, 3)
    stored = s3_server.client().get_object(Bucket=bucket, Key=uri.removeprefix(f"s3://{bucket}/"))
    manifest = json.loads(stored["Body"].read())
    assert manifest["status"] == "PREPARED" and sum(c["record_count"] for c in manifest["committables"]) == 60
    config = KafkaClientConfig.from_mapping({"bootstrap.servers": kafka_broker.bootstrap})
    with TransactionAdmin(config) as admin:
        # The job's credentials stayed in the job: the commit is handed the store's access itself.
        report = commit_checkpoint(admin, uri, committed_by="test", access=store_objects.StoreAccess(options))
    assert report.status == "committed", report
    stored = s3_server.client().get_object(Bucket=bucket, Key=uri.removeprefix(f"s3://{bucket}/"))
    assert json.loads(stored["Body"].read())["status"] == "COMMITTED"
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [f"s3-key-{i}" for i in range(60)])
