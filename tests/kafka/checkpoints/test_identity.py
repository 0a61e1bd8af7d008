"""Checkpoint identity: one checkpoint per run, the run recorded in the manifest, never a silent skip.

Pure logic (no broker, no Spark): how a run's checkpoint id is derived, how the manifest records
the run that prepared it, and the one rule that decides
what a run does with a manifest it finds for its checkpoint. The data path (records counted by a
read_committed consumer) is in tests/system/dags/test_manual_runs.py and
tests/kafka/checkpoints/test_checkpoint_backfill.py.
"""

from __future__ import annotations

import json
import pathlib
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from airflow_provider_kafka_eos.kafka.checkpoints.identity import (
    Reuse,
    RunIdentity,
    checkpoint_id_from_datetime,
    reuse_verdict,
)
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    SCHEMA_VERSION,
    Manifest,
    ManifestStatus,
    find_manifests,
    manifest_uri,
    read_manifest,
    write_manifest,
)
from airflow_provider_kafka_eos.kafka.errors import CheckpointConflictError, ManifestError, UsageError
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition

T0 = datetime(2026, 3, 1, 10, 0, 0, 250_000, tzinfo=timezone.utc)


def _context(*, logical_date=None, run_after=T0, run_id="manual__1", try_number=1, dag_id="eos_pipeline"):
    dag_run = SimpleNamespace(dag_id=dag_id, run_id=run_id, logical_date=logical_date, run_after=run_after)
    return {"dag_run": dag_run, "ti": SimpleNamespace(try_number=try_number), "run_id": run_id}


def _manifest(checkpoint_id=7, status=ManifestStatus.COMMITTED, prepared_by=None) -> Manifest:
    committable = Committable("orders-0-7", 4001, 0, (TopicPartition("orders", 0),), 3, 1, 1, 60_000, 2, 5)
    return Manifest("orders", checkpoint_id, "orders", "INCREMENTING", "orders", status, [committable], 1, 2,
                    prepared_by=prepared_by)


# -- checkpoint ids ----------------------------------------------------------------------------


def test_checkpoint_id_is_microseconds_exactly_and_naive_means_utc():
    assert checkpoint_id_from_datetime(datetime(1970, 1, 1, 0, 0, 1, 5, tzinfo=timezone.utc)) == 1_000_005
    assert checkpoint_id_from_datetime(T0.replace(tzinfo=None)) == checkpoint_id_from_datetime(T0)
    # Far from the epoch a float timestamp would round; the integer arithmetic does not.
    late = datetime(2286, 11, 20, 17, 46, 39, 999_999, tzinfo=timezone.utc)
    assert checkpoint_id_from_datetime(late) % 1_000_000 == 999_999
    # Every microsecond id is larger than every whole-second id an older release wrote.
    assert checkpoint_id_from_datetime(datetime(2001, 1, 1, tzinfo=timezone.utc)) > int(late.timestamp())


def test_two_manual_runs_within_one_second_get_different_increasing_ids():
    from airflow_provider_kafka_eos.tasks.dag_run import checkpoint_id_for_run

    first = _context(run_after=T0, run_id="manual__a")
    second = _context(run_after=T0 + timedelta(milliseconds=300), run_id="manual__b")
    assert int(T0.timestamp()) == int((T0 + timedelta(milliseconds=300)).timestamp())  # the same second
    assert checkpoint_id_for_run(first) < checkpoint_id_for_run(second)


def test_a_retry_and_a_clear_of_one_run_keep_its_checkpoint_id():
    from airflow_provider_kafka_eos.tasks.dag_run import checkpoint_id_for_run

    ids = {checkpoint_id_for_run(_context(try_number=n)) for n in (1, 2, 5)}
    assert ids == {checkpoint_id_from_datetime(T0)}


def test_a_dated_run_is_named_by_its_logical_date_and_a_backfill_gets_a_smaller_id():
    from airflow_provider_kafka_eos.tasks.dag_run import checkpoint_id_for_run

    hour = timedelta(hours=1)
    scheduled = _context(logical_date=T0, run_after=T0 + hour)
    assert checkpoint_id_for_run(scheduled) == checkpoint_id_from_datetime(T0)
    backfill = _context(logical_date=T0 - 5 * hour, run_after=T0 + 2 * hour)
    assert checkpoint_id_for_run(backfill) < checkpoint_id_for_run(scheduled)


def test_a_run_without_dates_is_a_usage_error():
    from airflow_provider_kafka_eos.tasks.dag_run import checkpoint_id_for_run

    with pytest.raises(UsageError, match="checkpoint_id explicitly"):
        checkpoint_id_for_run({"dag_run": SimpleNamespace(logical_date=None, run_after=None)})


