"""KafkaAbortTransactionsOperator against the embedded broker: what it aborts, what it never touches."""

from __future__ import annotations

import pytest
from txn_helpers import produce_in_transaction, set_kafka_eos_connection, states, write_prepared_manifest

from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint
from airflow_provider_kafka_eos.kafka.errors import ManifestStoreError, UnknownTransactionError
from airflow_provider_kafka_eos.kafka.operations.scan import Findings
from airflow_provider_kafka_eos.operators.abort import KafkaAbortTransactionsOperator
from airflow_provider_kafka_eos.sensors.lingering import KafkaLingeringTransactionSensor
from kafka_eos_testing.embedded import unique_name
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = pytest.mark.broker


def operator(**kwargs) -> KafkaAbortTransactionsOperator:
    return KafkaAbortTransactionsOperator(task_id=unique_name("abort"), **kwargs)


@pytest.fixture
def store(tmp_path) -> str:
    """An empty manifest store (the operator reads one before it aborts anything)."""
    (tmp_path / "empty-store").mkdir()
    return (tmp_path / "empty-store").as_uri()


@pytest.fixture
def three_kinds(kafka_broker, admin, tmp_path):
    """An orphan, a commit-pending and a foreign transaction, all open on one topic."""
    ours, theirs, topic = unique_name("ours") + "-", unique_name("theirs") + "-", unique_name("topic")
    ids = {"orphan": f"{ours}0-1", "pending": f"{ours}1-1", "foreign": f"{theirs}0-1"}
    for tid in ids.values():
        produce_in_transaction(kafka_broker.bootstrap, tid, topic, [tid], commit=False)
    base = tmp_path.as_uri()
    uri = write_prepared_manifest(admin, base, "pipe", topic, [ids["pending"]])
    return {"ours": ours, "theirs": theirs, "topic": topic, "ids": ids, "base": base, "manifest": uri}


def test_aborts_orphans_from_a_prefix_and_never_commit_pending_or_foreign(admin, kafka_eos_conn, three_kinds):
    ids = three_kinds["ids"]
    report = operator(
        prefixes=[three_kinds["ours"], three_kinds["theirs"]],
        owned_prefixes=[three_kinds["ours"]],
        manifest_base_uri=three_kinds["base"],
    ).execute({})

    assert report["aborted"] == [ids["orphan"]]
    assert sorted(report["skipped"]) == sorted([ids["pending"], ids["foreign"]])
    rows = {row["transactional_id"]: row for row in report["rows"]}
    assert rows[ids["pending"]]["kind"] == "commit-pending"
    assert rows[ids["pending"]]["reason"].startswith(f"listed in PREPARED manifest {three_kinds['manifest']}")
    assert rows[ids["foreign"]]["kind"] == "foreign"
    assert rows[ids["foreign"]]["reason"].startswith("outside the configured prefixes")
    # Fenced: the coordinator aborted the open transaction and now holds a higher epoch, idle.
    assert states(admin, ids.values()) == {
        ids["orphan"]: "Empty",
        ids["pending"]: "Ongoing",
        ids["foreign"]: "Ongoing",
    }


def test_a_pipeline_whose_writer_holds_its_lease_is_left_alone(admin, kafka_broker, kafka_eos_conn,
                                                               three_kinds):
    """Its open transactions are listed in no manifest until its vote: the orphan of a live writer is
    skipped, then aborted once the writer gave its lease back; the prepared one is committed."""
    from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
    from airflow_provider_kafka_eos.kafka.checkpoints.writer_lease import writer_lease

    ids = three_kinds["ids"]
    args = {"prefixes": [three_kinds["ours"]], "manifest_base_uri": three_kinds["base"]}
    with writer_lease(ManifestStore.configured(three_kinds["base"]), pipeline_id="pipe",
                      transactional_id_prefix=three_kinds["ours"].rstrip("-"), checkpoint_id=9, holder=None):
        during = operator(**args).execute({})
    assert during["aborted"] == []
    reasons = {row["transactional_id"]: row["reason"] for row in during["rows"]}
    assert reasons[ids["orphan"]].startswith(
        "its pipeline is being written by a writer that recorded no run, checkpoint 9")
    assert states(admin, [ids["orphan"]]) == {ids["orphan"]: "Ongoing"}
    after = operator(**args).execute({})
    assert after["aborted"] == [ids["orphan"]]
    commit_checkpoint(admin, three_kinds["manifest"], committed_by="test")
    assert_exactly_once(count_keys(kafka_broker.bootstrap, three_kinds["topic"]), [ids["pending"]])


