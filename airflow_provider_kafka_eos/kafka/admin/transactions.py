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

This module is the facade users and operators call; the rules live with their owners (import
each name from its owner, nothing is re-exported here): the data types in
:mod:`~airflow_provider_kafka_eos.kafka.protocol.transaction_types`, the commit
rule in :mod:`~airflow_provider_kafka_eos.kafka.admin.commit_rules`, the coordinator's error
codes, retry backoff and refusal errors in
:mod:`~airflow_provider_kafka_eos.kafka.protocol.coordinator_answers`, sending EndTxn in
:mod:`~airflow_provider_kafka_eos.kafka.admin.end_txn`, InitProducerId (fencing) in
:mod:`~airflow_provider_kafka_eos.kafka.admin.fencing`. The admin keeps what spans them: the
connections and lanes, describe/list, and grouping commits and aborts per coordinator.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kafka.protocol.producer.transaction import EndTxnRequest

from airflow_provider_kafka_eos.kafka.admin.commit_rules import verify_committable
from airflow_provider_kafka_eos.kafka.admin.describe import describe_transactions, list_filtered
from airflow_provider_kafka_eos.kafka.admin.end_txn import check_end_txn_versions, end_txn_group
from airflow_provider_kafka_eos.kafka.admin.fencing import fence_many, fence_outcome
from airflow_provider_kafka_eos.kafka.admin.verdict import judge
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import (
    BrokerUnreachableError,
    DataLossError,
    KafkaEosError,
    ProducerFencedError,
    UnsupportedCapabilityError,
)
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition
from airflow_provider_kafka_eos.kafka.protocol.coordinator_answers import (
    Retry,
    error_for_code,
)
from airflow_provider_kafka_eos.kafka.protocol.lanes import (
    Lanes,
    check_lanes,
    lane_counts,
    split,
)
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import (
    FenceResult,
    TransactionDescription,
    TransactionListing,
    TxnOutcome,
    TxnState,
    holder_text,
    state_name,
    wall_clock_ms,
)
from airflow_provider_kafka_eos.kafka.protocol.verdicts import GroupEffect, TxnVerdict, Verdict
from airflow_provider_kafka_eos.kafka.protocol.wire import Wire

__all__ = ["TransactionAdmin"]

_T = TypeVar("_T")
# progress(done, total, label): how commit and abort report each answer as it arrives.
Progress = Callable[[int, int, str], None]


