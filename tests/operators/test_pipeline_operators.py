"""SparkEosSubmitOperator / KafkaCommitTransactionsOperator: the Airflow-side rules, without Spark.

The end-to-end behaviour (spark-submit, commit, exactly-once) is in test_pipeline.py and
tests/system/faults; here are the rules that must hold before and around the job: where the secrets
go, what a missing connection does, how checkpoint ids are derived, bad manifests.
"""

from __future__ import annotations

import json
import os
import pathlib
import stat
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import Manifest, ManifestStatus, write_manifest
from airflow_provider_kafka_eos.kafka.errors import ConfigError, DataLossError, ManifestError, UsageError
from airflow_provider_kafka_eos.operators.commit import KafkaCommitTransactionsOperator
from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator
from airflow_provider_kafka_eos.tasks.dag_run import checkpoint_id_for_run

pytestmark = pytest.mark.dag

SECRET = "s3cr3t-key-password-4711"


@pytest.fixture
def kafka_conn(monkeypatch):
    extra = {"bootstrap.servers": "127.0.0.1:9", "ssl.key.password": SECRET}
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_EOS_OPS", json.dumps({"conn_type": "kafka_eos", "extra": extra}))
    return "kafka_eos_ops"


def _submit(**kwargs):
    defaults = dict(
        task_id="submit",
        pipeline_id="orders",
        topic="orders-out",
        manifest_base_uri="/tmp/manifests",
        application_callable="my_jobs:build",
        kafka_eos_conn_id="kafka_eos_ops",
    )
    return SparkEosSubmitOperator(**{**defaults, **kwargs})


def test_client_config_reaches_the_job_only_through_a_private_file_that_is_removed(kafka_conn):
    operator = _submit()
    path = operator._write_client_config()
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert json.loads(pathlib.Path(path).read_text())["client_config"]["ssl.key.password"] == SECRET
        args = operator._job_args(42)
        assert SECRET not in " ".join(args) and "bootstrap" not in " ".join(args)
        assert args[args.index("--checkpoint-id") + 1] == "42"
    finally:
        operator._config_file = path
        operator._remove_config_file()
    assert not os.path.exists(path)


