"""The pipeline DAGs' transaction deadline (``tasks/deadline.py``): the alert Airflow sends when a run
is not done a fraction of the transaction timeout after it was queued.

The callback is run by Airflow's own runner of deadline callbacks (``CallbackTrigger``, what the
triggerer runs for an ``AsyncCallback``) with the context Airflow gives it (``Deadline.handle_miss``:
the DAG run as the REST API shows it), against a manifest store holding a real PREPARED checkpoint:
a transaction left open on the embedded broker with a 15 s transaction timeout. The scheduler's part
(the deadline row, marking it missed, queueing the callback to the triggerer) runs in
tests/system/airflow_scheduler/test_real_scheduler.py.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import pathlib
from datetime import timedelta

import pytest
from airflow.triggers.callback import CallbackTrigger
from txn_helpers import connect_admin, set_kafka_eos_connection

from airflow_provider_kafka_eos.kafka.checkpoints.identity import RunIdentity
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    ManifestStatus,
    read_manifest,
    write_manifest,
)
from airflow_provider_kafka_eos.tasks import airflow_features, deadline
from airflow_provider_kafka_eos.tasks.deadline import deadline_fraction, transaction_deadline
from kafka_eos_testing.embedded import unique_name
from kafka_eos_testing.transactions import produce_transaction, write_prepared_manifest

DAGS = pathlib.Path(__file__).resolve().parents[2] / "dags"
SHORT_TIMEOUT_MS = 15_000


def _example_dag(monkeypatch, name: str, **env: str):
    monkeypatch.delenv("KAFKA_EOS_PIPELINE_DEADLINE_FRACTION", raising=False)  # off in tests/conftest.py
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    spec = importlib.util.spec_from_file_location(f"deadline_test_{name}", DAGS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def test_the_example_pipelines_carry_the_documented_deadline(monkeypatch):
    """Half the transaction timeout after the run was queued (the documented default), its callback
    told the pipeline, connection and store the DAG's tasks use; the setting changes it, ``off``
    removes it."""
    for name, pipeline in (("eos_pipeline", "user_activity"), ("eos_kafka_to_kafka", "events_upper")):
        [alert] = _example_dag(monkeypatch, name).deadline
        assert type(alert.reference).__name__ == "DagRunQueuedAtDeadline"
        assert alert.interval == timedelta(seconds=450)  # 0.5 x 900 s
        assert alert.callback.path == f"{deadline.__name__}.prepared_checkpoint_alert"
        assert alert.callback.kwargs == {"kafka_eos_conn_id": "kafka_eos_default", "pipeline_id": pipeline,
                                         "manifest_base_uri": None, "fraction": 0.5,
                                         "transaction_timeout_ms": 900_000, "read_timeout_s": 60.0}
    [alert] = _example_dag(monkeypatch, "eos_pipeline", KAFKA_EOS_PIPELINE_DEADLINE_FRACTION="0.25",
                           KAFKA_EOS_PIPELINE_TXN_TIMEOUT_MS="600000").deadline
    assert alert.interval == timedelta(seconds=150)
    assert deadline_fraction("off") is None and deadline_fraction(None) == 0.5
    with pytest.raises(ValueError, match=r"^FRACTION is '1\.5': it must lie between 0 and 1"):
        deadline_fraction("1.5", setting="FRACTION")


def test_an_airflow_without_deadline_alerts_gets_no_deadline_and_says_so(monkeypatch, caplog):
    monkeypatch.setattr(airflow_features, "airflow_version", lambda: (3, 0))
    with caplog.at_level(logging.INFO, logger=deadline.__name__):
        assert transaction_deadline(kafka_eos_conn_id="c", pipeline_id="p",
                                    transaction_timeout_ms=60_000) is None
    assert "pipeline 'p': no transaction deadline (this Airflow has no deadline alerts, added in 3.1)" \
        in caplog.text


def _fire(alert, run_id: str, conf: dict, **dag_run: str) -> tuple[str, str]:
    """Run the alert's callback as the triggerer does, with the context ``Deadline.handle_miss`` builds
    (``dag_run``: more of the run's JSON fields, e.g. its ``logical_date``)."""
    context = {"dag_run": {"dag_id": "eos_pipeline", "dag_run_id": run_id, "conf": conf, "state": "failed",
                           **dag_run},
               "deadline": {"id": "d-1", "deadline_time": "2026-01-01T00:00:00+00:00"}}
    trigger = CallbackTrigger(alert.callback.path, {**alert.callback.kwargs, "context": context})

    async def events():
        return [e.payload async for e in trigger.run()]

    *_, last = asyncio.run(asyncio.wait_for(events(), 60))
    return str(last["state"]), str(last.get("body"))


def _alert_levels(caplog) -> list[str]:
    return [r.levelname for r in caplog.records if r.name == "airflow_provider_kafka_eos.tasks.deadline"]


@pytest.mark.broker
@pytest.mark.provider_logic
def test_the_alert_names_a_prepared_checkpoint_with_a_short_timeout_and_is_quiet_once_it_committed(
    kafka_broker, monkeypatch, tmp_path, caplog
):
    conn_id = set_kafka_eos_connection(monkeypatch, kafka_broker.bootstrap, conn_id="eos_deadline")
    pipeline, run_id, store = unique_name("deadline").replace("-", "_"), "manual__late-run", tmp_path.as_uri()
    tid = f"{pipeline}-0-1"
    produce_transaction(kafka_broker.bootstrap, tid, unique_name("deadline-out"), [b"k1"], commit=False,
                        transaction_timeout_ms=SHORT_TIMEOUT_MS)
    with connect_admin(kafka_broker.bootstrap) as admin:
        uri = write_prepared_manifest(admin, store, pipeline, "out", [tid], checkpoint_id=1)
    manifest = read_manifest(uri)
    manifest.prepared_by = RunIdentity("eos_pipeline", run_id, 1)
    write_manifest(uri, manifest)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    # the DAG's pipeline and store are the defaults; the run's conf names its own, as the tasks read them
    alert = transaction_deadline(kafka_eos_conn_id=conn_id, pipeline_id="user_activity",
                                 transaction_timeout_ms=SHORT_TIMEOUT_MS, fraction=0.5)
    assert alert.interval == timedelta(milliseconds=7_500)

    with caplog.at_level(logging.WARNING, logger="airflow_provider_kafka_eos.tasks.deadline"):
        state, body = _fire(alert, run_id, {"pipeline_id": pipeline, "manifest_base_uri": store})
    assert state == "success", body
    assert f"pipeline {pipeline!r}: run 'manual__late-run' passed its deadline (0.5 of the 15 s " in body
    assert "checkpoint 1 (this run, 1 transaction(s)) is PREPARED and not committed" in body
    assert "of its 15 s transaction timeout" in body and f"kafka-eos-txn commit --manifest {uri}" in body
    assert "kafka-eos-txn runbook commit-pending-transaction" in body
    assert _alert_levels(caplog) == ["ERROR"] and body in caplog.text
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before  # read only

    manifest.status = ManifestStatus.COMMITTED
    write_manifest(uri, manifest)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="airflow_provider_kafka_eos.tasks.deadline"):
        state, body = _fire(alert, run_id, {"pipeline_id": pipeline, "manifest_base_uri": store})
    assert state == "success", body
    assert "no checkpoint of the pipeline is PREPARED: nothing is at risk yet" in body
    assert "older one(s) were not read" not in body  # every checkpoint was read
    assert _alert_levels(caplog) == ["WARNING"]

    # A backfill's checkpoint lies below the newest the alert reads (1 here, 500 shipped): the alert
    # says what it did not read instead of speaking for the whole pipeline.
    manifest.status = ManifestStatus.PREPARED
    write_manifest(uri, manifest)
    newer = read_manifest(uri)
    newer.checkpoint_id, newer.status = 2, ManifestStatus.COMMITTED
    write_manifest(uri.replace("000000000001", "000000000002"), newer)
    monkeypatch.setattr(deadline, "RECENT_CHECKPOINTS", 1)
    state, body = _fire(alert, run_id, {"pipeline_id": pipeline, "manifest_base_uri": store})
    assert state == "success", body
    assert "checkpoint 1 " not in body  # not read
    assert ("read: the pipeline's newest 1 checkpoints; 1 older one(s) were not read, and a PREPARED one "
            "among them (another run's, a backfill's) is not named here: kafka-eos-txn checkpoints "
            f"--manifest-base <store> --pipeline-id {pipeline} lists them all") in body

    # The run's own checkpoint is read by name however old: the id its submit task derives from the
    # run's logical date (1 microsecond past the epoch here: checkpoint 1, a backfill's).
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="airflow_provider_kafka_eos.tasks.deadline"):
        state, body = _fire(alert, run_id, {"pipeline_id": pipeline, "manifest_base_uri": store},
                            logical_date="1970-01-01T00:00:00.000001Z", run_after="2026-11-28T12:00:00Z")
    assert state == "success", body
    assert "checkpoint 1 (this run, 1 transaction(s)) is PREPARED and not committed" in body
    assert "not read" not in body  # the page and the run's own: nothing else older
    assert _alert_levels(caplog) == ["ERROR"]
    # Without a logical date the run's run_after decides (a manual run): checkpoint 1 is not that one.
    state, body = _fire(alert, run_id, {"pipeline_id": pipeline, "manifest_base_uri": store},
                        run_after="2026-11-28T12:00:00Z")
    assert "checkpoint 1 " not in body
    assert f"newest 1 checkpoints and this run's own (checkpoint {1795867200000000}); 1 older one(s)" in body


def test_a_store_that_does_not_exist_fails_the_callback_by_name_instead_of_reporting_nothing_prepared(
    monkeypatch, tmp_path
):
    conn_id = set_kafka_eos_connection(monkeypatch, "127.0.0.1:9", conn_id="eos_deadline_nostore")
    missing = (tmp_path / "no-such-store").as_uri()
    alert = transaction_deadline(kafka_eos_conn_id=conn_id, pipeline_id="p", transaction_timeout_ms=60_000,
                                 manifest_base_uri=missing)
    state, body = _fire(alert, "manual__r", {})
    assert state == "failed"
    assert f"manifest store {missing} (from manifest_base_uri) does not exist" in body
    assert "kafka-eos-txn runbook manifest-store" in body