class TransactionAdmin:
    """Transaction-coordinator operations over one kafka-python connection pool.

    Use as a context manager. ``connect_timeout_ms`` bounds how long an unreachable cluster can
    stall a call before :class:`BrokerUnreachableError`; ``retry_timeout_ms`` bounds how long
    retriable answers (CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, ...) are retried;
    ``safety_margin_ms`` is how close to its timeout a prepared transaction may be and still be
    committed (the commit must land before the coordinator's abort scan). ``deadline`` (a
    ``time.monotonic()`` value) bounds every call of this admin, retries included: the CLI's
    ``--timeout``. ``lanes`` is how many connections per transaction coordinator a large
    commit or abort may spread over (:mod:`~airflow_provider_kafka_eos.kafka.protocol.lanes`: Kafka
    handles one request per connection at a time); the extra ones are opened on demand, share
    the deadline, and are closed with the admin. ``None`` (the default) lets the work choose
    (:func:`~airflow_provider_kafka_eos.kafka.protocol.lanes.lane_counts`); a number caps them.
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
        lanes: int | None = None,
    ):
        self.config = config
        self.deadline = deadline
        self.retry_timeout_ms = retry_timeout_ms
        self.safety_margin_ms = safety_margin_ms
        self.lanes = None if lanes is None else check_lanes(lanes)
        self._clock_ms = clock_ms or wall_clock_ms

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
        """DescribeTransactions for each id, batched per coordinator (:func:`describe_transactions`).

        An id the coordinator does not know raises UnknownTransactionError (or is left out of
        the result with ``missing_ok=True``).
        """
        return describe_transactions(self, ids, missing_ok=missing_ok)

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
        listings = list_filtered(self.wire, prefixes, states, min_age_ms)
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

    def find_lingering(
        self, prefixes: Sequence[str] | None = None, min_age_ms: int = 0
    ) -> list[TransactionDescription]:
        """Ongoing transactions (of these prefixes) open for at least ``min_age_ms``."""
        listed = list_filtered(self.wire, prefixes, [TxnState.ONGOING.value], min_age_ms or None)
        described = self.describe(list(listed), missing_ok=True)
        now = self._clock_ms()
        found = [
            d
            for d in described.values()
            if d.state == TxnState.ONGOING and (d.age_ms(now) or -1) >= min_age_ms
        ]
        return sorted(found, key=lambda d: d.transactional_id)

    # -- commit --------------------------------------------------------------------------------

    def now_ms(self) -> int:
        """This admin's clock (the coordinator's clock in tests that move time)."""
        return self._clock_ms()

    def new_retry(self) -> Retry:
        """A deadline and backoff for retriable answers: the retry timeout, within the call deadline."""
        return self._retry()

    def judge(
        self,
        committables: Sequence[Committable],
        *,
        ask_coordinator: bool,
        descriptions: dict[str, TransactionDescription] | None = None,
        group_effects: Mapping[str, GroupEffect] | None = None,
    ) -> dict[str, TxnVerdict]:
        """The verdict of each committable: committed, aborted, open or unknown, from the coordinator and
        the data (:func:`~airflow_provider_kafka_eos.kafka.admin.verdict.judge`)."""
        return judge(self, committables, ask_coordinator=ask_coordinator, descriptions=descriptions,
                     group_effects=group_effects)

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
        self,
        committables: Sequence[Committable],
        *,
        max_workers: int = 16,
        lanes: int | None = None,
        progress: Progress | None = None,
        group_effects: Mapping[str, GroupEffect] | None = None,
    ) -> list[TxnOutcome]:
        """Commit every committable, or none if any fails verification.

        Phase 1 describes all of them and verifies each (Ongoing with the same producer id / epoch
        covering its partitions, or already CompleteCommit by that producer; deadline not within
        the safety margin). Any failure raises before a single EndTxn is sent. Phase 2 sends
        EndTxn(commit) with each committable's producer id, epoch and EndTxn version, in parallel
        per coordinator (``max_workers`` coordinators at a time) and, for a large group, over up
        to ``lanes`` connections to it (the admin's ``lanes`` by default, ``kafka/protocol/lanes.py``),
        retrying retriable answers until ``retry_timeout_ms``. A failure in
        phase 2 (e.g. the broker timed one out in between) raises DataLossError carrying the
        outcomes that did commit. ``progress(done, total, "committing")`` is called per answer
        (from the lanes' threads), so a person watching a large batch sees it move.
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
        check_end_txn_versions(self.wire, committables)
        descriptions = self.describe(ids)
        verdicts = self.judge(committables, ask_coordinator=True, descriptions=descriptions,
                              group_effects=group_effects)
        for c in committables:  # nothing is sent unless every transaction can be committed
            error = verdicts[c.transactional_id].error
            if error is not None:
                raise error
        for c in committables:
            tid = c.transactional_id
            if descriptions[tid].state == TxnState.PREPARE_COMMIT:
                # An earlier EndTxn committed it and Kafka is writing the markers (asynchronously):
                # wait for CompleteCommit instead of sending EndTxn again.
                descriptions[tid] = self._wait_until_complete(tid)
                verdicts[tid] = self.judge([c], ask_coordinator=True, descriptions=descriptions,
                                           group_effects=group_effects)[tid]
                if verdicts[tid].error is not None:
                    raise verdicts[tid].error
        to_commit = [c for c in committables if verdicts[c.transactional_id].verdict is Verdict.OPEN]
        outcomes: dict[str, TxnOutcome] = {
            c.transactional_id: _already_committed(verdicts[c.transactional_id], c)
            for c in committables
            if verdicts[c.transactional_id].verdict is Verdict.COMMITTED
        }
        tally = _Tally(progress, len(committables), "committing", already=len(outcomes))
        errors = self._end_txns(
            to_commit, commit=True, outcomes=outcomes, max_workers=max_workers, lanes=lanes, on_answer=tally
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

    def _end_txns(
        self,
        committables: Sequence[Committable],
        *,
        commit: bool,
        outcomes: dict[str, TxnOutcome],
        max_workers: int,
        lanes: int | None = None,
        on_answer: Callable[[str], None] | None = None,
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
            futures = [
                pool.submit(self._end_txn_group, share, commit, wire, on_answer) for wire, share in units
            ]
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

        The counts are :func:`~airflow_provider_kafka_eos.kafka.protocol.lanes.lane_counts`'; when fewer
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
        self,
        group: Sequence[Committable],
        commit: bool,
        wire: Wire | None = None,
        on_answer: Callable[[str], None] | None = None,
    ) -> tuple[list[TxnOutcome], list[KafkaEosError]]:
        """:func:`~airflow_provider_kafka_eos.kafka.admin.end_txn.end_txn_group` on ``wire`` (a lane)
        with this admin's retry deadline."""
        return end_txn_group(self, group, commit, new_retry=self._retry, wire=wire, on_answer=on_answer)

    # -- abort ---------------------------------------------------------------------------------

    def abort(
        self,
        ids: Iterable[str],
        *,
        max_workers: int = 16,
        lanes: int | None = None,
        progress: Progress | None = None,
    ) -> list[TxnOutcome]:
        """Abort the open transaction of each id by fencing (InitProducerId).

        Every id is described first: an unknown id raises UnknownTransactionError before
        anything is sent (InitProducerId would create it). Completed transactions are left
        alone (``already_committed`` / ``already_aborted``); only Ongoing ones are fenced, which
        bumps the epoch and aborts them (in parallel per coordinator, a large group over up to
        ``lanes`` connections, as :meth:`commit`). Other ids are still aborted when one fails; the first
        failure is raised afterwards. ``progress(done, total, "aborting")`` is called per answer.
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
        tally = _Tally(progress, len(ids), "aborting", already=len(outcomes))
        committing = [d for d in to_fence if d.state == TxnState.PREPARE_COMMIT]
        for d in committing:  # rare: a commit is under way; wait for it instead of fencing
            result = self._abort_one_safely(d)
            if isinstance(result, KafkaEosError):
                errors.append(result)
            else:
                outcomes[d.transactional_id] = result
            tally(d.transactional_id)
        fence = [d for d in to_fence if d.state != TxnState.PREPARE_COMMIT]
        if fence:
            groups: dict[Any, list[TransactionDescription]] = defaultdict(list)
            for d in fence:
                groups[d.coordinator_id].append(d)
            units, threads = self._spread(list(groups.values()), lanes, max_workers)
            with ThreadPoolExecutor(max_workers=threads) as pool:
                futures = [
                    pool.submit(
                        fence_many,
                        self,
                        [(d.transactional_id, d.timeout_ms) for d in share],
                        new_retry=self._retry,
                        wire=wire,
                        on_answer=tally,
                    )
                    for wire, share in units
                ]
                by_id = {d.transactional_id: d for d in fence}
                for future in futures:
                    done, failed = future.result()
                    errors.extend(failed.values())
                    for tid, (pid, epoch, fenced) in done.items():
                        outcomes[tid] = fence_outcome(by_id[tid], pid, epoch, fenced)
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
        return fence_outcome(d, pid, epoch, fenced)

    def _wait_until_complete(self, tid: str) -> TransactionDescription:
        retry = self._retry()
        while True:
            d = self.describe([tid])[tid]
            if d.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                return d
            if not retry.wait():
                raise BrokerUnreachableError(
                    f"the transaction stayed in {state_name(d.state)} for {self.retry_timeout_ms} ms",
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
        """:func:`airflow_provider_kafka_eos.kafka.admin.lso.lso_probe` on this admin's connections."""
        from airflow_provider_kafka_eos.kafka.admin.lso import lso_probe

        return lso_probe(self, topic_partitions)

    def _init_producer_id(self, tid: str, timeout_ms: int, enable_2pc: bool = False) -> tuple[int, int, bool]:
        done, failed = fence_many(self, [(tid, timeout_ms)], new_retry=self._retry, enable_2pc=enable_2pc)
        if tid in failed:
            raise failed[tid]
        return done[tid]

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
                f"cannot abort in place: the coordinator holds {holder_text(d)}, not producer id "
                f"{committable.producer_id}, epoch {committable.producer_epoch}",
                transactional_id=tid,
            )
        check_end_txn_versions(self.wire, [committable])
        outcomes: dict[str, TxnOutcome] = {}
        errors = self._end_txns([committable], commit=False, outcomes=outcomes, max_workers=1)
        if errors:
            raise errors[0]
        return outcomes[tid]

    # -- helpers -------------------------------------------------------------------------------

    def _forget_coordinators(self, transactional_ids: Iterable[str]) -> None:
        for tid in transactional_ids:
            self.wire.forget_coordinator(tid)

    def _retry(self) -> Retry:
        deadline = time.monotonic() + self.retry_timeout_ms / 1000
        if self.deadline is not None:
            deadline = min(deadline, self.deadline)
        return Retry(deadline=deadline)

    @classmethod
    def _raise_for_code(cls, tid: str | None, code: int, api: str) -> None:
        raise error_for_code(tid, code, api)


# -- module helpers ------------------------------------------------------------------------------


class _Tally:
    """Counts final answers from the lanes' threads and reports ``progress(done, total, label)``.

    Outcomes known before anything is sent (already committed / aborted) count at once, so the
    bar starts where the work really starts.
    """

    def __init__(self, progress: Progress | None, total: int, label: str, *, already: int = 0):
        self._progress = progress
        self._total = total
        self._label = label
        self._done = already
        self._lock = threading.Lock()
        if progress is not None and total:
            progress(already, total, label)

    def __call__(self, _transactional_id: str) -> None:
        if self._progress is None:
            return
        with self._lock:
            self._done += 1
            self._progress(self._done, self._total, self._label)


def _already_committed(verdict: TxnVerdict, c: Committable) -> TxnOutcome:
    """The outcome of a transaction found committed: the pair the coordinator holds or answered now
    (after a TV2 rotation, not the committable's)."""
    pid = verdict.producer_id if verdict.producer_id is not None else c.producer_id
    epoch = verdict.producer_epoch if verdict.producer_epoch is not None else c.producer_epoch
    return TxnOutcome(c.transactional_id, "already_committed", pid, epoch)
