"""The manifest store's credentials from an Airflow connection (hooks/store_credentials.py).

Real Airflow connections given as AIRFLOW_CONN_<ID> JSON, real s3fs filesystems (built, not
contacted: nothing here needs a network; the S3 path end to end is
tests/kafka/checkpoints/test_store_objects_s3.py and tests/system/airflow_scheduler/test_celery_workers.py).
"""

from __future__ import annotations

import json

import pytest

from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
from airflow_provider_kafka_eos.kafka.checkpoints import store_objects
from airflow_provider_kafka_eos.kafka.errors import ConfigError

SECRET = "store-secret-that-must-not-leak"
STORE = "s3://creds-bucket/manifests"


def _conn(monkeypatch, conn_id: str, conn_type: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": conn_type, **fields}))


def _kafka_eos(monkeypatch, **extra) -> KafkaEosHook:
    _conn(monkeypatch, "eos_store", "kafka_eos",
          extra={"bootstrap.servers": "b:9092", "manifest_base_uri": STORE, **extra})
    return KafkaEosHook("eos_store")


def test_a_named_connection_gives_key_secret_endpoint_and_region_to_every_store_object(monkeypatch, capsys):
    hook = _kafka_eos(monkeypatch, manifest_store_conn_id="store_aws")
    _conn(monkeypatch, "store_aws", "aws", login="AKIDEXAMPLE", password=SECRET,
          extra={"endpoint_url": "http://127.0.0.1:9", "region_name": "eu-west-1"})
    store = hook.manifest_store()
    logged = capsys.readouterr()
    fs, _ = store.access.filesystem(f"{store.base_uri}/p/checkpoint-1.json")
    assert fs.storage_options["key"] == "AKIDEXAMPLE" and fs.storage_options["secret"] == SECRET
    assert fs.storage_options["endpoint_url"] == "http://127.0.0.1:9"
    assert fs.storage_options["client_kwargs"] == {"region_name": "eu-west-1"}
    assert "from connection 'store_aws'" in logged.out and SECRET not in logged.out + logged.err
    assert store.access.source == "connection 'store_aws'" and SECRET not in repr(store)
    # Nothing is left behind in the process: a path not handed the store's access has none of it.
    plain, _ = store_objects.STANDARD_CHAIN.filesystem(f"{store.base_uri}/p/checkpoint-1.json")
    assert "key" not in plain.storage_options


def test_aws_default_is_used_when_no_connection_is_named_and_absent_means_the_standard_chain(monkeypatch):
    hook = _kafka_eos(monkeypatch)
    # no aws_default: AWS_* variables, profile, instance role
    assert hook.store_access(STORE) is store_objects.STANDARD_CHAIN
    _conn(monkeypatch, "aws_default", "aws", login="AKIDDEFAULT", password=SECRET)
    assert dict(hook.store_access(STORE).options) == {"key": "AKIDDEFAULT", "secret": SECRET}
    assert hook.manifest_store().access.source == "connection 'aws_default'"
    assert hook.store_access("/var/lib/manifests") is store_objects.STANDARD_CHAIN  # a local store needs none


def test_a_named_connection_that_does_not_exist_is_refused_naming_the_key(monkeypatch):
    hook = _kafka_eos(monkeypatch, manifest_store_conn_id="nope")
    _conn(monkeypatch, "aws_default", "aws", login="AKIDDEFAULT", password=SECRET)  # never a fallback
    with pytest.raises(ConfigError, match="manifest_store_conn_id names connection 'nope', which does not"):
        hook.manifest_store()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"login": "AKID", "extra": {"role_arn": "arn:aws:iam::1:role/x"}},
         "extra key\\(s\\) role_arn are not read"),
        ({"login": "AKID"}, "an access key id needs its secret access key"),
    ],
)
def test_connection_fields_the_store_cannot_honour_are_refused(monkeypatch, fields, message):
    hook = _kafka_eos(monkeypatch, manifest_store_conn_id="store_aws")
    _conn(monkeypatch, "store_aws", "aws", **fields)
    with pytest.raises(ConfigError, match=message):
        hook.manifest_store()


def test_a_connection_named_for_a_store_that_is_not_s3_is_refused(monkeypatch):
    _conn(monkeypatch, "eos_gcs", "kafka_eos", extra={"bootstrap.servers": "b:9092",
                                                      "manifest_base_uri": "gs://bucket/manifests",
                                                      "manifest_store_conn_id": "google_cloud_default"})
    with pytest.raises(ConfigError, match="supported for s3:// stores"):
        KafkaEosHook("eos_gcs").manifest_store()


def test_the_store_keys_never_reach_the_kafka_client(monkeypatch):
    hook = _kafka_eos(monkeypatch, manifest_store_conn_id="store_aws")
    assert "manifest_store_conn_id" not in hook.client_config().confluent()


def test_the_spark_job_takes_the_store_options_from_its_private_file(tmp_path):
    from airflow_provider_kafka_eos.spark import job

    private = tmp_path / "private.json"
    private.write_text(json.dumps({job.PRIVATE_FILE_CONFIG_KEY: {"bootstrap.servers": "b:9092"},
                                   job.PRIVATE_FILE_STORE_KEY: {"key": "AKID", "secret": SECRET}}))
    access = job.load_store_access({job.CONFIG_FILE_ENV: str(private)})
    fs, _ = access.filesystem(f"{STORE}/p/checkpoint-1.json")
    assert fs.storage_options["secret"] == SECRET and SECRET not in repr(access)
    assert job.load_store_access({}) is store_objects.STANDARD_CHAIN  # run by hand: the standard chain