def test_a_run_record_as_airflow_sends_it_outside_a_task_names_the_same_checkpoint():
    """The deadline callback gets the run as JSON (``DAGRunResponse``): the same rule, the same id."""
    from airflow_provider_kafka_eos.tasks.dag_run import checkpoint_id_for_run, checkpoint_id_of_run_record

    hour = timedelta(hours=1)
    backfill = _context(logical_date=T0 - 5 * hour, run_after=T0 + 2 * hour)
    manual = _context(run_after=T0 + timedelta(microseconds=7))
    record = {"logical_date": (T0 - 5 * hour).isoformat(), "run_after": (T0 + 2 * hour).isoformat()}
    assert checkpoint_id_of_run_record(record) == checkpoint_id_for_run(backfill)
    run_after = (T0 + timedelta(microseconds=7)).isoformat().replace("+00:00", "Z")
    manual_record = {"logical_date": None, "run_after": run_after}
    assert checkpoint_id_of_run_record(manual_record) == checkpoint_id_for_run(manual)
    assert checkpoint_id_of_run_record({}) is None
    assert checkpoint_id_of_run_record({"logical_date": "not a date"}) is None


def test_run_identity_from_the_task_context():
    from airflow_provider_kafka_eos.tasks.dag_run import run_identity

    run = run_identity(_context(logical_date=T0, run_id="scheduled__x", try_number=2))
    assert run == RunIdentity("eos_pipeline", "scheduled__x", 2, T0.isoformat())
    assert run_identity({}) is None


# -- the manifest records the run; a manifest of another schema is refused and left alone ---------


def test_manifest_round_trips_the_run_that_prepared_it(tmp_path):
    run = RunIdentity("eos_pipeline", "manual__a", 3, None)
    uri = manifest_uri(str(tmp_path), "orders", 7)
    write_manifest(uri, _manifest(prepared_by=run))
    on_disk = json.loads(pathlib.Path(uri).read_text())
    assert on_disk["schema_version"] == SCHEMA_VERSION == 4
    assert on_disk["prepared_by"] == {"dag_id": "eos_pipeline", "run_id": "manual__a", "try_number": 3,
                                      "logical_date": None}
    assert read_manifest(uri).prepared_by == run


@pytest.mark.parametrize("version", [1, 2, 3, 5])
def test_a_manifest_of_another_schema_is_refused_by_name_and_left_unchanged(tmp_path, version):
    uri = manifest_uri(str(tmp_path), "orders", 7)
    old = _manifest().to_dict()
    old["schema_version"] = version
    (tmp_path / "orders").mkdir()
    pathlib.Path(uri).write_text(json.dumps(old))
    before = pathlib.Path(uri).read_bytes()
    with pytest.raises(ManifestError) as excinfo:
        read_manifest(uri)
    message = str(excinfo.value)
    assert uri in message and f"'schema_version' is {version}" in message
    assert "reads schema version 4 only" in message
    step = "upgrade the provider" if version > SCHEMA_VERSION else "move the manifest out of the store"
    assert step in message
    assert pathlib.Path(uri).read_bytes() == before


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("prepared_by"), "'prepared_by' is missing"),
        (lambda d: d.update(prepared_by="run-1"), "'prepared_by' must be dict/NoneType"),
        (lambda d: d.update(prepared_by={"dag_id": "d"}), "prepared_by.run_id must be a non-empty string"),
        (lambda d: d.update(prepared_by={"dag_id": "d", "run_id": "r", "try_number": True}), "try_number"),
        (lambda d: d.update(prepared_by={"dag_id": "d", "run_id": "r", "host": "x"}), "unknown field 'host'"),
    ],
)
def test_bad_prepared_by_is_named(change, message):
    data = _manifest(prepared_by=RunIdentity("d", "r", 1)).to_dict()
    change(data)
    with pytest.raises(ManifestError, match=message.replace("(", r"\(")):
        Manifest.from_dict(data, source="m.json")


def test_manifests_sort_by_checkpoint_number_not_by_file_name(tmp_path):
    for checkpoint in (999_999_999_999, 1_000_000_000_000, 5):
        write_manifest(manifest_uri(str(tmp_path), "orders", checkpoint), _manifest(checkpoint))
    assert [m.checkpoint_id for _, m in find_manifests(str(tmp_path), "orders")] == [
        5, 999_999_999_999, 1_000_000_000_000]


# -- what a run does with the manifest it finds -------------------------------------------------


def test_the_same_run_reuses_its_checkpoint():
    owner = RunIdentity("eos_pipeline", "manual__a", 1)
    verdict = reuse_verdict(_manifest(prepared_by=owner), "u", RunIdentity("eos_pipeline", "manual__a", 2),
                            explicit_checkpoint=False)
    assert verdict.reuse is Reuse.SAME_RUN and "try 1 of this run" in verdict.message
    verdict.raise_if_conflict()


