"""``kafka-eos-txn preflight --record-formats FILE``: the pipeline's record formats checked against
the real registry (Apicurio), read-only, beside the cluster's checks; the file keeps the registry's
credentials off the command line."""

from __future__ import annotations

import json

import pytest
from eos_cli_helpers import run_cli

pytestmark = pytest.mark.broker

SCHEMA = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})


def test_preflight_checks_the_subject_and_registers_nothing(bootstrap, schema_registry, registry_topic,
                                                            tmp_path, unique_name):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    formats = tmp_path / "formats.json"
    formats.write_text(json.dumps({"value": {"format": "avro", "schema": SCHEMA},
                                   "registry": {"url": schema_registry.url}}))
    args = ("preflight", "--bootstrap-server", bootstrap, "--prefix", unique_name("rf") + "-",
            "--topic", registry_topic, "--record-formats", formats)
    missing = run_cli(*args)
    assert missing.returncode == 1, missing.stderr
    assert f"subject '{registry_topic}-value' on schema registry {schema_registry.url}" in missing.stdout
    client = SchemaRegistryClient({"url": schema_registry.url})
    assert f"{registry_topic}-value" not in client.get_subjects()  # read-only
    schema_id = client.register_schema(f"{registry_topic}-value", Schema(SCHEMA, "AVRO"))
    present = run_cli(*args)
    assert present.returncode == 0, present.stdout + present.stderr
    assert f"avro, subject '{registry_topic}-value': schema id {schema_id}" in present.stdout


def test_record_formats_outside_preflight_or_without_a_topic_are_refused(tmp_path):
    formats = tmp_path / "formats.json"
    formats.write_text("{}")
    elsewhere = run_cli("list", "--bootstrap-server", "127.0.0.1:9", "--record-formats", formats)
    assert elsewhere.returncode == 2, elsewhere.stderr  # only preflight's parser has the option
    assert "unrecognized arguments: --record-formats" in elsewhere.stderr
    no_topic = run_cli("preflight", "--prefix", "p-", "--bootstrap-server", "127.0.0.1:9",
                       "--record-formats", formats)
    assert no_topic.returncode == 2, no_topic.stderr
    assert "preflight --record-formats checks the --topic(s) it is given" in no_topic.stderr
