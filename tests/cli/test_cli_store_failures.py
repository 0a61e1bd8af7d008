"""``kafka-eos-txn`` names a manifest store that does not answer as the store's (issue 36).

Before: on an S3 endpoint that does not answer, ``commit --manifest`` and ``abort --manifest``
printed "unexpected EndpointConnectionError" and pointed at the general troubleshooting page
(the manifest read caught only OSError). Each must name the ``s3://`` manifest, the store, and
the store's runbook page, and change nothing. The endpoint is a loopback port nothing listens on
(the store client's standard chain, as the CLI uses it without ``--conn-id``).
"""

from __future__ import annotations

import io
import json

import pytest

from airflow_provider_kafka_eos.cli.app import run

pytestmark = [pytest.mark.broker, pytest.mark.provider_logic]

MANIFEST = "s3://unanswered-bucket/manifests/orders/checkpoint-000000000007.json"


@pytest.fixture
def silent_endpoint(monkeypatch):
    import s3fs

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")  # nothing listens there
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDSILENT")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "silent-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # one try: the failure is what is tested, not the retries
    s3fs.S3FileSystem.clear_instance_cache()
    yield
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.mark.parametrize("action", ["commit", "abort"])
def test_a_manifest_on_an_unanswering_s3_endpoint_is_named_as_the_stores(
    kafka_broker, silent_endpoint, action
):
    out, err = io.StringIO(), io.StringIO()
    code = run([action, "--bootstrap-server", kafka_broker.bootstrap, "--manifest", MANIFEST, "--timeout",
                "20s"], stdout=out, stderr=err)
    message = err.getvalue()
    assert code == 1, message
    assert "unexpected" not in message and "troubleshooting" not in message, message
    assert f"{MANIFEST}: the manifest store cannot be read (EndpointConnectionError" in message, message
    assert "kafka-eos-txn runbook manifest-store" in message and message.count("\n") == 1, message
    assert "silent-secret" not in message

    out, err = io.StringIO(), io.StringIO()
    run([action, "--bootstrap-server", kafka_broker.bootstrap, "--manifest", MANIFEST, "--json"],
        stdout=out, stderr=err)
    doc = json.loads(out.getvalue())
    assert doc["ok"] is False and doc["runbook_page"] == "manifest-store", doc
    assert MANIFEST in doc["error"], doc
