"""Transaction metadata and the state machine of Kafka's transaction coordinator.

Mirrors ``TransactionState.java`` / ``TransactionMetadata.scala`` (apache/kafka): the states,
their wire names and ids, and the allowed transitions. Kept free of I/O so the coordinator's
rules can be unit-tested without a broker, and so the journal can (de)serialise a record
without knowing anything about requests.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# TransactionMetadata.isEpochExhausted: an epoch >= Short.MaxValue - 1 cannot be bumped twice more
# (fence + retry), so the coordinator rotates to a new producer id instead.
EPOCH_EXHAUSTED_AT = 32766
INT32_MAX = 2147483647  # the stored timeout of a 2PC (KIP-939) transaction
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_PARTITIONS = 50  # offsets.topic.num.partitions default


class Err(enum.IntEnum):
    """Kafka error codes the coordinator answers (``Errors.java``)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    COORDINATOR_LOAD_IN_PROGRESS = 14
    NOT_COORDINATOR = 16
    NOT_ENOUGH_REPLICAS = 19
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    PRODUCER_FENCED = 90
    TRANSACTIONAL_ID_NOT_FOUND = 105
    TRANSACTION_ABORTABLE = 120
    INVALID_REGULAR_EXPRESSION = 128


class TxnState(enum.Enum):
    """Coordinator-side transaction states; value = (id, wire name)."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def wire_name(self) -> str:
        return self.value[1]

    @classmethod
    def from_wire_name(cls, name: str) -> TxnState | None:
        return _BY_WIRE_NAME.get(name)


_BY_WIRE_NAME = {state.wire_name: state for state in TxnState}

S = TxnState
COMPLETE_STATES = frozenset({S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
PREPARE_STATES = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT})

# target <- allowed sources (TransactionState.java validPreviousStates). PrepareAbort may also
# follow Empty/Complete* under TV2 (an "empty abort" bumps the epoch without markers).
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, *COMPLETE_STATES}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, *COMPLETE_STATES}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, *COMPLETE_STATES}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, *COMPLETE_STATES}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransitionError(RuntimeError):
    """A coordinator bug: Kafka treats these as fatal (IllegalStateException)."""


def offsets_partition_for(group_id: str) -> int:
    """The ``__consumer_offsets`` partition of a group: ``Utils.abs(groupId.hashCode) % 50``.

    Computed the Java way so DescribeTransactions shows the same partition a Kafka broker would
    after AddOffsetsToTxn.
    """
    h = 0
    for unit in _utf16_units(group_id):
        h = (31 * h + unit) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    # Utils.abs maps Integer.MIN_VALUE to 0
    return (0 if h == -0x80000000 else abs(h)) % OFFSETS_TOPIC_PARTITIONS


def _utf16_units(text: str):
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        yield (data[i] << 8) | data[i + 1]


@dataclass(slots=True)
class TxnMetadata:
    """What the coordinator knows about one transactional id (``TransactionMetadata``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID
    timeout_ms: int = 60000
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    two_phase: bool = False
    # group id -> {(topic, partition): (offset, metadata)}: TxnOffsetCommit data that becomes
    # visible to the group only when the transaction commits.
    pending_offsets: dict[str, dict[tuple[str, int], tuple[int, str | None]]] = field(default_factory=dict)
    # The transaction protocol version of the request that last completed (1 or 2).
    transaction_version: int = 1

    def transition(self, target: TxnState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalTransitionError(
                f"{self.transactional_id}: illegal transition {self.state.wire_name} -> {target.wire_name}"
            )
        self.state = target
        self.last_update_ms = now_ms

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= EPOCH_EXHAUSTED_AT

    def data_partitions(self) -> list[tuple[str, int]]:
        """Partitions that get a control marker (the offsets topic is handled through the groups)."""
        return sorted(tp for tp in self.partitions if tp[0] != OFFSETS_TOPIC)

    def to_record(self) -> dict[str, Any]:
        return {
            "id": self.transactional_id,
            "pid": self.producer_id,
            "epoch": self.producer_epoch,
            "last_epoch": self.last_producer_epoch,
            "prev_pid": self.previous_producer_id,
            "timeout": self.timeout_ms,
            "state": self.state.wire_name,
            "parts": sorted([t, p] for t, p in self.partitions),
            "start": self.start_ms,
            "updated": self.last_update_ms,
            "2pc": self.two_phase,
            "offsets": {
                group: [[t, p, off, meta] for (t, p), (off, meta) in offsets.items()]
                for group, offsets in self.pending_offsets.items()
            },
            "tv": self.transaction_version,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> TxnMetadata:
        state = TxnState.from_wire_name(rec["state"])
        if state is None:
            raise ValueError(f"unknown transaction state {rec['state']!r} for {rec['id']!r}")
        return cls(
            transactional_id=rec["id"],
            producer_id=rec["pid"],
            producer_epoch=rec["epoch"],
            last_producer_epoch=rec["last_epoch"],
            previous_producer_id=rec["prev_pid"],
            timeout_ms=rec["timeout"],
            state=state,
            partitions={(t, p) for t, p in rec["parts"]},
            start_ms=rec["start"],
            last_update_ms=rec["updated"],
            two_phase=rec["2pc"],
            pending_offsets={
                group: {(t, p): (off, meta) for t, p, off, meta in rows}
                for group, rows in rec.get("offsets", {}).items()
            },
            transaction_version=rec.get("tv", 1),
        )
