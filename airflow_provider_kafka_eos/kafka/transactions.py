"""TransactionAdmin: the transaction-coordinator operations the whole provider is built on.

- *describe / list / find_lingering*: what the coordinators know (KIP-664 APIs).
- *commit* ("commit by resume"): EndTxn(commit) with the committable's producer id / epoch,
  sent by a process that never produced a record. Every committable of a batch is verified
  first and nothing is committed unless all pass, so a batch is never half-visible because
  of a defect we could have seen.
- *abort* ("abort by fencing"): InitProducerId for the transactional id; the coordinator bumps
  the epoch and aborts the open transaction. Describe comes first because InitProducerId on an
  unknown id would create it.
- *abort_in_place*: EndTxn(abort) with a known producer id / epoch.

Every failure is a :mod:`~airflow_provider_kafka_eos.kafka.errors` class naming the
transaction, the cause and the runbook page; every error path is detected before the
request that would change broker state, or is the broker refusing that request.
No Airflow imports: Spark executors and the CLI use this module directly.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

from kafka.protocol.admin.transactions import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.producer.transaction import EndTxnRequest, InitProducerIdRequest

from airflow_provider_kafka_eos.kafka.committable import Committable, TopicPartition
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import (
    AuthorizationError,
    BrokerUnreachableError,
    DataLossError,
    KafkaEosError,
    ProducerFencedError,
    TransactionTimeoutRiskError,
    UnknownTransactionError,
    UnsupportedCapabilityError,
)
from airflow_provider_kafka_eos.kafka.lanes import DEFAULT_LANES, Lanes, check_lanes, lane_counts, split
from airflow_provider_kafka_eos.kafka.wire import Wire, error_name

__all__ = [
    "FenceResult",
    "TransactionAdmin",
    "TransactionDescription",
    "TransactionListing",
    "TxnOutcome",
    "TxnState",
    "verify_committable",
]

# Kafka error codes we act on (names as in the protocol guide).
NONE = 0
NOT_COORDINATOR = 16
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
REQUEST_TIMED_OUT = 7
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
RETRIABLE = frozenset(
    {
        NOT_COORDINATOR,
        COORDINATOR_LOAD_IN_PROGRESS,
        COORDINATOR_NOT_AVAILABLE,
        CONCURRENT_TRANSACTIONS,
        REQUEST_TIMED_OUT,
    }
)
_DESCRIBE_BATCH = 1000
_T = TypeVar("_T")


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
        return (now_ms if now_ms is not None else _now_ms()) - self.start_time_ms

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


@dataclass
class _Retry:
    """Deadline + exponential backoff for retriable coordinator answers."""

    deadline: float
    backoff_s: float = 0.02
    max_backoff_s: float = 0.5
    attempts: int = field(default=0)

    def wait(self) -> bool:
        """Back off before the next attempt; False when the deadline would pass."""
        self.attempts += 1
        delay = min(self.max_backoff_s, self.backoff_s * (2 ** min(self.attempts - 1, 10)))
        if time.monotonic() + delay > self.deadline:
            return False
        time.sleep(delay)  # a backoff between protocol retries, not a synchronisation wait
        return True


class TransactionAdmin:
    """Transaction-coordinator operations over one kafka-python connection pool.

    Use as a context manager. ``connect_timeout_ms`` bounds how long an unreachable cluster can
    stall a call before :class:`BrokerUnreachableError`; ``retry_timeout_ms`` bounds how long
    retriable answers (CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, ...) are retried;
    ``safety_margin_ms`` is how close to its timeout a prepared transaction may be and still be
    committed (the commit must land before the coordinator's abort scan). ``deadline`` (a
    ``time.monotonic()`` value) bounds every call of this admin, retries included: the CLI's
    ``--timeout``. ``lanes`` is how many connections per transaction coordinator a large
    commit or abort may spread over (:mod:`~airflow_provider_kafka_eos.kafka.lanes`: Kafka
    handles one request per connection at a time); the extra ones are opened on demand, share
    the deadline, and are closed with the admin.
    """

    def __init__(
        self,
        config: KafkaClientConfig,
        *,
        connect_timeout_ms: int = 5000,
        request_timeout_ms: int = 15000,
        retry_timeout_ms: int = 30000,
        safety_margin_ms: int = 5000,
        clock_ms: Callable[[], int] | None = None,
        deadline: float | None = None,
        lanes: int = DEFAULT_LANES,
    ):
        self.config = config
        self.deadline = deadline
        self.retry_timeout_ms = retry_timeout_ms
        self.safety_margin_ms = safety_margin_ms
        self.lanes = check_lanes(lanes)
        self._clock_ms = clock_ms or _now_ms

        def open_wire() -> Wire:
            return Wire(
                config,
                connect_timeout_ms=connect_timeout_ms,
                request_timeout_ms=request_timeout_ms,
                deadline=deadline,
            )

        self.wire = open_wire()
        self._lanes = Lanes(self.wire, open_wire)

    def __enter__(self) -> TransactionAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._lanes.close()
        self.wire.close()

    @property
    def requests_sent(self) -> dict[str, int]:
        """Requests sent so far on every lane, per API (for benchmarks and request-budget tests)."""
        return dict(self._lanes.requests())

    @property
    def lanes_opened(self) -> int:
        """Connection pools open now (1 + the extra lanes a large commit or abort opened)."""
        return self._lanes.opened

    def transaction_version(self) -> int:
        """The cluster's finalized ``transaction.version`` (0/1 = TV1 semantics, 2 = TV2)."""
        return int(self.wire.finalized_features().get("transaction.version", 0))

    def end_txn_version(self) -> int:
        """The EndTxn version a commit must use for transactions prepared now (v5 only under TV2)."""
        version = self.wire.api_version(EndTxnRequest)
        if version is None:
            raise UnsupportedCapabilityError("the cluster does not support EndTxn (transactions)")
        return version if self.transaction_version() >= 2 else min(version, 4)

    # -- describe / list ---------------------------------------------------------------------

    def describe(self, ids: Iterable[str], *, missing_ok: bool = False) -> dict[str, TransactionDescription]:
        """DescribeTransactions for each id, batched per coordinator.

        An id the coordinator does not know raises UnknownTransactionError (or is left out of
        the result with ``missing_ok=True``).
        """
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        result: dict[str, TransactionDescription] = {}
        pending = ids
        retry = self._retry()
        unreachable: BrokerUnreachableError | None = None
        while pending:
            coordinators = self.wire.coordinators(pending)
            by_node: dict[int, list[str]] = defaultdict(list)
            again: list[str] = []
            for tid in pending:
                node = coordinators[tid]
                if isinstance(node, Exception):
                    code = getattr(node, "errno", -1)
                    if code not in RETRIABLE:
                        self._raise_for_code(tid, code, "FindCoordinator")
                    again.append(tid)  # coordinator loading or moving: ask again after a backoff
                    continue
                by_node[node].append(tid)
            batch = [
                (DescribeTransactionsRequest(transactional_ids=chunk), node)
                for node, tids in by_node.items()
                for chunk in _chunks(tids, _DESCRIBE_BATCH)
            ]
            answers = self.wire.send_all(batch, raise_errors=False)
            for (request, node), response in zip(batch, answers, strict=True):
                if isinstance(response, BrokerUnreachableError):
                    # The coordinator died or restarts: look it up again (its partition moves).
                    self._forget_coordinators(request.transactional_ids)
                    again.extend(request.transactional_ids)
                    unreachable = response
                    continue
                for row in response.transaction_states:
                    tid = row.transactional_id
                    if row.error_code == TRANSACTIONAL_ID_NOT_FOUND:
                        if not missing_ok:
                            raise UnknownTransactionError(
                                "the transaction coordinator does not know this transactional id (never "
                                "used, or expired after transactional.id.expiration.ms)",
                                transactional_id=tid,
                            )
                        continue
                    if row.error_code in RETRIABLE:
                        if row.error_code == NOT_COORDINATOR:
                            self.wire.forget_coordinator(tid)
                        again.append(tid)
                        continue
                    if row.error_code:
                        self._raise_for_code(tid, row.error_code, "DescribeTransactions")
                    result[tid] = _description(row, node)
            pending = again
            if pending and not retry.wait():
                reason = f" (last: {unreachable.cause})" if unreachable is not None else ""
                raise BrokerUnreachableError(
                    f"coordinators kept answering retriable errors or could not be reached for "
                    f"{len(pending)} transaction(s) for {self.retry_timeout_ms} ms{reason}",
                    transactional_id=pending[0],
                )
        return result

    def list(
        self,
        prefixes: Sequence[str] | None = None,
        states: Sequence[str] | None = None,
        min_age_ms: int | None = None,
    ) -> list[TransactionListing]:
        """ListTransactions on every broker, filtered by id prefix, state and age.

        Uses the broker's filters when it has them (states: v0; age: v1 DurationFilter;
        prefixes: v2 TransactionalIdPattern) and always re-applies them client-side, so the
        answer is the same on every cluster version. Without DurationFilter the age filter
        needs DescribeTransactions (start times are not listed).
        """
        listings = self._list_filtered(prefixes, states, min_age_ms)
        if min_age_ms is not None and listings:
            # Client-side age check (also guards against clock skew in the server-side filter).
            now = self._clock_ms()
            described = self.describe(listings, missing_ok=True)
            listings = {
                t: entry
                for t, entry in listings.items()
                if t in described and (described[t].age_ms(now) or -1) >= min_age_ms
            }
        return sorted(listings.values(), key=lambda entry: entry.transactional_id)

    def _list_filtered(
        self, prefixes: Sequence[str] | None, states: Sequence[str] | None, min_age_ms: int | None
    ) -> dict[str, TransactionListing]:
        """ListTransactions with every filter the broker supports; prefixes and states re-applied here."""
        version = self.wire.api_version(ListTransactionsRequest)
        if version is None:
            raise UnsupportedCapabilityError(
                "the cluster does not support ListTransactions (Kafka 3.0+); use the PROBING abort strategy"
            )
        prefixes = [p for p in (prefixes or []) if p]
        wanted_states = {str(getattr(s, "value", s)) for s in (states or [])}
        kwargs: dict[str, Any] = {"state_filters": sorted(wanted_states), "producer_id_filters": []}
        if min_age_ms is not None and version >= 1:
            kwargs["duration_filter"] = max(0, int(min_age_ms) - 1)  # broker: now - start > d
        if prefixes and version >= 2:
            kwargs["transactional_id_pattern"] = _prefix_pattern(prefixes)
        batch = [(ListTransactionsRequest(**kwargs, version=version), node) for node in self.wire.brokers()]
        listings: dict[str, TransactionListing] = {}
        for response in self.wire.send_all(batch):
            if response.error_code:
                self._raise_for_code(None, response.error_code, "ListTransactions")
            for row in response.transaction_states:
                if prefixes and not row.transactional_id.startswith(tuple(prefixes)):
                    continue
                if wanted_states and row.transaction_state not in wanted_states:
                    continue
                listings[row.transactional_id] = TransactionListing(
                    row.transactional_id, row.producer_id, TxnState.parse(row.transaction_state)
                )
        return listings

    def find_lingering(
        self, prefixes: Sequence[str] | None = None, min_age_ms: int = 0
    ) -> list[TransactionDescription]:
        """Ongoing transactions (of these prefixes) open for at least ``min_age_ms``."""
        listed = self._list_filtered(prefixes, [TxnState.ONGOING.value], min_age_ms or None)
        described = self.describe(list(listed), missing_ok=True)
        now = self._clock_ms()
        found = [
            d
            for d in described.values()
            if d.state == TxnState.ONGOING and (d.age_ms(now) or -1) >= min_age_ms
        ]
        return sorted(found, key=lambda d: d.transactional_id)

    # -- commit --------------------------------------------------------------------------------

    def verify_committable(
        self, committable: Committable, description: TransactionDescription, now_ms: int | None = None
    ) -> str:
        """:func:`verify_committable` with this admin's clock and safety margin."""
        return verify_committable(
            committable,
            description,
            now_ms=self._clock_ms() if now_ms is None else now_ms,
            safety_margin_ms=self.safety_margin_ms,
        )

    def commit(
        self, committables: Sequence[Committable], *, max_workers: int = 16, lanes: int | None = None
    ) -> list[TxnOutcome]:
        """Commit every committable, or none if any fails verification.

        Phase 1 describes all of them and verifies each (Ongoing with the same producer id / epoch
        covering its partitions, or already CompleteCommit by that producer; deadline not within
        the safety margin). Any failure raises before a single EndTxn is sent. Phase 2 sends
        EndTxn(commit) with each committable's producer id, epoch and EndTxn version, in parallel
        per coordinator (``max_workers`` coordinators at a time) and, for a large group, over up
        to ``lanes`` connections to it (the admin's ``lanes`` by default, ``kafka/lanes.py``),
        retrying retriable answers until ``retry_timeout_ms``. A failure in
        phase 2 (e.g. the broker timed one out in between) raises DataLossError carrying the
        outcomes that did commit.
        """
        committables = list(committables)
        if lanes is not None:
            check_lanes(lanes)  # bad input: refused before anything is sent
        if not committables:
            return []
        ids = [c.transactional_id for c in committables]
        duplicates = {t for t in ids if ids.count(t) > 1} if len(set(ids)) != len(ids) else set()
        if duplicates:
            raise KafkaEosError(
                f"the batch lists transactional id(s) {', '.join(sorted(duplicates))} twice",
                transactional_id=sorted(duplicates)[0],
                runbook="malformed-manifest",
            )
        self._check_end_txn_versions(committables)
        descriptions = self.describe(ids)
        now = self._clock_ms()
        plan: dict[str, str] = {}
        for c in committables:
            plan[c.transactional_id] = self.verify_committable(c, descriptions[c.transactional_id], now)
        for c in committables:
            tid = c.transactional_id
            if plan[tid] == "commit" and descriptions[tid].state == TxnState.PREPARE_COMMIT:
                # An earlier EndTxn committed it and Kafka is writing the markers (asynchronously):
                # wait for CompleteCommit instead of sending EndTxn again.
                descriptions[tid] = self._wait_until_complete(tid)
                plan[tid] = self.verify_committable(c, descriptions[tid], now)
        to_commit = [c for c in committables if plan[c.transactional_id] == "commit"]
        outcomes: dict[str, TxnOutcome] = {
            c.transactional_id: TxnOutcome(
                c.transactional_id,
                "already_committed",
                c.producer_id,
                descriptions[c.transactional_id].producer_epoch,
            )
            for c in committables
            if plan[c.transactional_id] == "already_committed"
        }
        errors = self._end_txns(
            to_commit, commit=True, outcomes=outcomes, max_workers=max_workers, lanes=lanes
        )
        ordered = [outcomes[t] for t in ids if t in outcomes]
        if errors:
            first = errors[0]
            if ordered:
                raise DataLossError(
                    f"{first.cause}; {len(ordered)} other transaction(s) of this batch were committed and "
                    f"{len(errors)} failed, so the batch is only partly visible",
                    transactional_id=first.transactional_id,
                    runbook=first.runbook,
                    outcomes=ordered,
                )
            raise first
        return ordered

    def _check_end_txn_versions(self, committables: Sequence[Committable]) -> None:
        supported = self.wire.broker_api_range(EndTxnRequest.API_KEY)
        for c in committables:
            if supported is None or not supported[0] <= c.end_txn_version <= min(
                supported[1], EndTxnRequest.max_version
            ):
                raise UnsupportedCapabilityError(
                    f"the committable needs EndTxn v{c.end_txn_version} (transaction version "
                    f"{c.transaction_version}) but the cluster supports {supported or 'no EndTxn'}; was it "
                    "prepared on another cluster, or was the cluster downgraded?",
                    transactional_id=c.transactional_id,
                )

    def _end_txns(
        self,
        committables: Sequence[Committable],
        *,
        commit: bool,
        outcomes: dict[str, TxnOutcome],
        max_workers: int,
        lanes: int | None = None,
    ) -> list[KafkaEosError]:
        """EndTxn for each committable, grouped per coordinator, spread over lanes, pipelined,
        retried; returns errors."""
        if not committables:
            return []
        coordinators = self.wire.coordinators(c.transactional_id for c in committables)
        groups: dict[Any, list[Committable]] = defaultdict(list)
        for c in committables:
            node = coordinators[c.transactional_id]
            groups[node if isinstance(node, int) else None].append(c)
        units, threads = self._spread(list(groups.values()), lanes, max_workers)
        errors: list[KafkaEosError] = []
        with ThreadPoolExecutor(max_workers=threads) as pool:
            futures = [pool.submit(self._end_txn_group, share, commit, wire) for wire, share in units]
            for future in futures:
                done, failed = future.result()
                outcomes.update({o.transactional_id: o for o in done})
                errors.extend(failed)
        return errors

    def _spread(
        self, groups: Sequence[Sequence[_T]], lanes: int | None, max_workers: int
    ) -> tuple[list[tuple[Wire, list[_T]]], int]:
        """Each coordinator's group split over its lanes: one (wire, share) per thread, and the
        thread count (``max_workers`` coordinators at a time, each with all its lanes).

        The counts are :func:`~airflow_provider_kafka_eos.kafka.lanes.lane_counts`'; when fewer
        extra lanes could be opened than wanted, the groups spread over those that were.
        """
        lanes = self.lanes if lanes is None else check_lanes(lanes)
        counts = lane_counts([len(g) for g in groups], lanes=lanes)
        wires = self._lanes.wires(max(counts, default=1))
        units = [
            (wires[i], share)
            for group, count in zip(groups, counts, strict=True)
            for i, share in enumerate(split(group, min(count, len(wires))))
        ]
        threads = max(1, min(max_workers, len(groups))) * min(max(counts, default=1), len(wires))
        return units, max(1, min(threads, len(units)))

    def _end_txn_group(
        self, group: Sequence[Committable], commit: bool, wire: Wire | None = None
    ) -> tuple[list[TxnOutcome], list[KafkaEosError]]:
        """EndTxn for one share of a coordinator's group, on one lane (``wire``), until each
        answers or the retry deadline passes ("outcome unknown: run again")."""
        wire = wire or self.wire
        pending = list(group)
        done: list[TxnOutcome] = []
        failed: list[KafkaEosError] = []
        retry = self._retry()
        verb = "commit" if commit else "abort"
        last: dict[str, str] = {}  # the last answer per id, for the "outcome unknown" message
        while pending:
            try:
                coordinators = wire.coordinators(c.transactional_id for c in pending)
            except BrokerUnreachableError:
                # No lookup answered (the cluster, or this lane's connection, is down). Send anyway,
                # to any broker: an EndTxn without an answer is retried until the deadline and then
                # reported as "outcome unknown"; a broker that is not the coordinator says so.
                coordinators = {}
            batch = []
            for c in pending:
                request = EndTxnRequest(
                    transactional_id=c.transactional_id,
                    producer_id=c.producer_id,
                    producer_epoch=c.producer_epoch,
                    committed=commit,
                    version=c.end_txn_version,
                )
                node = coordinators.get(c.transactional_id)
                batch.append((request, node if isinstance(node, int) else None))
            again: list[Committable] = []
            for c, response in zip(pending, wire.send_all(batch, raise_errors=False), strict=True):
                if isinstance(response, BrokerUnreachableError):
                    wire.forget_coordinator(c.transactional_id)  # it may have moved: ask again
                    last[c.transactional_id] = f"no answer ({response.cause})"
                    again.append(c)
                    continue
                code = response.error_code
                last[c.transactional_id] = error_name(code)
                if code == NONE:
                    done.append(
                        TxnOutcome(
                            c.transactional_id,
                            "committed" if commit else "aborted",
                            getattr(response, "producer_id", c.producer_id),
                            _response_epoch(response, c),
                        )
                    )
                elif code in RETRIABLE:
                    if code == NOT_COORDINATOR:
                        wire.forget_coordinator(c.transactional_id)
                    again.append(c)
                else:
                    failed.append(self._end_txn_error(c, code, verb))
            pending = again
            if pending and not retry.wait():
                for c in pending:
                    failed.append(
                        BrokerUnreachableError(
                            f"EndTxn({verb}) did not complete within {self.retry_timeout_ms} ms (the "
                            "coordinator kept answering retriable errors or did not answer; the last answer "
                            f"was {last.get(c.transactional_id, 'none')}); its outcome is "
                            f"unknown: run the {verb} again (it is idempotent) before the transaction "
                            "times out",
                            transactional_id=c.transactional_id,
                        )
                    )
                break
        return done, failed

    def _end_txn_error(self, c: Committable, code: int, verb: str) -> KafkaEosError:
        """Explain a non-retriable EndTxn answer, describing the transaction to tell loss from fencing."""
        tid = c.transactional_id
        if code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            return _authorization(tid, "WRITE", f"EndTxn({verb})")
        try:
            described = self.describe([tid], missing_ok=True).get(tid)
        except KafkaEosError:
            described = None
        if described is not None and verb == "commit":
            try:
                self.verify_committable(c, described)
            except (DataLossError, ProducerFencedError) as err:
                return err
            except TransactionTimeoutRiskError:
                pass
        if code == INVALID_TXN_STATE and verb == "commit":
            return DataLossError(
                f"EndTxn(commit) was refused with {error_name(code)}: the transaction is no longer open "
                f"(coordinator state {_state(described.state) if described else 'unknown'}); its records "
                "can no "
                "longer be committed",
                transactional_id=tid,
            )
        if code in (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING):
            return ProducerFencedError(
                f"EndTxn({verb}) with producer id {c.producer_id}, epoch {c.producer_epoch} was refused with "
                f"{error_name(code)}: the coordinator holds "
                f"{_holder(described)}",
                transactional_id=tid,
            )
        return KafkaEosError(
            f"EndTxn({verb}) failed with {error_name(code)}", transactional_id=tid, runbook="troubleshooting"
        )

    # -- abort ---------------------------------------------------------------------------------

    def abort(
        self, ids: Iterable[str], *, max_workers: int = 16, lanes: int | None = None
    ) -> list[TxnOutcome]:
        """Abort the open transaction of each id by fencing (InitProducerId).

        Every id is described first: an unknown id raises UnknownTransactionError before
        anything is sent (InitProducerId would create it). Completed transactions are left
        alone (``already_committed`` / ``already_aborted``); only Ongoing ones are fenced, which
        bumps the epoch and aborts them (in parallel per coordinator, a large group over up to
        ``lanes`` connections, as :meth:`commit`). Other ids are still aborted when one fails; the first
        failure is raised afterwards.
        """
        ids = list(dict.fromkeys(ids))
        if lanes is not None:
            check_lanes(lanes)  # bad input: refused before anything is sent
        if not ids:
            return []
        descriptions = self.describe(ids)
        outcomes: dict[str, TxnOutcome] = {}
        to_fence: list[TransactionDescription] = []
        for tid in ids:
            d = descriptions[tid]
            if d.state == TxnState.COMPLETE_COMMIT:
                outcomes[tid] = TxnOutcome(tid, "already_committed", d.producer_id, d.producer_epoch)
            elif d.state in (TxnState.COMPLETE_ABORT, TxnState.EMPTY):
                outcomes[tid] = TxnOutcome(
                    tid,
                    "already_aborted",
                    d.producer_id,
                    d.producer_epoch,
                    "no open transaction" if d.state == TxnState.EMPTY else "",
                )
            else:
                to_fence.append(d)
        errors: list[KafkaEosError] = []
        committing = [d for d in to_fence if d.state == TxnState.PREPARE_COMMIT]
        for d in committing:  # rare: a commit is under way; wait for it instead of fencing
            result = self._abort_one_safely(d)
            if isinstance(result, KafkaEosError):
                errors.append(result)
            else:
                outcomes[d.transactional_id] = result
        fence = [d for d in to_fence if d.state != TxnState.PREPARE_COMMIT]
        if fence:
            groups: dict[Any, list[TransactionDescription]] = defaultdict(list)
            for d in fence:
                groups[d.coordinator_id].append(d)
            units, threads = self._spread(list(groups.values()), lanes, max_workers)
            with ThreadPoolExecutor(max_workers=threads) as pool:
                futures = [
                    pool.submit(
                        self._fence_many, [(d.transactional_id, d.timeout_ms) for d in share], wire=wire
                    )
                    for wire, share in units
                ]
                by_id = {d.transactional_id: d for d in fence}
                for future in futures:
                    done, failed = future.result()
                    errors.extend(failed.values())
                    for tid, (pid, epoch, fenced) in done.items():
                        outcomes[tid] = _fence_outcome(by_id[tid], pid, epoch, fenced)
        if errors:
            raise errors[0]
        return [outcomes[t] for t in ids]

    def _abort_one_safely(self, d: TransactionDescription) -> TxnOutcome | KafkaEosError:
        try:
            return self._abort_one(d)
        except KafkaEosError as err:
            return err

    def _abort_one(self, d: TransactionDescription) -> TxnOutcome:
        tid = d.transactional_id
        if d.state == TxnState.PREPARE_COMMIT:
            final = self._wait_until_complete(tid)
            return TxnOutcome(
                tid,
                "already_committed" if final.state == TxnState.COMPLETE_COMMIT else "already_aborted",
                final.producer_id,
                final.producer_epoch,
                "a commit was already under way",
            )
        pid, epoch, fenced = self._init_producer_id(tid, d.timeout_ms)
        return _fence_outcome(d, pid, epoch, fenced)

    def _wait_until_complete(self, tid: str) -> TransactionDescription:
        retry = self._retry()
        while True:
            d = self.describe([tid])[tid]
            if d.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                return d
            if not retry.wait():
                raise BrokerUnreachableError(
                    f"the transaction stayed in {_state(d.state)} for {self.retry_timeout_ms} ms",
                    transactional_id=tid,
                )

    def fence(
        self, transactional_id: str, transaction_timeout_ms: int, *, enable_2pc: bool = False
    ) -> FenceResult:
        """Raw InitProducerId for ``transactional_id``, retrying CONCURRENT_TRANSACTIONS until done.

        ``enable_2pc`` sends InitProducerId v6 with KIP-939's Enable2Pc: the transaction the
        caller then opens never times out (the Arrow producer's two-phase-commit path).

        Side effects (this *is* the fencing primitive): creates the id if the coordinator does
        not know it (answering epoch 0), bumps its epoch, aborts an open transaction. Prefer
        :meth:`abort`, which describes first; the PROBING abort strategy uses this directly
        because it must work on clusters without DescribeTransactions.
        """
        pid, epoch, fenced = self._init_producer_id(transactional_id, transaction_timeout_ms, enable_2pc)
        return FenceResult(transactional_id, pid, epoch, fenced)

    def lso_probe(self, topic_partitions: Iterable[TopicPartition | tuple[str, int]]) -> list[Any]:
        """:func:`airflow_provider_kafka_eos.kafka.lso.lso_probe` on this admin's connections."""
        from airflow_provider_kafka_eos.kafka.lso import lso_probe

        return lso_probe(self, topic_partitions)

    def _init_producer_id(self, tid: str, timeout_ms: int, enable_2pc: bool = False) -> tuple[int, int, bool]:
        done, failed = self._fence_many([(tid, timeout_ms)], enable_2pc=enable_2pc)
        if tid in failed:
            raise failed[tid]
        return done[tid]

    def _fence_many(
        self, targets: Sequence[tuple[str, int]], *, enable_2pc: bool = False, wire: Wire | None = None
    ) -> tuple[dict[str, tuple[int, int, bool]], dict[str, KafkaEosError]]:
        """InitProducerId for many ids, pipelined in waves until each answers NONE.

        Returns ``{id: (producer id, epoch, aborted_open_transaction)}`` and ``{id: error}``.
        CONCURRENT_TRANSACTIONS on the first answer means the coordinator found an open
        transaction and is aborting it (the epoch fence); the wave is re-sent after a backoff.
        ``wire`` is the lane to send on (the admin's own by default).
        """
        wire = wire or self.wire
        timeouts = {t: (ms if ms and ms > 0 else 60000) for t, ms in targets}
        two_pc: dict[str, Any] = {}
        if enable_2pc:
            two_pc = {"enable2_pc": True, "keep_prepared_txn": False, "version": self._init_v6(targets)}
        pending = list(timeouts)
        fenced: set[str] = set()
        last_code: dict[str, int] = {}
        done: dict[str, tuple[int, int, bool]] = {}
        failed: dict[str, KafkaEosError] = {}
        retry = self._retry()
        while pending:
            coordinators = wire.coordinators(pending)
            batch, sent = [], []
            again: list[str] = []
            for tid in pending:
                node = coordinators[tid]
                if isinstance(node, Exception):
                    code = getattr(node, "errno", -1)
                    if code in RETRIABLE:
                        wire.forget_coordinator(tid)
                        again.append(tid)
                    else:
                        failed[tid] = self._error_for_code(tid, code, "FindCoordinator")
                    continue
                request = InitProducerIdRequest(
                    transactional_id=tid,
                    transaction_timeout_ms=timeouts[tid],
                    producer_id=-1,
                    producer_epoch=-1,
                    **two_pc,
                )
                batch.append((request, node))
                sent.append(tid)
            for tid, response in zip(sent, wire.send_all(batch, raise_errors=False), strict=True):
                if isinstance(response, BrokerUnreachableError):
                    wire.forget_coordinator(tid)  # it may have moved: ask again
                    again.append(tid)
                    continue
                code = last_code[tid] = response.error_code
                if code == NONE:
                    done[tid] = (response.producer_id, response.producer_epoch, tid in fenced)
                elif code == CONCURRENT_TRANSACTIONS:
                    fenced.add(tid)  # the coordinator is aborting the open transaction for us
                    again.append(tid)
                elif code in RETRIABLE:
                    if code == NOT_COORDINATOR:
                        wire.forget_coordinator(tid)
                    again.append(tid)
                elif code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED and enable_2pc:
                    failed[tid] = AuthorizationError(
                        "InitProducerId with Enable2Pc was refused with "
                        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED: the broker needs "
                        "transaction.two.phase.commit.enable=true and the principal "
                        "TWO_PHASE_COMMIT (besides WRITE) on the TransactionalId",
                        transactional_id=tid,
                        runbook="two-phase-commit",
                    )
                elif code == INVALID_TRANSACTION_TIMEOUT:
                    failed[tid] = KafkaEosError(
                        f"InitProducerId was refused with {error_name(code)} for timeout {timeouts[tid]} ms "
                        "(above transaction.max.timeout.ms?)",
                        transactional_id=tid,
                        runbook="troubleshooting",
                    )
                else:
                    failed[tid] = self._error_for_code(tid, code, "InitProducerId")
            pending = again
            if pending and not retry.wait():
                for tid in pending:
                    answer = error_name(last_code[tid]) if tid in last_code else "no answer"
                    failed[tid] = BrokerUnreachableError(
                        f"InitProducerId (fencing) did not complete within {self.retry_timeout_ms} ms; "
                        f"the last answer was {answer}",
                        transactional_id=tid,
                    )
                break
        return done, failed

    def _init_v6(self, targets: Sequence[tuple[str, int]]) -> int:
        """InitProducerId v6 (KIP-939), or the error that says the cluster cannot do 2PC."""
        version = self.wire.api_version(InitProducerIdRequest)
        if version is None or version < 6:
            raise UnsupportedCapabilityError(
                f"two-phase commit needs InitProducerId v6 (KIP-939); the cluster offers "
                f"{'none' if version is None else f'v{version}'} (Kafka 4.1+ with "
                "transaction.two.phase.commit.enable=true and unstable.api.versions.enable=true)",
                transactional_id=targets[0][0] if targets else None,
                runbook="two-phase-commit",
            )
        return 6

    def abort_in_place(self, committable: Committable) -> TxnOutcome:
        """EndTxn(abort) with the committable's producer id / epoch (no epoch bump beyond Kafka's own)."""
        tid = committable.transactional_id
        d = self.describe([tid])[tid]
        same = d.producer_id == committable.producer_id
        if same and d.state == TxnState.COMPLETE_ABORT:
            return TxnOutcome(tid, "already_aborted", d.producer_id, d.producer_epoch)
        if same and d.state == TxnState.COMPLETE_COMMIT:
            return TxnOutcome(tid, "already_committed", d.producer_id, d.producer_epoch)
        if not same or (d.state == TxnState.ONGOING and d.producer_epoch != committable.producer_epoch):
            raise ProducerFencedError(
                f"cannot abort in place: the coordinator holds {_holder(d)}, not producer id "
                f"{committable.producer_id}, epoch {committable.producer_epoch}",
                transactional_id=tid,
            )
        self._check_end_txn_versions([committable])
        outcomes: dict[str, TxnOutcome] = {}
        errors = self._end_txns([committable], commit=False, outcomes=outcomes, max_workers=1)
        if errors:
            raise errors[0]
        return outcomes[tid]

    # -- helpers -------------------------------------------------------------------------------

    def _forget_coordinators(self, transactional_ids: Iterable[str]) -> None:
        for tid in transactional_ids:
            self.wire.forget_coordinator(tid)

    def _retry(self) -> _Retry:
        deadline = time.monotonic() + self.retry_timeout_ms / 1000
        if self.deadline is not None:
            deadline = min(deadline, self.deadline)
        return _Retry(deadline=deadline)

    @classmethod
    def _raise_for_code(cls, tid: str | None, code: int, api: str) -> None:
        raise cls._error_for_code(tid, code, api)

    @staticmethod
    def _error_for_code(tid: str | None, code: int, api: str) -> KafkaEosError:
        if code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            describe_only = api in ("DescribeTransactions", "FindCoordinator", "ListTransactions")
            return _authorization(tid, "DESCRIBE" if describe_only else "WRITE", api)
        if code == 31:  # CLUSTER_AUTHORIZATION_FAILED
            return AuthorizationError(f"{api} was refused with {error_name(code)}", transactional_id=tid)
        if code == 35:
            return UnsupportedCapabilityError(
                f"{api} is not supported by the cluster ({error_name(code)})", transactional_id=tid
            )
        return KafkaEosError(
            f"{api} failed with {error_name(code)}", transactional_id=tid, runbook="troubleshooting"
        )