def test_dry_run_aborts_nothing_and_second_run_is_a_no_op(admin, kafka_eos_conn, three_kinds):
    ids = three_kinds["ids"]
    once = {"transactional_ids": [ids["orphan"]], "owned_prefixes": [three_kinds["ours"]]}
    dry = operator(**once, manifest_base_uri=three_kinds["base"], dry_run=True).execute({})
    assert dry["aborted"] == [ids["orphan"]] and dry["rows"][0]["action"] == "would-abort"
    assert states(admin, [ids["orphan"]]) == {ids["orphan"]: "Ongoing"}

    first = operator(**once, manifest_base_uri=three_kinds["base"]).execute({})
    assert first["rows"][0]["action"] == "aborted"
    second = operator(**once, manifest_base_uri=three_kinds["base"]).execute({})
    assert second["aborted"] == [] and second["skipped"] == [ids["orphan"]]
    assert second["rows"][0]["reason"] == "not open (state Empty): nothing to abort"


def test_unknown_id_fails_before_anything_is_aborted(admin, kafka_eos_conn, three_kinds):
    ids = three_kinds["ids"]
    unknown = unique_name("never-used")
    with pytest.raises(
        UnknownTransactionError,
        match=rf"^{unknown}: .*Next step: kafka-eos-txn runbook unknown-transaction \(",
    ):
        operator(
            transactional_ids=[ids["orphan"], unknown],
            owned_prefixes=[three_kinds["ours"]],
            manifest_base_uri=three_kinds["base"],
        ).execute({})
    assert states(admin, [ids["orphan"]]) == {ids["orphan"]: "Ongoing"}
    with pytest.raises(UnknownTransactionError):
        admin.describe([unknown])


def test_named_overrides_abort_commit_pending_and_foreign(admin, kafka_eos_conn, three_kinds):
    ids = three_kinds["ids"]
    report = operator(
        transactional_ids=[ids["pending"], ids["foreign"]],
        owned_prefixes=[three_kinds["ours"]],
        manifest_base_uri=three_kinds["base"],
        protect=False,
        force_abort_foreign=True,
    ).execute({})
    assert sorted(report["aborted"]) == sorted([ids["pending"], ids["foreign"]])
    assert report["protect"] is False
    reasons = {row["transactional_id"]: row["reason"] for row in report["rows"]}
    assert reasons[ids["pending"]].startswith("UNPROTECTED: listed in PREPARED manifest")
    assert set(states(admin, [ids["pending"], ids["foreign"]]).values()) == {"Empty"}


def test_sensor_findings_are_rechecked_a_new_epoch_is_left_alone(
    kafka_broker, admin, kafka_eos_conn, three_kinds
):
    """Between sensor and abort the id was reused by a new producer: aborting it would kill live work."""
    ids = three_kinds["ids"]
    findings = (
        KafkaLingeringTransactionSensor(
            task_id="s", prefixes=[three_kinds["ours"]], min_age=0, manifest_base_uri=three_kinds["base"]
        )
        .poke({})
        .xcom_value
    )
    assert {f.transactional_id: f.kind.value for f in Findings.from_dict(findings).transactions} == {
        ids["orphan"]: "orphan",
        ids["pending"]: "commit-pending",
    }
    # The orphan's id is taken over by a new producer (fences and re-opens it at a higher epoch).
    produce_in_transaction(kafka_broker.bootstrap, ids["orphan"], three_kinds["topic"], ["new"], commit=False)

    report = operator(findings=findings, manifest_base_uri=three_kinds["base"]).execute({})
    assert report["aborted"] == []
    reasons = {row["transactional_id"]: row["reason"] for row in report["rows"]}
    assert "another producer uses this id now" in reasons[ids["orphan"]]
    assert reasons[ids["pending"]].startswith("listed in PREPARED manifest")
    assert states(admin, [ids["orphan"], ids["pending"]]) == {
        ids["orphan"]: "Ongoing",
        ids["pending"]: "Ongoing",
    }


