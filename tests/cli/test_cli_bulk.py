"""``kafka-eos-txn`` bulk work: list, dry-run bulk abort with a protecting manifest, commit-from-manifest."""

from __future__ import annotations

import time

import pytest
from eos_cli_helpers import (
    ABORTED_STATES,
    committable_of,
    describe,
    open_transaction,
    run_cli,
    run_cli_json,
    state_of,
)

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    Manifest,
    ManifestStatus,
    manifest_uri,
    read_manifest,
    write_manifest,
)
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker


def test_list_dry_run_bulk_abort_respects_prepared_manifest_then_commit_it(bootstrap, unique_name, store):
    topic, prefix = unique_name("bulk-topic"), unique_name("bulk") + "-"
    ids = [f"{prefix}{i}-7" for i in range(3)]
    for tid in ids:
        open_transaction(bootstrap, tid, topic, [f"{tid}-k{j}".encode() for j in range(4)])
    other_prefix_id = unique_name("bulk-other")
    open_transaction(bootstrap, other_prefix_id, topic, [b"other-key"])

    prepared = ids[1]
    uri = manifest_uri(store, "bulk", 7)
    write_manifest(uri, _manifest(prefix, topic, [committable_of(bootstrap, prepared, 4)]))

    listed = run_cli_json(
        "list", "--bootstrap-servers", bootstrap, "--prefix", prefix, "--state", "Ongoing"
    )
    assert sorted(r["transactional_id"] for r in listed["rows"]) == ids
    assert {r["state"] for r in listed["rows"]} == {"Ongoing"}

    abort = (
        "abort",
        "--bootstrap-servers",
        bootstrap,
        "--prefix",
        prefix,
        "--manifest-base",
        store,
    )
    dry = run_cli_json(*abort, "--min-age", "0s", "--dry-run")
    outcomes = {r["transactional_id"]: r["outcome"] for r in dry["rows"]}
    assert outcomes[ids[0]] == outcomes[ids[2]] == "would abort"
    assert outcomes[prepared].startswith(f"refused: listed in PREPARED manifest {uri}")
    assert "nothing was aborted" in dry["summary"]
    assert all(state_of(describe(bootstrap, t)) == "Ongoing" for t in ids)

    table = run_cli(*abort, "--min-age", "0s")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split() == ["TRANSACTIONAL_ID", "STATE", "PRODUCER_ID", "OUTCOME"]
    assert "aborted 2 of 2 transaction(s), 1 refused" in table.stdout
    assert state_of(describe(bootstrap, ids[0])) in ABORTED_STATES
    assert state_of(describe(bootstrap, ids[2])) in ABORTED_STATES
    assert state_of(describe(bootstrap, prepared)) == "Ongoing"
    assert state_of(describe(bootstrap, other_prefix_id)) == "Ongoing"  # outside the prefix: untouched

    single = run_cli(
        "abort",
        "--bootstrap-servers",
        bootstrap,
        "--manifest-base",
        store,
        "--transactional-id",
        prepared,
    )
    assert single.returncode == 1 and "refusing to abort" in single.stderr and prepared in single.stderr
    assert "kafka-eos-txn runbook commit-pending-transaction (" in single.stderr

    committed = run_cli_json("commit", "--bootstrap-servers", bootstrap, "--manifest", uri)
    assert [r["outcome"] for r in committed["rows"]] == ["committed"]
    assert read_manifest(uri).status == ManifestStatus.COMMITTED
    assert_exactly_once(count_keys(bootstrap, topic), [f"{prepared}-k{j}" for j in range(4)])

    # Clean up the foreign transaction so it does not hold the session broker's LSO for other tests.
    assert (
        run_cli(
            "abort",
            "--bootstrap-servers",
            bootstrap,
            "--manifest-base",
            store,
            "--transactional-id",
            other_prefix_id,
        ).returncode
        == 0
    )


