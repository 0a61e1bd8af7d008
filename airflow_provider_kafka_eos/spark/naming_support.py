"""How the writer picks transactional ids and finds its pipeline's open transactions.

Thin glue between the writer and the core's ``kafka/naming.py`` (id shapes) and
``kafka/abort_strategies.py`` (LISTING / PROBING); the rules themselves live there.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from airflow_provider_kafka_eos.kafka import naming
from airflow_provider_kafka_eos.kafka.manifest import find_manifests

__all__ = ["check_naming_switch", "default_abort_strategy", "id_factory", "open_transaction_finder"]


def default_abort_strategy(naming_strategy: str, admin: Any) -> str:
    """LISTING when the cluster has ListTransactions (Kafka 3.0+), else PROBING (INCREMENTING only)."""
    from kafka.protocol.admin import ListTransactionsRequest

    can_list = admin.wire.api_version(ListTransactionsRequest) is not None
    if can_list:
        return "LISTING"
    if naming.NamingStrategy.parse(naming_strategy) is naming.NamingStrategy.POOLING:
        from airflow_provider_kafka_eos.kafka.errors import UnsupportedCapabilityError

        raise UnsupportedCapabilityError(
            "the POOLING naming strategy needs ListTransactions (Kafka 3.0+) to find pooled ids in use; "
            "use INCREMENTING with the PROBING abort strategy on this cluster",
            runbook="capabilities",
        )
    return "PROBING"


def check_naming_switch(manifest_base_uri: str, pipeline_id: str, naming_strategy: str) -> None:
    """Refuse POOLING -> INCREMENTING for a pipeline with manifests (see ``naming.check_strategy_switch``)."""
    existing = find_manifests(manifest_base_uri, pipeline_id)
    previous = existing[-1][1].naming_strategy if existing else None
    naming.check_strategy_switch(previous, naming_strategy, has_state=bool(existing))


def open_transaction_finder(
    abort_strategy: str,
    *,
    naming_strategy: str,
    checkpoint_id: int,
    partitions_hint: int,
) -> Callable[[Any, str, set[str]], list[str]]:
    """``find(admin, prefix, protected) -> [open transactional ids owned by prefix]``."""
    strategy = abort_strategy.upper()
    if strategy == "LISTING":
        return _listing
    if strategy == "PROBING":
        return partial(_probing, checkpoint_id=checkpoint_id, partitions_hint=partitions_hint)
    from airflow_provider_kafka_eos.kafka.errors import UsageError

    raise UsageError(f"abort strategy must be LISTING or PROBING, got {abort_strategy!r}")


def id_factory(
    naming_strategy: str,
    prefix: str,
    checkpoint_id: int,
    *,
    partitions: int,
    in_use: set[str],
) -> Callable[[int], str]:
    """Partition id -> transactional id, picklable (it travels to the executors)."""
    strategy = naming.NamingStrategy.parse(naming_strategy)
    if strategy is naming.NamingStrategy.INCREMENTING:
        return partial(_incrementing, prefix, checkpoint_id)
    table = naming.pooling_ids(prefix, range(partitions), in_use)
    return partial(_pooled, table, prefix, frozenset(in_use))


def _incrementing(prefix: str, checkpoint_id: int, partition: int) -> str:
    return naming.incrementing_id(prefix, partition, checkpoint_id)


def _pooled(table: dict[int, str], prefix: str, in_use: frozenset[str], partition: int) -> str:
    return table.get(partition) or naming.pooling_id(prefix, partition, in_use)


def _listing(admin: Any, prefix: str, protected: set[str]) -> list[str]:
    listed = admin.list(prefixes=[f"{prefix}-"], states=["Ongoing"])
    return sorted(
        entry.transactional_id
        for entry in listed
        if naming.owned_by(prefix, entry.transactional_id) and entry.transactional_id not in protected
    )


def _probing(
    admin: Any, prefix: str, protected: set[str], *, checkpoint_id: int, partitions_hint: int
) -> list[str]:
    from airflow_provider_kafka_eos.kafka import abort_strategies

    return sorted(
        t for t in abort_strategies.probe_open_transactions(
            admin, prefix, checkpoint_id=checkpoint_id, partitions_hint=partitions_hint, protected=protected
        )
        if t not in protected
    )
