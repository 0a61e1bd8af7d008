"""The values transaction-coordinator operations speak in: states, descriptions, outcomes.

Kept apart from :mod:`~airflow_provider_kafka_eos.kafka.admin.transactions` so that the rules
(:mod:`~airflow_provider_kafka_eos.kafka.admin.commit_rules`), the EndTxn and fencing modules and
their callers share one definition without importing the admin. Plain data and how it reads
in messages; no I/O, no Airflow imports.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import Enum
from typing import Any

from airflow_provider_kafka_eos.kafka.protocol.committable import TopicPartition

__all__ = [
    "FenceResult",
    "TransactionDescription",
    "TransactionListing",
    "TxnOutcome",
    "TxnState",
]


class TxnState(str, Enum):
    """Coordinator transaction states as DescribeTransactions / ListTransactions spell them."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    def __str__(self) -> str:
        return self.value  # "Ongoing", as Kafka's tools print it (tables, logs, XComs)

    __format__ = str.__format__

    @classmethod
    def parse(cls, value: str) -> TxnState | str:
        try:
            return cls(value)
        except ValueError:
            return value  # a state a newer broker invented: keep its name, match nothing


@dataclass(frozen=True)
class TransactionDescription:
    """One transactional id as its coordinator describes it."""

    transactional_id: str
    state: TxnState | str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1 when no transaction is open
    partitions: tuple[TopicPartition, ...]
    coordinator_id: int | None = None

    @property
    def deadline_ms(self) -> int | None:
        """When the coordinator times the open transaction out (its clock), None if none is open."""
        return None if self.start_time_ms < 0 else self.start_time_ms + self.timeout_ms

    def age_ms(self, now_ms: int | None = None) -> int | None:
        if self.start_time_ms < 0:
            return None
        return (now_ms if now_ms is not None else wall_clock_ms()) - self.start_time_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "transactional_id": self.transactional_id,
            "state": str(getattr(self.state, "value", self.state)),
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "timeout_ms": self.timeout_ms,
            "start_time_ms": self.start_time_ms,
            "partitions": [str(p) for p in self.partitions],
        }


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: TxnState | str


@dataclass(frozen=True)
class TxnOutcome:
    """What commit/abort did to one transaction.

    ``outcome``: ``committed`` / ``already_committed`` (commit); ``aborted`` / ``already_aborted`` /
    ``already_committed`` / ``already_completed`` (abort: the transaction ended on its own between
    our describe and our fence, so there was nothing left to abort).
    """

    transactional_id: str
    outcome: str
    producer_id: int | None = None
    producer_epoch: int | None = None
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "transactional_id": self.transactional_id,
            "outcome": self.outcome,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class FenceResult:
    """What InitProducerId left behind: the id's producer id / epoch, and whether it aborted an
    open transaction (the coordinator answered CONCURRENT_TRANSACTIONS while fencing it)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    aborted_open_transaction: bool


def wall_clock_ms() -> int:
    """Wall-clock milliseconds, the unit the coordinator reports start times in."""
    return int(time.time() * 1000)


def state_name(state: Any) -> str:
    """A state as messages print it (a :class:`TxnState` or a name a newer broker invented)."""
    return str(getattr(state, "value", state))


def holder_text(d: TransactionDescription | None) -> str:
    """Who holds a transactional id, for "the coordinator holds ..." messages."""
    if d is None:
        return "an unknown producer"
    return f"producer id {d.producer_id}, epoch {d.producer_epoch} (state {state_name(d.state)})"
