"""What the operators' console reads: bounded pages of a store, its points, and the LSO history ring.

Real local stores (manifests written as a run writes them); no Airflow server (the browser cases in
tests/system/airflow_scheduler/ui_console_cases.py drive the endpoints and the app).
"""

from __future__ import annotations

from types import SimpleNamespace

from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
from airflow_provider_kafka_eos.kafka.operations.lso_history import read_history, record_samples
from airflow_provider_kafka_eos.ui.console import pipeline_page
from kafka_eos_testing.console_store import write_console_store, write_lag_history

START = 1_700_000_000_000


def _store(tmp_path, count=30, **kwargs) -> ManifestStore:
    base = tmp_path.as_uri()
    write_console_store(base, "orders", "orders-out", count, start_ms=START, **kwargs)
    return ManifestStore(base)


def test_a_page_reads_only_its_manifests(tmp_path):
    store = _store(tmp_path)
    # A manifest outside the page that cannot be parsed: a full read would raise on it.
    (tmp_path / "orders" / "checkpoint-000000000003.json").write_text("not json")
    first = store.newest("orders", 10)
    assert first.total == 30 and [m.checkpoint_id for _, m in first.manifests] == list(range(30, 20, -1))
    assert (first.newer, first.older) == (0, 20)
    second = store.newest("orders", 10, before=21)
    assert [m.checkpoint_id for _, m in second.manifests] == list(range(20, 10, -1))
    assert (second.newer, second.older) == (10, 10)
    # A page cut short by the store's oldest checkpoint: nothing older.
    last = store.newest("orders", 10, before=3)
    assert [m.checkpoint_id for _, m in last.manifests] == [2, 1] and (last.newer, last.older) == (28, 0)


def test_pipelines_leave_out_the_providers_own_folders(tmp_path):
    store = _store(tmp_path, count=1)
    write_lag_history(store.base_uri, "orders-out", [])
    (tmp_path / "_lingering-findings").mkdir()
    assert store.pipelines() == ["orders"]


def test_points_say_when_each_checkpoint_committed_or_was_given_up(tmp_path):
    store = _store(tmp_path, count=10, given_up_every=4, open_count=2)
    data = pipeline_page(store, "orders", 100, None)
    by_id = {p["checkpoint_id"]: p for p in data["checkpoints"]}
    assert by_id[3]["status"] == "COMMITTED" and by_id[3]["commit_latency_ms"] == 1030
    assert by_id[3]["committed_at_ms"] == START + 3 * 60_000 + 1030
    assert by_id[3]["batch"] == "batch-00003" and by_id[3]["run"] == "manual__batch-3"
    assert by_id[3]["records"] == 3
    assert by_id[4]["given_up"] and by_id[4]["committed_at_ms"] is None
    assert by_id[10]["status"] == "PREPARED" and by_id[10]["commit_latency_ms"] is None
    assert data["topics"] == ["orders-out"] and data["transactional_id_prefixes"] == ["orders"]
    assert data["total"] == 10 and data["lso_history"] == {"orders-out": []}


def _poll(partition, lso, hw):
    return SimpleNamespace(topic="orders-out", partition=partition, last_stable_offset=lso, high_watermark=hw)


def test_lso_history_is_a_bounded_ring_per_topic(tmp_path):
    base = tmp_path.as_uri()
    for at in range(5):
        record_samples(base, [_poll(0, 10 * at, 10 * at + at), _poll(1, 5, 5)], START + at, keep=4)
    samples = read_history(base, "orders-out")
    assert len(samples) == 4  # the oldest dropped
    assert samples[-2:] == [
        {"at_ms": START + 4, "partition": 0, "lso": 40, "hw": 44, "lag": 4},
        {"at_ms": START + 4, "partition": 1, "lso": 5, "hw": 5, "lag": 0},
    ]
    page = pipeline_page(_store(tmp_path, count=1), "orders", 10, None)
    assert page["lso_history"]["orders-out"] == samples


def test_an_unwritable_history_does_not_fail_the_poll(tmp_path, caplog):
    (tmp_path / "_lso-history").write_text("a file where the folder should be")
    assert record_samples(tmp_path.as_uri(), [_poll(0, 1, 2)], START) == []
    assert "LSO history" in caplog.text and "not updated" in caplog.text