def _manifest(prefix, topic, committables) -> Manifest:
    now = int(time.time() * 1000)
    return Manifest(
        pipeline_id="bulk",
        checkpoint_id=7,
        transactional_id_prefix=prefix,
        naming_strategy="INCREMENTING",
        topic=topic,
        status=ManifestStatus.PREPARED,
        committables=committables,
        created_at_ms=now,
        updated_at_ms=now,
    )


def test_describe_and_find_hanging_by_prefix(bootstrap, unique_name, store):
    topic, prefix = unique_name("hang-topic"), unique_name("hang") + "-"
    tid = f"{prefix}0-1"
    open_transaction(bootstrap, tid, topic, [b"h1", b"h2"])
    described = run_cli_json("describe", "--bootstrap-servers", bootstrap, "--prefix", prefix)
    (row,) = described["rows"]
    assert (
        row["transactional_id"] == tid and row["state"] == "Ongoing" and row["partitions"].startswith(topic)
    )

    young = run_cli_json(
        "find-hanging", "--bootstrap-servers", bootstrap, "--prefix", prefix, "--min-age", "1h"
    )
    assert young["rows"] == []
    hanging = run_cli_json(
        "find-hanging", "--bootstrap-servers", bootstrap, "--prefix", prefix, "--min-age", "0s"
    )
    assert [r["transactional_id"] for r in hanging["rows"]] == [tid]
    # Its records sit past the last stable offset: the open transaction pins read_committed consumers.
    assert hanging["rows"][0]["lso_stalled"] == row["partitions"] + " (2 behind)"
    assert hanging["rows"][0]["next_step"] == "abort (if no manifest lists it; pass --manifest-base to check)"
    aborted = run_cli(
        "abort",
        "--bootstrap-servers",
        bootstrap,
        "--manifest-base",
        store,
        "--transactional-id",
        tid,
    )
    assert aborted.returncode == 0


def test_preflight_on_an_open_cluster_prints_capabilities(bootstrap, unique_name):
    result = run_cli(
        "preflight",
        "--bootstrap-servers",
        bootstrap,
        "--prefix",
        unique_name("pf") + "-",
        "--topic",
        unique_name("pf-topic"),
        "--transaction-timeout-ms",
        "60000",
    )
    assert result.returncode == 0, result.stderr
    assert "preflight OK" in result.stdout
    assert "Kafka cluster capabilities" in result.stdout and "EndTxn" in result.stdout
    too_long = run_cli(
        "preflight",
        "--bootstrap-servers",
        bootstrap,
        "--prefix",
        "p-",
        "--transaction-timeout-ms",
        str(10**9),
    )
    assert too_long.returncode == 1 and "exceeds the broker's transaction.max.timeout.ms" in too_long.stdout


def test_progress_bar_only_on_a_terminal(bootstrap, unique_name, store):
    import os
    import pty
    import subprocess

    from eos_cli_helpers import CLI

    topic, prefix = unique_name("prog-topic"), unique_name("prog") + "-"
    for i in range(2):
        open_transaction(bootstrap, f"{prefix}{i}-1", topic, [b"p"])
    bulk = (
        "abort",
        "--bootstrap-servers",
        bootstrap,
        "--prefix",
        prefix,
        "--manifest-base",
        store,
    )
    piped = run_cli(*bulk, "--min-age", "0s", "--dry-run")
    assert piped.returncode == 0 and "aborting" not in piped.stderr + piped.stdout

    primary, secondary = pty.openpty()
    try:
        process = subprocess.Popen(
            [CLI, *bulk, "--min-age", "0s"],
            stdout=secondary,
            stderr=secondary,
            stdin=subprocess.DEVNULL,
        )
        os.close(secondary)
        output = b""
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
        assert process.wait(timeout=60) == 0
    finally:
        os.close(primary)
    text = output.decode(errors="replace")
    assert "aborting" in text and "100%" in text
    assert "aborted 2 of 2 transaction(s), 0 refused" in text
