"""write_exactly_once with record formats: the value struct encoded in the Confluent wire format,
the schema id resolved once before any transaction opens, and refusals with nothing prepared.

``provider_logic``: the encoding and the refusals are the provider's rules (the broker stores the
bytes it is handed), so these run on the embedded broker, with the session's one registry server.
Skipped where the ``[registry]`` extra is not installed (the PySpark 3.5 pass's environment).
"""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import find_manifests
from airflow_provider_kafka_eos.kafka.errors import SchemaMismatchError, SchemaRegistryError
from airflow_provider_kafka_eos.kafka.registry.config import RecordFormats, RegistryConfig, SerdeSetting
from airflow_provider_kafka_eos.kafka.registry.resolver import registry_client
from airflow_provider_kafka_eos.spark.writer import write_exactly_once
from kafka_eos_testing.spark import commit_manifest
from kafka_eos_testing.verify import committed_messages, count_keys

pytest.importorskip("confluent_kafka.schema_registry.avro")
pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.provider_logic]

ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
                    {"name": "amount", "type": "double"}, {"name": "note", "type": ["null", "string"]}]}


_FRAME_EXPRESSIONS = (
    "concat('o-', cast(id as string)) as key",
    "named_struct('id', id, 'customer', concat('c', cast(id % 7 as string)), 'amount', id * 0.5D, "
    "'note', if(id % 2 = 0, null, 'gift')) as value")


def _frame(spark, n: int, partitions: int = 3):
    return spark.range(n, numPartitions=partitions).selectExpr(*_FRAME_EXPRESSIONS)


def _formats(schema_registry, schema: dict, **setting) -> RecordFormats:
    return RecordFormats(value=SerdeSetting(format="avro", schema=json.dumps(schema), **setting),
                         registry=RegistryConfig(schema_registry.url))


def _write(spark_df, broker, tmp_path, prefix, topic, formats):
    return write_exactly_once(spark_df, topic=topic, kafka_config=broker.client_config(),
                              transactional_id_prefix=prefix, checkpoint_id=1,
                              manifest_base_uri=str(tmp_path), record_formats=formats)


def _job_write(kafka_broker, schema_registry, tmp_path, prefix, topic, formats: RecordFormats):
    """The job's own path (in-process, the session's Spark): ``--record-formats`` without the
    registry, whose settings come from the private file as the submit operator writes it."""
    from airflow_provider_kafka_eos.spark import handoff, job

    app = tmp_path / "orders_app.py"
    app.write_text("def build(spark, params):\n"
                   "    return spark.range(120, numPartitions=3).selectExpr(\n"
                   f"        {_FRAME_EXPRESSIONS!r}[0], {_FRAME_EXPRESSIONS!r}[1])\n")
    private = tmp_path / "private.json"
    private.write_text(json.dumps({handoff.PRIVATE_FILE_CONFIG_KEY: kafka_broker.client_config(),
                                   handoff.PRIVATE_FILE_REGISTRY_KEY: {"url": schema_registry.url}}))
    parts = {name: {k: getattr(v, "value", v) for k, v in dataclasses.asdict(getattr(formats, name)).items()}
             for name in ("key", "value")}
    argv = ["--pipeline-id", prefix, "--topic", topic, "--transactional-id-prefix", prefix,
            "--checkpoint-id", "1", "--manifest-base-uri", str(tmp_path / "m"),
            "--application", f"{app}:build", "--record-formats", json.dumps(parts)]
    os.environ[handoff.CONFIG_FILE_ENV] = str(private)
    try:
        assert job.main(argv) == 0
    finally:
        del os.environ[handoff.CONFIG_FILE_ENV]
    [(_, manifest)] = find_manifests(str(tmp_path / "m"), prefix)
    return manifest


def test_avro_keys_and_values_are_written_exactly_once_and_read_back_by_kafkas_deserializer(
        spark, kafka_broker, schema_registry, tmp_path, unique_name):
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    prefix, topic = unique_name("avro"), unique_name("orders")
    formats = dataclasses.replace(_formats(schema_registry, ORDER, auto_register=True),
                                  key=SerdeSetting(format="avro", schema='"string"', auto_register=True))
    manifest = _job_write(kafka_broker, schema_registry, tmp_path, prefix, topic, formats)
    commit_manifest(kafka_broker.bootstrap, manifest)
    counts = count_keys(kafka_broker.bootstrap, topic)
    assert len(counts) == 120 and set(counts.values()) == {1}  # every (encoded) key once

    client = registry_client(formats.registry)
    schema_id = client.get_latest_version(f"{topic}-value").schema_id
    key_id = client.get_latest_version(f"{topic}-key").schema_id
    # the vote records the ids every record carries (a commit or a rerun never resolves them again)
    assert manifest.record_formats == {topic: {
        part: {"format": "avro", "subject": f"{topic}-{part}", "schema_id": ids,
               "registry_url": schema_registry.url} for part, ids in (("key", key_id), ("value", schema_id))}}
    deserialize = AvroDeserializer(client)
    context = SerializationContext(topic, MessageField.VALUE)
    key_context = SerializationContext(topic, MessageField.KEY)
    decoded = {}
    for message in committed_messages(kafka_broker.bootstrap, topic):  # read_committed
        assert message.value()[1:5] == schema_id.to_bytes(4, "big")
        assert message.key()[1:5] == key_id.to_bytes(4, "big")
        decoded[deserialize(message.key(), key_context)] = deserialize(message.value(), context)
    assert decoded == {f"o-{i}": {"id": i, "customer": f"c{i % 7}", "amount": i * 0.5,
                                  "note": None if i % 2 == 0 else "gift"} for i in range(120)}


