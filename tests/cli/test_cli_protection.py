"""``kafka-eos-txn`` is safe by default: the manifest store is read before anything is aborted.

For the CLI's single and bulk abort: a PREPARED checkpoint survives an abort attempt under the
defaults, a store that is missing or not configured refuses and aborts nothing, and after the
commit a read_committed consumer counts every key exactly once. Also: dry runs fail like the
real action, compare-and-abort, and ``kafka-eos-txn abort --manifest URI``.
"""

from __future__ import annotations

import pytest
from eos_cli_helpers import ABORTED_STATES, describe, open_transaction, run_cli, run_cli_json, state_of

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from kafka_eos_testing.transactions import write_prepared_manifest
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker


def keys(tag: str, n: int = 3) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


@pytest.fixture
def world(bootstrap, unique_name, store):
    """Under one prefix: a PREPARED checkpoint (one transaction) and an orphan, both Ongoing."""
    topic, prefix = unique_name("prot-topic"), unique_name("prot") + "-"
    pending, orphan = f"{prefix}0-1", f"{prefix}1-1"
    open_transaction(bootstrap, pending, topic, keys("pending"))
    open_transaction(bootstrap, orphan, topic, keys("orphan"))
    with TransactionAdmin(KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap})) as admin:
        uri = write_prepared_manifest(admin, store, "prot", topic, [pending], prefix=prefix)
    yield {"topic": topic, "prefix": prefix, "pending": pending, "orphan": orphan, "manifest": uri}
    for tid in (pending, orphan):  # the broker is shared: leave nothing open
        if state_of(describe(bootstrap, tid)) == "Ongoing":
            run_cli(
                "abort",
                "--bootstrap-servers",
                bootstrap,
                "--transactional-id",
                tid,
                "--unprotected",
            )


def abort(bootstrap, *args):
    return run_cli("abort", "--bootstrap-servers", bootstrap, *args)


def commit_and_count(bootstrap, world):
    committed = run_cli_json(
        "commit", "--bootstrap-servers", bootstrap, "--manifest", world["manifest"]
    )
    assert [r["outcome"] for r in committed["rows"]] == ["committed"]
    assert read_manifest(world["manifest"]).status is ManifestStatus.COMMITTED
    assert_exactly_once(count_keys(bootstrap, world["topic"]), keys("pending"))


def test_single_abort_refuses_a_prepared_transaction_by_default(bootstrap, store, world):
    for dry in ((), ("--dry-run",)):
        result = abort(bootstrap, "--manifest-base", store, "--transactional-id", world["pending"], *dry)
        assert result.returncode == 1, result.stdout
        assert f"listed in PREPARED manifest {world['manifest']}" in result.stderr
        assert "kafka-eos-txn runbook commit-pending-transaction (" in result.stderr
    assert state_of(describe(bootstrap, world["pending"])) == "Ongoing"
    assert abort(bootstrap, "--manifest-base", store, "--transactional-id", world["orphan"]).returncode == 0
    commit_and_count(bootstrap, world)


def test_bulk_abort_keeps_the_prepared_one_and_a_default_min_age(bootstrap, store, world):
    young = abort(bootstrap, "--manifest-base", store, "--prefix", world["prefix"], "--json")
    assert young.returncode == 0, young.stderr
    assert "minimum age 900 s" in young.stdout  # default: the transaction timeout
    assert all(state_of(describe(bootstrap, t)) == "Ongoing" for t in (world["pending"], world["orphan"]))

    result = abort(bootstrap, "--manifest-base", store, "--prefix", world["prefix"], "--min-age", "0s")
    assert result.returncode == 0, result.stderr
    assert "aborted 1 of 1 transaction(s), 1 refused" in result.stdout
    assert state_of(describe(bootstrap, world["pending"])) == "Ongoing"
    assert state_of(describe(bootstrap, world["orphan"])) in ABORTED_STATES
    commit_and_count(bootstrap, world)


def test_a_pipeline_being_written_is_left_alone_until_its_writer_lease_is_given_back(bootstrap, store, world):
    """The writer holds the lease from its restore to its vote: its open transactions are listed in no
    manifest yet, so an abort from outside (single or bulk, any age) must leave its prefix alone."""
    from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
    from airflow_provider_kafka_eos.kafka.checkpoints.writer_lease import writer_lease

    with writer_lease(ManifestStore.configured(store), pipeline_id="prot",
                      transactional_id_prefix=world["prefix"].rstrip("-"), checkpoint_id=1, holder=None):
        single = abort(bootstrap, "--manifest-base", store, "--transactional-id", world["orphan"])
        assert single.returncode == 1, single.stdout
        assert "its pipeline is being written by a writer that recorded no run, checkpoint 1" in single.stderr
        assert "_writer.json" in single.stderr
        bulk = run_cli_json("abort", "--bootstrap-servers", bootstrap, "--manifest-base", store,
                            "--prefix", world["prefix"], "--min-age", "0s")
        assert {r["transactional_id"]: r["outcome"].startswith("refused: its pipeline is being written")
                for r in bulk["rows"]} == {world["pending"]: False, world["orphan"]: True}
        assert state_of(describe(bootstrap, world["orphan"])) == "Ongoing"
    assert abort(bootstrap, "--manifest-base", store, "--transactional-id", world["orphan"]).returncode == 0
    assert state_of(describe(bootstrap, world["orphan"])) in ABORTED_STATES
    commit_and_count(bootstrap, world)