def test_missing_spark_connection_fails_instead_of_falling_back_to_yarn(kafka_conn, tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_EOS_PRIVATE_DIR", str(tmp_path))  # where a config file would land
    operator = _submit(conn_id="no_such_spark_conn")
    run_after = datetime(2026, 3, 1, tzinfo=timezone.utc)
    context = {"dag_run": SimpleNamespace(logical_date=None, run_after=run_after)}
    with pytest.raises(AirflowFailException) as excinfo:  # deterministic: fail at once, no retries
        operator.execute(context)
    assert isinstance(excinfo.value.__cause__, ConfigError)
    assert "no_such_spark_conn" in str(excinfo.value) and "yarn" in str(excinfo.value)
    assert "kafka-eos-txn runbook " in str(excinfo.value)
    assert list(tmp_path.iterdir()) == []  # no config file was written


def test_checkpoint_id_is_stable_per_run_and_increases_across_runs():
    """More cases (manual runs within one second, backfills) in tests/kafka/checkpoints/test_identity.py."""
    def run(logical_date, run_after):
        return {"dag_run": SimpleNamespace(logical_date=logical_date, run_after=run_after)}

    first = run(datetime(2026, 3, 1, 10, tzinfo=timezone.utc), datetime(2026, 3, 1, 11, tzinfo=timezone.utc))
    retry = dict(first, ti=SimpleNamespace(try_number=3))
    later = run(datetime(2026, 3, 1, 11, tzinfo=timezone.utc), datetime(2026, 3, 1, 12, tzinfo=timezone.utc))
    assert checkpoint_id_for_run(first) == checkpoint_id_for_run(retry)
    assert checkpoint_id_for_run(later) > checkpoint_id_for_run(first)
    manual = run(None, datetime(2026, 3, 2, tzinfo=timezone.utc))
    assert checkpoint_id_for_run(manual) == int(datetime(2026, 3, 2, tzinfo=timezone.utc).timestamp()) * 10**6
    assert _submit(checkpoint_id="17")._checkpoint_id({}) == 17


def test_bad_naming_strategy_is_refused_at_parse_time():
    with pytest.raises(UsageError, match="naming strategy must be INCREMENTING or POOLING"):
        _submit(naming_strategy="RANDOM")


def test_commit_of_a_malformed_manifest_changes_nothing(tmp_path, kafka_conn):
    uri = tmp_path / "checkpoint-000000000001.json"
    uri.write_text('{"schema_version": 4, "pipeline_id": "x"}')
    operator = KafkaCommitTransactionsOperator(
        task_id="commit", manifest_uri=str(uri), kafka_eos_conn_id=kafka_conn
    )
    with pytest.raises(ManifestError) as excinfo:
        operator.execute({})
    assert str(uri) in str(excinfo.value)
    assert uri.read_text() == '{"schema_version": 4, "pipeline_id": "x"}'


def test_commit_without_a_manifest_uri_names_the_submit_task(kafka_conn):
    operator = KafkaCommitTransactionsOperator(task_id="commit", kafka_eos_conn_id=kafka_conn)
    ti = SimpleNamespace(xcom_pull=lambda task_ids: None)
    with pytest.raises(ManifestError, match="'submit'"):
        operator.execute({"ti": ti})


def test_commit_of_an_aborted_manifest_is_a_named_data_loss(tmp_path, kafka_conn):
    from airflow_provider_kafka_eos.kafka.protocol.committable import Committable

    committable = Committable("orders-0-5", 7, 0, (("orders-out", 0),), 10, 1, 1, 60000, 2, 5)
    manifest = Manifest(
        "orders", 5, "orders", "INCREMENTING", "orders-out", ManifestStatus.ABORTED, [committable], 1, 1
    )
    uri = str(tmp_path / "checkpoint-000000000005.json")
    write_manifest(uri, manifest)
    operator = KafkaCommitTransactionsOperator(
        task_id="commit", manifest_uri=uri, kafka_eos_conn_id=kafka_conn
    )
    with pytest.raises(DataLossError) as excinfo:
        operator.execute({})
    assert "orders-0-5" in str(excinfo.value)
    assert "kafka-eos-txn runbook rerun-a-checkpoint (" in str(excinfo.value)


@pytest.mark.spark
def test_on_kill_stops_the_spark_job_and_removes_the_config_file(kafka_conn, tmp_path, monkeypatch):
    """A real spark-submit whose application blocks; on_kill must end it and clean up."""
    import threading
    import time

    marker = tmp_path / "started"
    app = tmp_path / "blocking_app.py"
    app.write_text(
        "import pathlib, time\n"
        "def build(spark, params):\n"
        f"    pathlib.Path({str(marker)!r}).write_text('x')\n"
        "    time.sleep(300)\n"
    )
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_KILL", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    operator = _submit(
        conn_id="spark_kill", application_callable=f"{app}:build", conf={"spark.ui.enabled": "false"}
    )
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            run_after = datetime(2026, 3, 1, tzinfo=timezone.utc)
            operator.execute({"dag_run": SimpleNamespace(logical_date=None, run_after=run_after)})
        except BaseException as exc:  # the thread reports what ended execute()
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert time.monotonic() < deadline and thread.is_alive(), f"the job never started: {outcome}"
        time.sleep(0.2)
    config_file = operator._config_file
    assert config_file and os.path.exists(config_file)
    operator.on_kill()
    thread.join(60)
    assert not thread.is_alive()
    assert "error" in outcome  # execute failed: spark-submit was killed
    assert operator._eos_hook is not None and operator._eos_hook.exit_code is not None  # the job ended
    assert not os.path.exists(config_file)
    # The Python driver (a child of spark-submit's JVM) must be gone too, not left running.
    driver_gone_by = time.monotonic() + 30
    while _processes_mentioning(str(app)):
        assert time.monotonic() < driver_gone_by, f"driver still running: {_processes_mentioning(str(app))}"
        time.sleep(0.2)


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