def test_after_abort_and_commit_consumers_get_past_the_former_lso(
    kafka_broker, admin, kafka_eos_conn, tmp_path
):
    """The orphan pins the LSO at offset 0; once it is aborted and the prepared one committed,
    read_committed consumers see exactly the committed keys."""
    from airflow_provider_kafka_eos.kafka.operations.resolution import run_resolution
    from airflow_provider_kafka_eos.kafka.operations.resolution_request import ResolutionRequest

    prefix, topic = unique_name("lso") + "-", unique_name("topic")
    orphan, pending = f"{prefix}0-1", f"{prefix}1-1"
    produce_in_transaction(kafka_broker.bootstrap, orphan, topic, ["o1", "o2"], commit=False)
    produce_in_transaction(kafka_broker.bootstrap, pending, topic, ["p1", "p2"], commit=False)
    produce_in_transaction(kafka_broker.bootstrap, unique_name("other"), topic, ["c1"], commit=True)
    base = tmp_path.as_uri()
    uri = write_prepared_manifest(admin, base, "pipe", topic, [pending])
    assert count_keys(kafka_broker.bootstrap, topic) == {}  # stuck at the LSO behind the orphan

    operator(prefixes=[prefix], manifest_base_uri=base).execute({})
    run_resolution(admin, ResolutionRequest(action="commit-from-manifest", manifest_uri=uri))

    counts = count_keys(kafka_broker.bootstrap, topic)
    assert_exactly_once(counts, [b"p1", b"p2", b"c1"])


def test_an_lso_stall_finding_of_ours_is_aborted_and_releases_the_partition(
    kafka_broker, admin, kafka_eos_conn, store
):
    """Found only through the LSO watch (its prefix is not listed), named via DescribeProducers."""
    ours, topic = unique_name("stalled") + "-", unique_name("topic")
    blocker = f"{ours}0-1"
    produce_in_transaction(kafka_broker.bootstrap, blocker, topic, ["held"], commit=False)
    produce_in_transaction(kafka_broker.bootstrap, unique_name("steady"), topic, ["c1", "c2"], commit=True)
    findings = (
        KafkaLingeringTransactionSensor(
            task_id="s",
            prefixes=[unique_name("unlisted")],
            owned_prefixes=[ours],
            min_age=0,
            lso_partitions=[f"{topic}:0"],
            min_lso_stall=0,
            manifest_base_uri=store,
        )
        .poke({})
        .xcom_value
    )
    [stall] = Findings.from_dict(findings).lso_stalls
    assert (stall.transactional_id, stall.kind.value) == (blocker, "orphan")

    report = operator(findings=findings, manifest_base_uri=store).execute({})

    assert report["aborted"] == [blocker]
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [b"c1", b"c2"])


# -- safe by default (issue 9): the store is read before anything is aborted --------------------


def test_prepared_survives_the_defaults_with_the_connection_store(
    kafka_broker, admin, monkeypatch, three_kinds
):
    """No manifest_base_uri on the operator: the connection extra's store protects the prepared id."""
    ids = three_kinds["ids"]
    set_kafka_eos_connection(monkeypatch, kafka_broker.bootstrap, manifest_base_uri=three_kinds["base"])
    report = operator(prefixes=[three_kinds["ours"]]).execute({})
    assert report["aborted"] == [ids["orphan"]]
    assert states(admin, [ids["pending"]]) == {ids["pending"]: "Ongoing"}
    commit_checkpoint_and_count(kafka_broker, admin, three_kinds)


@pytest.mark.provider_logic  # the operator's refusal before it asks any broker
@pytest.mark.parametrize("how", ["missing", "not-configured"])
def test_unusable_store_refuses_and_aborts_nothing(
    admin, kafka_broker, monkeypatch, three_kinds, tmp_path, how
):
    ids = three_kinds["ids"]
    set_kafka_eos_connection(monkeypatch, kafka_broker.bootstrap)  # no manifest_base_uri in its extra
    missing = (tmp_path / "no-such-store").as_uri()
    with pytest.raises(ManifestStoreError) as err:
        operator(
            prefixes=[three_kinds["ours"]], manifest_base_uri=missing if how == "missing" else None
        ).execute({})
    text = str(err.value)
    assert "kafka-eos-txn runbook manifest-store (" in text
    assert (missing in text) if how == "missing" else ("manifest_base_uri in the extra of connection" in text)
    assert states(admin, [ids["orphan"], ids["pending"]]) == {
        ids["orphan"]: "Ongoing",
        ids["pending"]: "Ongoing",
    }
    commit_checkpoint_and_count(kafka_broker, admin, three_kinds)


def commit_checkpoint_and_count(kafka_broker, admin, three_kinds) -> None:
    """Commit the prepared checkpoint; with the others aborted, consumers see its key exactly once."""
    ids = three_kinds["ids"]
    admin.abort([t for t, s in states(admin, [ids["orphan"], ids["foreign"]]).items() if s == "Ongoing"])
    report = commit_checkpoint(admin, three_kinds["manifest"], committed_by="test")
    assert report.status == "committed"
    assert_exactly_once(
        count_keys(kafka_broker.bootstrap, three_kinds["topic"]), [three_kinds["ids"]["pending"]]
    )
    admin.abort([three_kinds["ids"]["foreign"]])  # the broker is shared: leave nothing open