@pytest.mark.parametrize("how", ["missing", "not-configured"])
def test_unusable_store_refuses_and_aborts_nothing(bootstrap, store, world, tmp_path, how):
    missing = (tmp_path / "no-such-store").as_uri()
    store_args = ("--manifest-base", missing) if how == "missing" else ()
    for target in (("--transactional-id", world["orphan"]), ("--prefix", world["prefix"], "--min-age", "0s")):
        for dry in ((), ("--dry-run",)):
            result = abort(bootstrap, *store_args, *target, *dry)
            assert result.returncode == 1, result.stdout
            assert "Nothing was aborted" in result.stderr or "nothing is aborted" in result.stderr
            assert "kafka-eos-txn runbook manifest-store (" in result.stderr
            if how == "missing":
                assert missing in result.stderr and "does not exist" in result.stderr
            else:
                assert "--manifest-base" in result.stderr
    assert all(state_of(describe(bootstrap, t)) == "Ongoing" for t in (world["pending"], world["orphan"]))
    commit_and_count(bootstrap, world)


def test_store_from_the_environment_and_the_command_config(bootstrap, store, world, tmp_path, monkeypatch):
    props = tmp_path / "client.properties"
    props.write_text(f"bootstrap.servers={bootstrap}\nmanifest_base_uri={store}\n")
    refused = run_cli(
        "abort", "--command-config", str(props), "--transactional-id", world["pending"]
    )
    assert refused.returncode == 1 and "listed in PREPARED manifest" in refused.stderr
    monkeypatch.setenv("KAFKA_EOS_MANIFEST_BASE_URI", store)
    refused = abort(bootstrap, "--transactional-id", world["pending"])
    assert refused.returncode == 1 and "listed in PREPARED manifest" in refused.stderr
    commit_and_count(bootstrap, world)


def test_unprotected_is_explicit_and_loud(bootstrap, world):
    result = abort(bootstrap, "--transactional-id", world["orphan"], "--unprotected")
    assert result.returncode == 0, result.stderr
    assert "WARNING: --unprotected" in result.stderr
    assert state_of(describe(bootstrap, world["orphan"])) in ABORTED_STATES


def test_compare_and_abort_only_the_expected_producer(bootstrap, store, world):
    d = describe(bootstrap, world["orphan"])
    base = (
        "--manifest-base",
        store,
        "--transactional-id",
        world["orphan"],
        "--producer-id",
        str(d.producer_id),
    )
    wrong = abort(bootstrap, *base, "--epoch", str(d.producer_epoch + 1))
    assert wrong.returncode == 1
    assert f"not the expected producer id {d.producer_id} epoch {d.producer_epoch + 1}" in wrong.stderr
    after = describe(bootstrap, world["orphan"])
    assert (state_of(after), after.producer_epoch) == ("Ongoing", d.producer_epoch)  # nothing changed

    right = abort(bootstrap, *base, "--epoch", str(d.producer_epoch))
    assert right.returncode == 0, right.stderr
    assert state_of(describe(bootstrap, world["orphan"])) in ABORTED_STATES
    commit_and_count(bootstrap, world)


def test_abort_a_checkpoint_by_its_manifest_marks_it_aborted(bootstrap, world):
    dry = abort(bootstrap, "--manifest", world["manifest"], "--dry-run")
    assert dry.returncode == 0 and "would abort checkpoint 1" in dry.stdout
    assert read_manifest(world["manifest"]).status is ManifestStatus.PREPARED

    result = abort(bootstrap, "--manifest", world["manifest"])
    assert result.returncode == 0, result.stderr
    assert "manifest marked ABORTED" in result.stdout
    assert read_manifest(world["manifest"]).status is ManifestStatus.ABORTED
    assert state_of(describe(bootstrap, world["pending"])) in ABORTED_STATES
    again = run_cli("commit", "--bootstrap-servers", bootstrap, "--manifest", world["manifest"])
    assert again.returncode == 1 and "is ABORTED" in again.stderr


def test_dry_run_commit_fails_like_the_real_commit(bootstrap, store, world):
    d = describe(bootstrap, world["orphan"])
    assert abort(bootstrap, "--manifest-base", store, "--transactional-id", world["orphan"]).returncode == 0
    args = (
        "commit",
        "--bootstrap-servers",
        bootstrap,
        "--transactional-id",
        world["orphan"],
        "--producer-id",
        str(d.producer_id),
        "--epoch",
        str(d.producer_epoch),
    )
    dry, real = run_cli(*args, "--dry-run"), run_cli(*args)
    assert dry.returncode == real.returncode == 1
    # a pair typed by hand after a fence: unknown to the verdict (no first offsets), in both alike
    assert dry.stderr == real.stderr and "kafka-eos-txn runbook verdict-unknown (" in dry.stderr

    commit_and_count(bootstrap, world)
    again = run_cli_json(
        "commit", "--bootstrap-servers", bootstrap, "--manifest", world["manifest"], "--dry-run"
    )
    assert "was already committed" in again["summary"]
    # A commit that finds the manifest COMMITTED sent nothing: its rows say so, not "committed".
    repeat = run_cli_json(
        "commit", "--bootstrap-servers", bootstrap, "--manifest", world["manifest"]
    )
    assert "was already committed" in repeat["summary"]
    assert [r["outcome"] for r in repeat["rows"]] == ["already_committed"]
