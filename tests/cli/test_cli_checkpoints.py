"""``kafka-eos-txn checkpoints``: which checkpoint holds which input, from a terminal.

The installed console script over a real local manifest store (no Kafka: the action reads only
the store, so no broker is started; the command takes no broker address at all).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from airflow_provider_kafka_eos.kafka.checkpoints.identity import InputRecord, RunIdentity
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    Manifest,
    ManifestStatus,
    manifest_uri,
    write_manifest,
)
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition

CLI = str(Path(sys.executable).with_name("kafka-eos-txn"))


def _write(base: Path, checkpoint: int, status: ManifestStatus, input_record: InputRecord | None) -> str:
    committable = Committable(f"orders-0-{checkpoint}", 7, 0, (TopicPartition("out", 0),), 25, 1, 1,
                              60_000, 2, 5)
    manifest = Manifest("orders", checkpoint, "orders", "INCREMENTING", "out", status, [committable],
                        1_770_000_000_000, 1_770_000_000_000,
                        prepared_by=RunIdentity("eos_pipeline", f"manual__{checkpoint}", 1, None),
                        input=input_record)
    uri = manifest_uri(str(base), "orders", checkpoint)
    write_manifest(uri, manifest)
    return uri


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=60)


def test_checkpoints_lists_status_input_and_run_and_filters_by_input(tmp_path):
    legacy = _write(tmp_path, 10, ManifestStatus.COMMITTED, None)  # written without an input_id
    first = _write(tmp_path, 20, ManifestStatus.COMMITTED, InputRecord("B1"))
    again = _write(tmp_path, 30, ManifestStatus.PREPARED, InputRecord("B1", reprocess_of=20))

    table = run("checkpoints", "--manifest-base", str(tmp_path))
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["PIPELINE_ID", "CHECKPOINT_ID", "STATUS", "INPUT", "REPROCESS_OF", "RUN",
                                "RECORDS", "TRANSACTIONS", "UPDATED", "MANIFEST"]
    assert lines[1].split()[:3] == ["orders", "10", "COMMITTED"] and legacy in lines[1]
    assert lines[2].split()[:4] == ["orders", "20", "COMMITTED", "B1"] and "manual__20" in lines[2]
    assert lines[3].split()[:5] == ["orders", "30", "PREPARED", "B1", "20"]
    assert lines[-1] == f"3 checkpoint(s) in {tmp_path}"

    only = run("checkpoints", "--manifest-base", str(tmp_path), "--pipeline-id", "orders",
               "--input-id", "B1", "--json")
    assert only.returncode == 0, only.stderr
    rows = json.loads(only.stdout)["rows"]
    got = [(r["checkpoint_id"], r["manifest"], r["records"]) for r in rows]
    assert got == [(20, first, 25), (30, again, 25)]


def test_checkpoints_refuses_a_missing_store_and_misplaced_options(tmp_path):
    missing = run("checkpoints", "--manifest-base", str(tmp_path / "nope"))
    assert missing.returncode == 1
    assert f"manifest store {tmp_path / 'nope'}" in missing.stderr and "does not exist" in missing.stderr
    unset = run("checkpoints")
    assert unset.returncode == 1 and "no manifest store is configured" in unset.stderr
    # A read-only listing aborted nothing and was never going to: its errors do not talk of aborts.
    assert "abort" not in missing.stderr.lower() and "abort" not in unset.stderr.lower()
    misplaced = run("list", "--input-id", "B1")
    assert misplaced.returncode == 2
    assert "unrecognized arguments: --input-id B1" in misplaced.stderr


def test_checkpoints_names_the_run_writing_a_pipeline_now(tmp_path):
    """The checkpoint being prepared has no manifest yet: the summary names its writer lease's holder."""
    from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
    from airflow_provider_kafka_eos.kafka.checkpoints.writer_lease import writer_lease

    _write(tmp_path, 10, ManifestStatus.COMMITTED, None)
    holder = RunIdentity("eos_pipeline", "backfill__2026-01-02", 1, None)
    with writer_lease(ManifestStore.configured(str(tmp_path)), pipeline_id="orders",
                      transactional_id_prefix="orders", checkpoint_id=11, holder=holder):
        for scope in ((), ("--pipeline-id", "orders")):
            result = run("checkpoints", "--manifest-base", str(tmp_path), *scope)
            assert result.returncode == 0, result.stderr
            assert result.stdout.splitlines()[-1].startswith(
                f"1 checkpoint(s) in {tmp_path}; being written: pipeline orders by run "
                "'backfill__2026-01-02' of DAG 'eos_pipeline' (try 1), checkpoint 11, on "), result.stdout
            assert "(writer lease " in result.stdout and "_writer.json, renewed until " in result.stdout
    after = run("checkpoints", "--manifest-base", str(tmp_path))
    assert after.stdout.splitlines()[-1] == f"1 checkpoint(s) in {tmp_path}"
