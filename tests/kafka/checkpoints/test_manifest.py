"""Committable and manifest: strict round trips, named validation errors, atomic writes, discovery."""

from __future__ import annotations

import json
import os

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    SCHEMA_VERSION,
    Manifest,
    ManifestStatus,
    find_manifests,
    manifest_uri,
    read_manifest,
    write_manifest,
)
from airflow_provider_kafka_eos.kafka.errors import ManifestError, ManifestStoreError
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition


def committable(tid: str = "orders-0-7", **over) -> Committable:
    fields = dict(
        transactional_id=tid,
        producer_id=4001,
        producer_epoch=3,
        partitions=(TopicPartition("orders", 1), TopicPartition("orders", 0)),
        record_count=250,
        prepared_at_ms=1_700_000_001_000,
        transaction_start_ms=1_700_000_000_000,
        transaction_timeout_ms=900_000,
        transaction_version=2,
        end_txn_version=5,
    )
    fields.update(over)
    return Committable(**fields)


def manifest(
    checkpoint: int = 7, status=ManifestStatus.PREPARED, ids=("orders-0-7", "orders-1-7")
) -> Manifest:
    return Manifest(
        pipeline_id="orders",
        checkpoint_id=checkpoint,
        transactional_id_prefix="orders",
        naming_strategy="INCREMENTING",
        topic="orders",
        status=status,
        committables=[committable(t) for t in ids],
        created_at_ms=1_700_000_002_000,
        updated_at_ms=1_700_000_002_000,
    )


# -- committable --------------------------------------------------------------------------------


def test_committable_round_trip_and_deadline():
    c = committable()
    assert c.partitions == (TopicPartition("orders", 0), TopicPartition("orders", 1))  # sorted
    assert Committable.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    assert c.deadline_ms == 1_700_000_900_000


def test_committable_two_phase_defaults_to_false_when_absent():
    data = committable().to_dict()
    del data["two_phase"]
    assert Committable.from_dict(data).two_phase is False


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d.pop("producer_epoch"), "'producer_epoch' is missing"),
        (lambda d: d.update(producer_id="4001"), "'producer_id' must be int"),
        (lambda d: d.update(record_count=True), "'record_count' must be int"),
        (lambda d: d.update(partitions=[]), "'partitions' must not be empty"),
        (lambda d: d.update(partitions=[{"topic": "t"}]), "partitions[0].partition"),
        (lambda d: d.update(record_count=0), "'record_count' must be > 0"),
        (lambda d: d.update(record_count=None), "'record_count' must be int"),
        (lambda d: d.update(transaction_version=3), "'transaction_version' must be 1 or 2"),
        (lambda d: d.update(end_txn_version=4), "transaction_version 2 needs end_txn_version 5"),
        (lambda d: d.update(password="x"), "unknown field 'password'"),
        (lambda d: d.update(producer_epoch=40000), "'producer_epoch' must be in 0..32767"),
    ],
)
def test_committable_validation_names_the_field(mutate, needle):
    data = committable().to_dict()
    mutate(data)
    with pytest.raises(ManifestError) as info:
        Committable.from_dict(data, source="s3://b/m.json committables[0]")
    assert needle in str(info.value)
    assert "s3://b/m.json committables[0]" in str(info.value)


def test_a_hand_built_committable_may_have_no_record_count_but_a_manifest_may_not(tmp_path):
    """A manual commit (id + producer id + epoch) knows no record count and must not invent one;
    a manifest, written by the writer that counted, always carries it."""
    uncounted = committable(record_count=None)
    assert "record count unknown" in str(uncounted)
    with_uncounted = manifest()
    with_uncounted.committables = [uncounted]
    with pytest.raises(ManifestError, match="record_count"):
        write_manifest(str(tmp_path / "m.json"), with_uncounted)
    assert not list(tmp_path.iterdir())  # nothing written, not even a temp file


def test_tv1_committable_must_not_use_end_txn_v5():
    with pytest.raises(ManifestError, match="end_txn_version <= 4"):
        committable(transaction_version=1, end_txn_version=5)


# -- manifest -----------------------------------------------------------------------------------


def test_manifest_uri_is_zero_padded_and_sorts_by_checkpoint():
    assert manifest_uri("s3://b/m/", "orders", 7) == "s3://b/m/orders/checkpoint-000000000007.json"
    with pytest.raises(ManifestError):
        manifest_uri("/m", "a/b", 1)