def test_a_different_run_on_a_derived_id_is_a_conflict_naming_both_runs():
    owner = RunIdentity("eos_pipeline", "manual__a", 1)
    verdict = reuse_verdict(_manifest(prepared_by=owner), "file:///m/orders/c.json",
                            RunIdentity("eos_pipeline", "manual__b", 1), explicit_checkpoint=False)
    assert verdict.reuse is Reuse.CONFLICT
    with pytest.raises(CheckpointConflictError) as excinfo:
        verdict.raise_if_conflict()
    text = str(excinfo.value)
    assert "'manual__a'" in text and "'manual__b'" in text and "Nothing was written" in text
    assert "docs/runbook/rerun-a-checkpoint.md" in text


def test_a_manifest_without_a_run_conflicts_with_a_derived_id():
    verdict = reuse_verdict(_manifest(), "u", RunIdentity("d", "r", 1), explicit_checkpoint=False)
    assert verdict.reuse is Reuse.CONFLICT and "recorded no run" in verdict.message


def test_an_explicit_checkpoint_id_means_dedupe_and_says_duplicate_of_run_x():
    owner = RunIdentity("eos_pipeline", "manual__a", 1)
    verdict = reuse_verdict(_manifest(prepared_by=owner), "u", RunIdentity("eos_pipeline", "manual__b", 1),
                            explicit_checkpoint=True)
    assert verdict.reuse is Reuse.DUPLICATE
    assert "duplicate of run 'manual__a'" in verdict.message and "nothing written" in verdict.message


def test_a_recreated_run_of_the_same_logical_date_is_a_duplicate_not_a_conflict():
    date = T0.isoformat()
    owner = RunIdentity("eos_pipeline", "scheduled__old", 1, date)
    new = RunIdentity("eos_pipeline", "manual__new", 1, date)
    verdict = reuse_verdict(_manifest(prepared_by=owner), "u", new, explicit_checkpoint=False)
    assert verdict.reuse is Reuse.DUPLICATE
    other_dag = RunIdentity("other_dag", "manual__new", 1, date)
    assert reuse_verdict(_manifest(prepared_by=owner), "u", other_dag, explicit_checkpoint=False).reuse \
        is Reuse.CONFLICT


def test_outside_airflow_a_checkpoint_id_names_a_batch():
    assert reuse_verdict(_manifest(), "u", None, explicit_checkpoint=False).reuse is Reuse.DUPLICATE


# -- the operator turns the verdict into the task's result --------------------------------------


class _TI:
    def __init__(self, try_number=1):
        self.try_number = try_number
        self.pushed: dict = {}

    def xcom_push(self, key, value):
        self.pushed[key] = value


def _judge(manifest, *, context, explicit=None):
    from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator
    from airflow_provider_kafka_eos.tasks.dag_run import run_identity

    operator = SparkEosSubmitOperator(task_id="submit", pipeline_id="orders", topic="orders",
                                      manifest_base_uri="/m", application_callable="m:f",
                                      checkpoint_id=explicit)
    operator._judge_reuse(context, manifest, "/m/orders/c.json", run_identity(context))


def test_operator_skips_a_duplicate_and_says_so_in_its_result():
    from airflow.sdk.exceptions import AirflowSkipException

    ti = _TI()
    context = dict(_context(run_id="manual__b"), ti=ti)
    owner = RunIdentity("eos_pipeline", "manual__a", 1)
    with pytest.raises(AirflowSkipException, match=r"duplicate of run 'manual__a'.*nothing written"):
        _judge(_manifest(prepared_by=owner), context=context, explicit="7")
    assert ti.pushed["checkpoint"]["outcome"] == "duplicate"
    assert ti.pushed["checkpoint"]["prepared_by"]["run_id"] == "manual__a"


def test_operator_fails_a_conflict_and_accepts_its_own_run():
    ti = _TI(try_number=2)
    context = dict(_context(run_id="manual__b", try_number=2), ti=ti)
    with pytest.raises(CheckpointConflictError):
        _judge(_manifest(prepared_by=RunIdentity("eos_pipeline", "manual__a", 1)), context=context)
    assert ti.pushed["checkpoint"]["outcome"] == "conflict"
    _judge(_manifest(prepared_by=RunIdentity("eos_pipeline", "manual__b", 1)), context=context)
    assert ti.pushed["checkpoint"]["outcome"] == "same_run"
    _judge(_manifest(prepared_by=RunIdentity("eos_pipeline", "manual__b", 2)), context=context)
    assert ti.pushed["checkpoint"]["outcome"] == "prepared"