def verify_committable(
    committable: Committable, description: TransactionDescription, *, now_ms: int, safety_margin_ms: int
) -> str:
    """Decide whether one committable can be committed, from its coordinator's description.

    Returns ``"commit"`` (send EndTxn: Ongoing with the same producer id / epoch covering the
    committable's partitions and not within ``safety_margin_ms`` of its deadline, or a commit
    already under way) or ``"already_committed"`` (CompleteCommit by the same producer: epoch E,
    or E+1 under TV2 where completing bumps the epoch). Otherwise raises the error that says
    why not: DataLossError (aborted / timed out), TransactionTimeoutRiskError (too close to
    the deadline), ProducerFencedError (another producer id / epoch holds the id). Pure: no I/O.
    """
    c, d = committable, description
    tid = c.transactional_id
    now = now_ms
    state = d.state
    same_producer = d.producer_id == c.producer_id
    completed_epochs = (
        {c.producer_epoch, c.producer_epoch + 1} if c.transaction_version >= 2 else {c.producer_epoch}
    )
    if state == TxnState.COMPLETE_COMMIT and same_producer and d.producer_epoch in completed_epochs:
        return "already_committed"
    if state == TxnState.PREPARE_COMMIT and same_producer and d.producer_epoch in completed_epochs:
        return "commit"  # a commit is under way; EndTxn retries until it completes
    if (
        state
        in (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE, TxnState.EMPTY)
        and same_producer
        and d.producer_epoch <= c.producer_epoch + 2
    ):
        how = (
            "is no longer open: it was aborted by fencing, or the id was re-initialised"
            if state == TxnState.EMPTY
            else "was aborted by the coordinator"
        )
        raise DataLossError(
            f"the prepared transaction (producer id {c.producer_id}, epoch {c.producer_epoch}, "
            f"{c.records_text}) {how} (state {_state(state)}, epoch "
            f"{d.producer_epoch}){_timeout_hint(c, now)}; its records can no longer be committed",
            transactional_id=tid,
        )
    if state == TxnState.ONGOING and same_producer and d.producer_epoch == c.producer_epoch:
        missing = sorted(set(c.partitions) - set(d.partitions))
        if missing:
            raise ProducerFencedError(
                f"the open transaction (producer id {c.producer_id}, epoch {c.producer_epoch}) does not "
                f"cover partition(s) {', '.join(map(str, missing))} listed in the committable; it is not "
                "the transaction that was prepared",
                transactional_id=tid,
            )
        deadline = d.deadline_ms if d.deadline_ms is not None else c.deadline_ms
        if now >= deadline:
            raise DataLossError(
                f"the prepared transaction timed out at {_iso(deadline)} (started "
                f"{_iso(d.start_time_ms)}, timeout {d.timeout_ms} ms); the coordinator aborts it, so it "
                "can no longer be committed",
                transactional_id=tid,
            )
        if now + safety_margin_ms >= deadline:
            raise TransactionTimeoutRiskError(
                f"the prepared transaction times out at {_iso(deadline)}, within the "
                f"{safety_margin_ms} ms safety margin; committing now would race the coordinator's "
                "abort, so nothing was committed",
                transactional_id=tid,
            )
        return "commit"
    if not same_producer or state == TxnState.ONGOING or d.producer_epoch > c.producer_epoch:
        raise ProducerFencedError(
            f"the coordinator holds producer id {d.producer_id}, epoch {d.producer_epoch} (state "
            f"{_state(state)}), not the committable's producer id {c.producer_id}, epoch "
            f"{c.producer_epoch}: "
            "another producer has used this transactional id since it was prepared",
            transactional_id=tid,
        )
    raise ProducerFencedError(
        f"unexpected coordinator state {_state(state)} (producer id {d.producer_id}, epoch "
        f"{d.producer_epoch}) for committable producer id {c.producer_id}, epoch {c.producer_epoch}",
        transactional_id=tid,
    )


