"""The example DAGs' S3 store reached only through Airflow connections (issue 35), for the cleanup
DAG's and the manual resolution DAG's S3 tests."""

from __future__ import annotations

import json
import os
import pathlib

import pytest
from txn_helpers import set_kafka_eos_connection

from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import StoreAccess
from kafka_eos_testing import s3_server as s3
from kafka_eos_testing.embedded import unique_name

STORE_CONN = "eos_manifest_store"


@pytest.fixture
def s3_only_through_connections(s3_server, kafka_broker, monkeypatch) -> tuple[str, StoreAccess]:
    """A fresh bucket whose only way in is the ``aws`` connection the ``kafka_eos`` one names."""
    import s3fs

    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    if (pathlib.Path.home() / ".aws").exists():
        pytest.skip("~/.aws holds credentials the standard chain would find: the test needs none")
    s3fs.S3FileSystem.clear_instance_cache()
    bucket = unique_name("eos-conn-store").lower().replace("_", "-")[:60]
    base = s3_server.create_bucket(bucket) + "/manifests"
    monkeypatch.setenv(f"AIRFLOW_CONN_{STORE_CONN.upper()}", json.dumps({
        "conn_type": "aws", "login": s3.ACCESS_KEY, "password": s3.SECRET_KEY,
        "extra": {"endpoint_url": s3_server.endpoint, "region_name": s3.REGION}}))
    set_kafka_eos_connection(monkeypatch, kafka_broker.bootstrap, manifest_base_uri=base,
                             manifest_store_conn_id=STORE_CONN)
    # The test's own way in (writing the vote as the Spark job would, reading the result).
    access = StoreAccess({"key": s3.ACCESS_KEY, "secret": s3.SECRET_KEY, "endpoint_url": s3_server.endpoint,
                          "client_kwargs": {"region_name": s3.REGION}})
    return base, access
