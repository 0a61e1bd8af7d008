"""Input stalls: an LSO stall on a Kafka-input pipeline's input topic, told as what it does to the pipeline.

A Kafka-input checkpoint reads each input partition up to its last stable offset
(``kafka/checkpoints/input_ranges.py``: ``to`` is never past a transaction that may still abort).
So a transaction someone else left open on an input partition stops the pipeline at the offset
where that transaction began, however much committed input follows: the checkpoints keep
committing, the group's lag keeps growing, and nothing says why. The lingering-transaction
sensor watches the input topics (``input_topics``) like any ``lso_partitions`` entry; this module
turns each stall found there into an *input stall*: it names the transaction (transactional id,
producer id and epoch, the partition, since when its coordinator has had it open) and the next
step (runbook ``input-lag``).

The transaction is never the pipeline's own (a pipeline never writes to its input topics: the
submit operator refuses an output topic among them), so the default next step is to have it
ended by its owner; the kind (orphan, commit-pending, foreign) is still the sensor's usual rule,
for a transaction of another pipeline whose prefix is configured as owned.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any, Protocol

from airflow_provider_kafka_eos.kafka.errors import KafkaEosError


class DescribingAdmin(Protocol):
    """What marking input stalls needs of the admin handed in (a TransactionAdmin): DescribeTransactions."""

    def describe(self, ids: Iterable[str], *, missing_ok: bool = False) -> dict[str, Any]: ...

__all__ = ["mark_input_stalls"]


def mark_input_stalls(
    admin: DescribingAdmin, stalls: Iterable[Any], input_topics: Sequence[str]
) -> list[Any]:
    """``stalls`` (``lso_stalls.LsoStall``, which calls this: no import back) with those on
    ``input_topics`` marked as input stalls and explained as such.

    The blocking transactions' start times come from one DescribeTransactions (bounded by the
    admin's request timeout); when it is refused the stall is still reported, saying so.
    """
    stalls = list(stalls)
    topics = set(input_topics)
    named = sorted({s.transactional_id for s in stalls if s.topic in topics and s.transactional_id})
    started: dict[str, int] = {}
    unknown_why = ""
    if named:
        try:
            for tid, description in admin.describe(named, missing_ok=True).items():
                if description.start_time_ms is not None and description.start_time_ms >= 0:
                    started[tid] = int(description.start_time_ms)
        except KafkaEosError as exc:  # e.g. no DESCRIBE on the id: the stall itself is still a fact
            unknown_why = f" (its start is unknown: DescribeTransactions failed: {exc.cause})"
    marked = []
    for stall in stalls:
        if stall.topic not in topics:
            marked.append(stall)
            continue
        start = started.get(stall.transactional_id or "")
        marked.append(dataclasses.replace(stall, pipeline_input=True, txn_started_ms=start,
                                          reason=_reason(stall, start, unknown_why)))
    return marked


def _reason(stall: Any, started_ms: int | None, unknown_why: str) -> str:
    where = f"{stall.topic}-{stall.partition}"
    head = (f"input partition {where}: the pipeline's checkpoints read up to its last stable offset "
            f"{stall.last_stable_offset} and cannot read past it")
    behind = f"{stall.high_watermark - stall.last_stable_offset} record(s) wait behind it"
    if stall.blocking_producer_id is None:
        return (f"{head}; {behind}; no producer with an open transaction at that offset was found "
                f"({stall.reason})")
    who = (f"transaction {stall.transactional_id}" if stall.transactional_id
           else "a transaction whose transactional id is unknown (not listed, or no ListTransactions)")
    since = (f"open since {_utc(started_ms)}" if started_ms is not None
             else f"holding the offset since at least {_utc(stall.stalled_since_ms)}{unknown_why}")
    return (f"{head} while {who} (producer {stall.blocking_producer_id}, epoch "
            f"{stall.blocking_producer_epoch}) is open on {where} from offset {stall.txn_start_offset}, "
            f"{since}; {behind}. Sensor's classification: {stall.kind.value} ({stall.reason})")


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="seconds")
