"""The manifest's optional ``record_formats`` (schema version 4): the schema ids a checkpoint's
encoded keys/values carry, round-tripped strictly; manifests without it read and write as before."""

from __future__ import annotations

import copy
import json

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import Manifest, ManifestStatus
from airflow_provider_kafka_eos.kafka.errors import ManifestError

VALUE = {"format": "avro", "subject": "orders-value", "schema_id": 12, "registry_url": "https://r.example"}


def _manifest(**over) -> Manifest:
    return Manifest(pipeline_id="orders", checkpoint_id=7, transactional_id_prefix="orders",
                    naming_strategy="INCREMENTING", topic="orders", status=ManifestStatus.PREPARED,
                    committables=[], created_at_ms=1, updated_at_ms=1, **over)


def test_the_schema_ids_round_trip():
    recorded = {"orders": {"key": None, "value": VALUE}}
    written = _manifest(record_formats=recorded)
    read = Manifest.from_json(written.to_json(), source="m.json")
    assert read.record_formats == recorded and read == written


def test_a_manifest_without_record_formats_stays_as_it_was():
    data = json.loads(_manifest().to_json())
    assert "record_formats" not in data  # bytes pipelines write the same JSON as before the field
    assert Manifest.from_dict(data, source="m.json").record_formats is None


@pytest.mark.parametrize("mutate, needle", [
    (lambda f: f["orders"].update(colour="red"), "unknown field 'colour' in 'record_formats.orders'"),
    (lambda f: f["orders"]["value"].update(format="thrift"), "'record_formats.orders.value.format' must be"),
    (lambda f: f["orders"]["value"].update(schema_id="12"),
     "'record_formats.orders.value.schema_id' must be int"),
    (lambda f: f["orders"]["value"].pop("subject"), "'record_formats.orders.value.subject' is missing"),
    (lambda f: f["orders"]["value"].update(password="x"), "unknown field 'password'"),
    (lambda f: f.update(orders=[1]), "'record_formats.orders' must be an object"),
])
def test_a_malformed_record_formats_field_is_named(mutate, needle):
    fields = {"orders": {"key": None, "value": copy.deepcopy(VALUE)}}
    mutate(fields)
    data = json.loads(_manifest().to_json()) | {"record_formats": fields}
    with pytest.raises(ManifestError, match=r"m\.json: ") as err:
        Manifest.from_dict(data, source="m.json")
    assert needle in str(err.value)
