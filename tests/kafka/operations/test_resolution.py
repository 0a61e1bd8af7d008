"""ResolutionRequest.validate: the user-facing messages the CLI and the manual DAG share."""

from __future__ import annotations

import pytest

from airflow_provider_kafka_eos.kafka.errors import UsageError
from airflow_provider_kafka_eos.kafka.operations.resolution_request import ResolutionRequest
from airflow_provider_kafka_eos.kafka.validation import parse_duration_ms


def fails(**kwargs) -> str:
    with pytest.raises(UsageError) as err:
        ResolutionRequest(**kwargs).validate()
    assert "Next step: kafka-eos-txn runbook " in str(err.value)
    return str(err.value)


def test_commit_needs_producer_id_and_epoch():
    message = fails(action="commit", transactional_id="t-1", producer_id=7)
    assert message.startswith(
        "t-1: commit needs --producer-id and --epoch (from the checkpoint manifest or `describe`)"
    )


def test_commit_range_checks():
    assert "--epoch must be in 0..32767" in fails(
        action="commit", transactional_id="t", producer_id=1, epoch=40000
    )
    assert "--producer-id must be >= 0" in fails(
        action="commit", transactional_id="t", producer_id=-1, epoch=0
    )


def test_commit_with_manifest_only_becomes_commit_from_manifest():
    request = ResolutionRequest(action="commit", manifest_uri="file:///m.json").validate()
    assert request.action == "commit-from-manifest"
    assert "needs --manifest" in fails(action="commit-from-manifest")


def test_abort_and_describe_need_exactly_one_target():
    assert "needs --transactional-id, or --prefix" in fails(action="abort")
    assert "either --transactional-id or --prefix" in fails(
        action="describe", transactional_id="a", prefixes=("p",)
    )


def test_abort_with_a_manifest_aborts_that_checkpoint():
    request = ResolutionRequest(action="abort", manifest_uri="file:///m.json").validate()
    assert request.action == "abort-checkpoint" and request.manifest_uri == "file:///m.json"
    assert "one of them" in fails(action="abort", prefixes=("p-",), manifest_uri="file:///m.json")


def test_compare_and_abort_needs_both_producer_id_and_epoch():
    request = ResolutionRequest(action="abort", transactional_id="t", producer_id=4, epoch=2).validate()
    assert (request.producer_id, request.epoch) == (4, 2)
    assert "compare-and-abort needs both --producer-id and --epoch" in fails(
        action="abort", transactional_id="t", epoch=1
    )
    assert "only apply to the commit action, or to the abort action with --transactional-id" in fails(
        action="abort", prefixes=("p-",), producer_id=1, epoch=1
    )


def test_abort_is_protected_unless_asked_otherwise():
    assert ResolutionRequest(action="abort", prefixes=("p-",)).validate().protect is True


def test_states_normalised_and_unknown_rejected():
    assert ResolutionRequest(action="list", states=("ongoing",)).validate().states == ("Ongoing",)
    assert "not a Kafka transaction state" in fails(action="list", states=("running",))


def test_misplaced_options_are_rejected():
    assert "only apply to the commit action" in fails(action="list", epoch=1)
    assert "--dry-run applies to abort and commit" in fails(action="list", dry_run=True)
    assert "unknown action" in fails(action="explode")
    assert "preflight needs --prefix" in fails(action="preflight")


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("15m", 900_000),
        ("90s", 90_000),
        ("2h", 7_200_000),
        ("1d", 86_400_000),
        ("250ms", 250),
        (None, None),
        (5000, 5000),
    ],
)
def test_parse_duration(text, ms):
    assert parse_duration_ms(text) == ms


def test_parse_duration_rejects_bare_numbers():
    with pytest.raises(UsageError, match="like 90s, 15m"):
        parse_duration_ms("15")


def test_a_front_end_names_the_fields_its_own_way_with_the_same_rules():
    """The manual DAG's form passes its field names; the rule and the rest of the text are the CLI's."""
    from airflow_provider_kafka_eos.operators.resolve import form_field_names

    names = form_field_names()
    with pytest.raises(UsageError) as err:
        ResolutionRequest(action="commit", transactional_id="t-1", producer_id=7).validate(names)
    assert str(err.value).startswith(
        "t-1: commit needs 'producer_id' and 'epoch' (from the checkpoint manifest or `describe`)"
    )
    with pytest.raises(UsageError) as err:
        ResolutionRequest(action="abort").validate(names)
    assert "abort needs 'transactional_id', or 'prefix' for every" in str(err.value)