def test_an_incompatible_schema_is_refused_with_nothing_prepared(
        spark, kafka_broker, schema_registry, tmp_path, unique_name):
    prefix, topic = unique_name("incompat"), unique_name("orders")
    client = registry_client(RegistryConfig(schema_registry.url))
    from confluent_kafka.schema_registry import Schema

    old = {**ORDER, "fields": ORDER["fields"][:2]}
    client.register_schema(f"{topic}-value", Schema(json.dumps(old), "AVRO"))
    client.set_compatibility(f"{topic}-value", "FORWARD")  # old readers must read new records
    # 'customer' changes type: neither old readers nor new ones can read the other's records
    changed = {**ORDER, "fields": [ORDER["fields"][0], {"name": "customer", "type": "long"},
                                   *ORDER["fields"][2:]]}
    df = _frame(spark, 10).selectExpr("key", "named_struct('id', value.id, 'customer', value.id, "
                                      "'amount', value.amount, 'note', value.note) as value")
    with pytest.raises(SchemaRegistryError, match=r"incompatible .*\(FORWARD for the subject\)"):
        _write(df, kafka_broker, tmp_path, prefix, topic, _formats(schema_registry, changed,
                                                                   auto_register=True))
    assert list(find_manifests(str(tmp_path), prefix)) == []
    with pytest.raises(LookupError):  # no transaction opened: the topic was never even written
        count_keys(kafka_broker.bootstrap, topic, isolation="read_uncommitted", timeout_s=5)
    assert client.get_versions(f"{topic}-value") == [1]


def test_columns_not_matching_the_schema_are_refused_on_the_driver(spark, schema_registry, tmp_path,
                                                                   unique_name):
    """Refused from the Spark schema alone: no broker, no registry call, no Spark job."""
    df = _frame(spark, 3).selectExpr("key", "named_struct('id', value.id, 'client', value.customer) as value")
    with pytest.raises(SchemaMismatchError, match=r"column 'value' \(avro\): .*missing field\(s\) customer, "
                                                  r"amount, note; field\(s\) not in the schema client"):
        write_exactly_once(df, topic="t", kafka_config={"bootstrap.servers": "127.0.0.1:1"},
                           transactional_id_prefix=unique_name("p"), checkpoint_id=1,
                           manifest_base_uri=str(tmp_path), record_formats=_formats(schema_registry, ORDER))


def test_a_row_that_does_not_fit_fails_the_job_naming_the_row_and_writes_no_manifest(
        spark, kafka_broker, schema_registry, tmp_path, unique_name):
    prefix, topic = unique_name("badrow"), unique_name("orders")
    strict = {**ORDER, "fields": [*ORDER["fields"][:3], {"name": "note", "type": "string"}]}  # no null
    df = _frame(spark, 10, partitions=1)  # notes: null on even ids
    with pytest.raises(SchemaMismatchError) as err:
        _write(df, kafka_broker, tmp_path, prefix, topic,
               _formats(schema_registry, strict, auto_register=True))
    assert f"subject '{topic}-value'" in str(err.value)
    assert "row 0 of Spark partition 0 does not match the writer's schema" in str(err.value)
    assert "on field note" in str(err.value)
    assert list(find_manifests(str(tmp_path), prefix)) == []


def test_a_missing_format_package_is_named_with_the_fix(monkeypatch):
    """In a task the line carries the marker the driver finds in Spark's failure text."""
    from airflow_provider_kafka_eos.spark import record_formats
    from airflow_provider_kafka_eos.spark.requirements import (
        MISSING_MARKER,
        Requirement,
        translate_task_failure,
    )

    # Boundary: every format package is installed here; a requirement naming an absent module stands in.
    monkeypatch.setitem(record_formats.FORMAT_REQUIREMENTS, "avro",
                        Requirement("fastavro", "fastavro_absent_here", "record format avro"))
    with pytest.raises(Exception) as err:
        record_formats.check_importable(["avro", "json_schema"], where="the executor Python X", marked=True)
    text = str(err.value)
    assert text.startswith(MISSING_MARKER) and "the executor Python X lacks fastavro" in text
    assert "pip install 'fastavro'" in text and "jsonschema" not in text.split("lacks", 1)[1].split("(")[0]
    translated = translate_task_failure(RuntimeError(f"Traceback ...\nConfigError: {text}\n  at ..."), {})
    assert translated is not None and "lacks fastavro" in str(translated)
