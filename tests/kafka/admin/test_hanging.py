"""abort-partition's rules that need no broker: what "hanging" means, and the request's validation
(one topic and partition; producer id and epoch both or neither; its options nowhere else)."""

from __future__ import annotations

import pytest

from airflow_provider_kafka_eos.kafka.admin.hanging import PartitionOpenTransaction
from airflow_provider_kafka_eos.kafka.errors import UsageError
from airflow_provider_kafka_eos.kafka.operations.resolution_request import ResolutionRequest


def _txn(state: str | None) -> PartitionOpenTransaction:
    return PartitionOpenTransaction("orders", 3, 4001, 0, 17, 0, True, "etl-3-1" if state else None, state)


@pytest.mark.parametrize(
    ("state", "hanging"),
    [
        (None, True),
        ("CompleteAbort", True),
        ("CompleteCommit", True),
        ("Empty", True),
        ("Ongoing", False),
        ("PrepareCommit", False),
        ("PrepareAbort", False),
    ],
)
def test_hanging_means_no_open_coordinator_entry(state, hanging):
    assert _txn(state).hanging is hanging
    assert _txn(state).to_row()["coordinator_state"] == (state or "(no entry)")


def test_abort_partition_request_rules():
    ok = ResolutionRequest("abort-partition", topics=("orders",), partition=3).validate()
    assert ok.partition == 3 and ok.producer_id is None
    assert (
        ResolutionRequest(
            "abort-partition",
            topics=("orders",),
            partition=0,
            producer_id=7,
            epoch=1,
            force=True,
            dry_run=True,
        )
        .validate()
        .force
    )
    refusals = {
        "abort-partition needs one --topic and its --partition": dict(topics=("orders",)),
        "abort-partition needs one --topic": dict(topics=("a", "b"), partition=1),
        "--partition must be >= 0": dict(topics=("orders",), partition=-1),
        "takes both --producer-id and --epoch": dict(topics=("orders",), partition=1, producer_id=7),
        "does not take --prefix": dict(topics=("orders",), partition=1, prefixes=("etl-",)),
        "does not take --transactional-id": dict(topics=("orders",), partition=1, transactional_id="t"),
    }
    for text, fields in refusals.items():
        with pytest.raises(UsageError, match=text.replace("(", r"\(")):
            ResolutionRequest("abort-partition", **fields).validate()
    with pytest.raises(UsageError, match="--force applies to the abort-partition action only"):
        ResolutionRequest("abort", transactional_id="t", force=True).validate()
    with pytest.raises(UsageError, match="--partition applies to abort-partition and find-hanging only"):
        ResolutionRequest("list", partition=2).validate()