# -- module helpers ------------------------------------------------------------------------------


def _now_ms() -> int:
    return int(time.time() * 1000)


def _chunks(items: Sequence[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def _description(row: Any, node: int | None) -> TransactionDescription:
    partitions = tuple(sorted(TopicPartition(t.topic, p) for t in row.topics for p in t.partitions))
    return TransactionDescription(
        transactional_id=row.transactional_id,
        state=TxnState.parse(row.transaction_state),
        producer_id=row.producer_id,
        producer_epoch=row.producer_epoch,
        timeout_ms=row.transaction_timeout_ms,
        start_time_ms=row.transaction_start_time_ms,
        partitions=partitions,
        coordinator_id=node,
    )


def _prefix_pattern(prefixes: Sequence[str]) -> str:
    """A regex valid in both Java and Python: alternatives of escaped prefixes, then anything."""

    def escape(text: str) -> str:
        return "".join(ch if ch.isalnum() or ch == "_" else "\\" + ch for ch in text)

    return "(?:" + "|".join(escape(p) for p in prefixes) + ").*"


def _fence_outcome(d: TransactionDescription, pid: int, epoch: int, fenced: bool) -> TxnOutcome:
    tid = d.transactional_id
    if fenced:
        return TxnOutcome(tid, "aborted", pid, epoch, f"fenced epoch {d.producer_epoch} -> {epoch}")
    return TxnOutcome(
        tid,
        "already_completed",
        pid,
        epoch,
        "the transaction ended before the fence reached it; nothing was aborted",
    )


def _response_epoch(response: Any, c: Committable) -> int:
    epoch = getattr(response, "producer_epoch", -1)
    return epoch if isinstance(epoch, int) and epoch >= 0 else c.producer_epoch


def _state(state: Any) -> str:
    return str(getattr(state, "value", state))


def _holder(d: TransactionDescription | None) -> str:
    if d is None:
        return "an unknown producer"
    return f"producer id {d.producer_id}, epoch {d.producer_epoch} (state {_state(d.state)})"


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def _timeout_hint(c: Committable, now: int) -> str:
    if now >= c.deadline_ms:
        return (
            f", after its transaction timeout of {c.transaction_timeout_ms} ms passed at "
            f"{_iso(c.deadline_ms)}"
        )
    return ""


def _authorization(tid: str | None, operation: str, api: str) -> AuthorizationError:
    resource = f"TransactionalId:{tid}" if tid else "the TransactionalId resource"
    return AuthorizationError(
        f"{api} was refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED: the principal needs {operation} on "
        f"{resource} (e.g. a prefixed ACL on the pipeline's transactional-id prefix)",
        transactional_id=tid,
    )
