"""The verdict's vocabulary: what became of a prepared transaction, and of a checkpoint.

The types only; the rule that establishes a verdict is ``kafka/admin/verdict.py`` (the admin's
``judge``). They live on the protocol floor so that the checkpoint lifecycle, which is handed an
admin, can read verdicts without importing the admin's layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from airflow_provider_kafka_eos.kafka.errors import KafkaEosError

__all__ = ["GroupEffect", "TxnVerdict", "Verdict", "checkpoint_verdict"]


class Verdict(str, Enum):
    COMMITTED = "committed"  # visible to read_committed consumers (by this or an earlier attempt)
    ABORTED = "aborted"  # its records can never become visible: data loss if it was owed a commit
    OPEN = "open"  # still open under the recorded pair: a commit can finish it
    UNKNOWN = "unknown"  # not established: refuse, change nothing


@dataclass(frozen=True)
class TxnVerdict:
    """One transaction's verdict, how it was established, and what the coordinator holds now.

    ``error`` is what a caller that needed the transaction committable raises: the named data
    loss for ABORTED, :class:`VerdictUnknownError` for UNKNOWN, and for OPEN a transaction that
    cannot be committed safely (too close to its timeout, or not covering its partitions).
    """

    transactional_id: str
    verdict: Verdict
    evidence: str
    producer_id: int | None = None
    producer_epoch: int | None = None
    error: KafkaEosError | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "transactional_id": self.transactional_id,
            "verdict": self.verdict.value,
            "evidence": self.evidence,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
        }


def checkpoint_verdict(verdicts: Mapping[str, TxnVerdict]) -> Verdict | str:
    """One checkpoint's verdict from its transactions': COMMITTED (all committed), ABORTED (none
    visible and at least one aborted), OPEN (none aborted and at least one still open), UNKNOWN
    (any unknown), or ``"torn"``: some committed and some aborted (part of the batch is visible and
    part lost; producing it again would duplicate the visible part)."""
    kinds = {v.verdict for v in verdicts.values()}
    if Verdict.UNKNOWN in kinds:
        return Verdict.UNKNOWN
    if {Verdict.COMMITTED, Verdict.ABORTED} <= kinds:
        return "torn"
    if Verdict.ABORTED in kinds:
        return Verdict.ABORTED
    if Verdict.OPEN in kinds:
        return Verdict.OPEN
    return Verdict.COMMITTED


@dataclass(frozen=True)
class GroupEffect:
    """What a Kafka-input checkpoint's offsets transaction does when it commits: ``group``'s committed
    offsets move from each range's ``from`` to its ``to``. Its records go to ``__consumer_offsets``,
    which the provider does not read, so this visible effect is its data (``kafka/admin/verdict.py``)."""

    group: str
    moves: tuple[tuple[str, int, int, int], ...]  # (topic, partition, from, to)