def test_write_read_round_trip(tmp_path):
    uri = manifest_uri(str(tmp_path), "orders", 7)
    m = manifest()
    write_manifest(uri, m)
    assert read_manifest(uri) == m
    with open(uri) as fh:
        on_disk = json.load(fh)
    assert on_disk["schema_version"] == SCHEMA_VERSION and on_disk["status"] == "PREPARED"
    assert [n for n in os.listdir(os.path.dirname(uri)) if n.startswith(".tmp-")] == []


def test_file_uri_and_fsspec_memory_round_trip(tmp_path):
    local = "file://" + str(tmp_path / "m.json")
    write_manifest(local, manifest())
    assert read_manifest(local) == manifest()
    memory = manifest_uri("memory://kafka-eos-test", "orders", 9)
    write_manifest(memory, manifest(9))
    assert read_manifest(memory).checkpoint_id == 9
    assert [u for u, _ in find_manifests("memory://kafka-eos-test")] == [memory]


def test_overwrite_is_atomic_replace(tmp_path, monkeypatch):
    """A crash during the write leaves the previous manifest intact (no partial file)."""
    uri = str(tmp_path / "orders" / "checkpoint-000000000007.json")
    write_manifest(uri, manifest())

    def crash(*_args, **_kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    committed = manifest(status=ManifestStatus.COMMITTED)
    with pytest.raises(ManifestStoreError, match="manifest store cannot be written \\(disk full\\)"):
        write_manifest(uri, committed)
    monkeypatch.undo()
    assert read_manifest(uri).status is ManifestStatus.PREPARED
    assert [n for n in os.listdir(tmp_path / "orders") if n.startswith(".tmp-")] == []


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"pipeline_id": "x"}', "'schema_version' is missing"),
        ('{"schema_version": 99}', "'schema_version' is 99"),
        ('{"schema_version": true}', "'schema_version' is True"),
    ],
)
def test_malformed_manifest_names_uri_and_defect(tmp_path, text, needle):
    path = tmp_path / "checkpoint-000000000001.json"
    path.write_text(text)
    with pytest.raises(ManifestError) as info:
        read_manifest(str(path))
    assert needle in str(info.value) and str(path) in str(info.value)
    assert "malformed-manifest.md" in str(info.value)


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d.update(status="DONE"), "'status' must be one of"),
        (lambda d: d.update(naming_strategy="RANDOM"), "'naming_strategy' must be one of"),
        (lambda d: d.pop("committables"), "'committables' is missing"),
        (lambda d: d["committables"][1].update(transactional_id="orders-0-7"), "listed twice"),
        (lambda d: d["committables"][1].pop("producer_id"), "committables[1]"),
        (lambda d: d.update(extra_field=1), "unknown field 'extra_field'"),
        (lambda d: d.update(checkpoint_id=-1), "'checkpoint_id' must be >= 0"),
    ],
)
def test_manifest_field_validation(tmp_path, mutate, needle):
    data = manifest().to_dict()
    mutate(data)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ManifestError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        read_manifest(str(path))


def test_missing_manifest_is_a_manifest_error(tmp_path):
    with pytest.raises(ManifestError, match="does not exist"):
        read_manifest(str(tmp_path / "nope.json"))


def test_invalid_manifest_is_never_written(tmp_path):
    bad = manifest()
    bad.naming_strategy = "RANDOM"
    uri = str(tmp_path / "m.json")
    with pytest.raises(ManifestError):
        write_manifest(uri, bad)
    assert not os.path.exists(uri)


def test_find_manifests_filters_and_refuses_malformed(tmp_path):
    base = str(tmp_path)
    write_manifest(manifest_uri(base, "orders", 1), manifest(1, ManifestStatus.COMMITTED))
    write_manifest(manifest_uri(base, "orders", 2), manifest(2))
    write_manifest(manifest_uri(base, "refunds", 1), manifest(1))
    (tmp_path / "orders" / "notes.txt").write_text("ignored: not a checkpoint file")
    assert [m.checkpoint_id for _, m in find_manifests(base, "orders")] == [1, 2]
    prepared = find_manifests(base, status="PREPARED")
    assert [(u.rsplit("/", 2)[-2], m.checkpoint_id) for u, m in prepared] == [("orders", 2), ("refunds", 1)]
    assert find_manifests(str(tmp_path / "absent")) == []
    (tmp_path / "orders" / "checkpoint-000000000003.json").write_text("{")
    with pytest.raises(ManifestError, match=r"checkpoint-000000000003\.json"):
        find_manifests(base, "orders")


def test_manifest_holds_no_secrets():
    text = manifest().to_json()
    for word in ("password", "secret", "sasl", "jaas", "token"):
        assert word not in text.lower()
