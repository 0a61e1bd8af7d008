"""DescribeTransactions and ListTransactions: what the coordinators say about transactional ids.

:func:`describe_transactions` asks each id's coordinator (batched per coordinator, retried while
coordinators load or move); :func:`list_filtered` asks every broker, with each filter the
broker supports and every filter applied again here, so the answer is the same on every cluster
version. The :class:`~airflow_provider_kafka_eos.kafka.admin.transactions.TransactionAdmin`
facade delegates to them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from kafka.protocol.admin.transactions import DescribeTransactionsRequest, ListTransactionsRequest

from airflow_provider_kafka_eos.kafka.errors import (
    BrokerUnreachableError,
    UnknownTransactionError,
    UnsupportedCapabilityError,
)
from airflow_provider_kafka_eos.kafka.protocol.committable import TopicPartition
from airflow_provider_kafka_eos.kafka.protocol.coordinator_answers import (
    RETRIABLE,
    Retry,
    error_for_code,
)
from airflow_provider_kafka_eos.kafka.protocol.error_codes import (
    NOT_COORDINATOR,
    TRANSACTIONAL_ID_NOT_FOUND,
)
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import (
    TransactionDescription,
    TransactionListing,
    TxnState,
)
from airflow_provider_kafka_eos.kafka.protocol.wire import Wire

_DESCRIBE_BATCH = 1000


class DescribeAdmin(Protocol):
    """What a describe needs of the admin handed in (a TransactionAdmin): its wire and its retry
    budget. A Protocol, so this module does not import the facade that imports it."""

    wire: Wire
    retry_timeout_ms: int

    def new_retry(self) -> Retry: ...


def describe_transactions(
    admin: DescribeAdmin, ids: Iterable[str], *, missing_ok: bool = False
) -> dict[str, TransactionDescription]:
    """DescribeTransactions for each id, batched per coordinator.

    An id the coordinator does not know raises UnknownTransactionError (or is left out of
    the result with ``missing_ok=True``).
    """
    ids = list(dict.fromkeys(ids))
    if not ids:
        return {}
    result: dict[str, TransactionDescription] = {}
    pending = ids
    retry = admin.new_retry()
    unreachable: BrokerUnreachableError | None = None
    while pending:
        coordinators = admin.wire.coordinators(pending)
        by_node: dict[int, list[str]] = defaultdict(list)
        again: list[str] = []
        for tid in pending:
            node = coordinators[tid]
            if isinstance(node, Exception):
                code = getattr(node, "errno", -1)
                if code not in RETRIABLE:
                    raise error_for_code(tid, code, "FindCoordinator")
                again.append(tid)  # coordinator loading or moving: ask again after a backoff
                continue
            by_node[node].append(tid)
        batch = [
            (DescribeTransactionsRequest(transactional_ids=chunk), node)
            for node, tids in by_node.items()
            for chunk in _chunks(tids, _DESCRIBE_BATCH)
        ]
        answers = admin.wire.send_all(batch, raise_errors=False)
        for (request, node), response in zip(batch, answers, strict=True):
            if isinstance(response, BrokerUnreachableError):
                # The coordinator died or restarts: look it up again (its partition moves).
                for forgotten in request.transactional_ids:
                        admin.wire.forget_coordinator(forgotten)
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
                        admin.wire.forget_coordinator(tid)
                    again.append(tid)
                    continue
                if row.error_code:
                    raise error_for_code(tid, row.error_code, "DescribeTransactions")
                result[tid] = _description(row, node)
        pending = again
        if pending and not retry.wait():
            reason = f" (last: {unreachable.cause})" if unreachable is not None else ""
            raise BrokerUnreachableError(
                f"coordinators kept answering retriable errors or could not be reached for "
                f"{len(pending)} transaction(s) for {admin.retry_timeout_ms} ms{reason}",
                transactional_id=pending[0],
            )
    return result


def list_filtered(
    wire: Wire, prefixes: Sequence[str] | None, states: Sequence[str] | None, min_age_ms: int | None
) -> dict[str, TransactionListing]:
    """ListTransactions with every filter the broker supports; prefixes and states re-applied here."""
    version = wire.api_version(ListTransactionsRequest)
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
    batch = [(ListTransactionsRequest(**kwargs, version=version), node) for node in wire.brokers()]
    listings: dict[str, TransactionListing] = {}
    for response in wire.send_all(batch):
        if response.error_code:
            raise error_for_code(None, response.error_code, "ListTransactions")
        for row in response.transaction_states:
            if prefixes and not row.transactional_id.startswith(tuple(prefixes)):
                continue
            if wanted_states and row.transaction_state not in wanted_states:
                continue
            listings[row.transactional_id] = TransactionListing(
                row.transactional_id, row.producer_id, TxnState.parse(row.transaction_state)
            )
    return listings


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
