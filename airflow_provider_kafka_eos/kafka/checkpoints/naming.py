"""Transactional-id naming strategies, as in Flink's exactly-once Kafka sink.

An id is ``{prefix}-{partition}-{offset}`` and is parsed back from its *last two* dashes, so
a prefix may itself contain dashes, a trailing one too (``orders-`` gives ``orders--0-1``, whose
last two dashes still delimit the digits). What a prefix may be is ``kafka/validation.py``'s one
rule, checked by the submit operator before the job starts and here again.
The offset's meaning is the strategy:

- ``INCREMENTING``: offset = checkpoint id. Every checkpoint uses fresh ids; simple and
  probe-able (the PROBING abort strategy walks ids upward), but each id lives on the
  coordinator for ``transactional.id.expiration.ms`` (7 days by default): one per partition per
  checkpoint adds up.
- ``POOLING``: offset = the smallest slot not held by an Ongoing transaction or listed in a
  PREPARED manifest. Ids are reused, so the coordinator keeps a bounded set; finding lingering
  ones needs ListTransactions (the LISTING abort strategy).

Switching a pipeline that has state from POOLING to INCREMENTING is refused (as Flink does):
pooled ids do not follow checkpoint numbers, so PROBING would never find lingering ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import partial
from typing import Any, Protocol

from airflow_provider_kafka_eos.kafka.errors import ConfigError
from airflow_provider_kafka_eos.kafka.protocol.transaction_types import TransactionListing
from airflow_provider_kafka_eos.kafka.validation import validate_prefix


class ListingAdmin(Protocol):
    """What naming needs of the admin handed in (a TransactionAdmin): ListTransactions. A Protocol:
    ``kafka/checkpoints`` does not import its sibling ``kafka/admin``."""

    def list(
        self, prefixes: Sequence[str] | None = None, states: Sequence[str] | None = None,
        min_age_ms: int | None = None,
    ) -> list[TransactionListing]: ...

__all__ = [
    "NamingStrategy",
    "ParsedTransactionalId",
    "check_strategy_switch",
    "format_transactional_id",
    "incrementing_id",
    "owned_by",
    "parse_transactional_id",
    "pipeline_identity",
    "pooling_id",
    "pooling_ids",
]


class NamingStrategy(str, Enum):
    """How a pipeline names its transactional ids; each member carries its behaviour."""

    INCREMENTING = "INCREMENTING"
    POOLING = "POOLING"

    @classmethod
    def parse(cls, value: str | NamingStrategy) -> NamingStrategy:
        """The one place a strategy name becomes a strategy (ConfigError naming the choices)."""
        try:
            return cls(str(getattr(value, "value", value)).strip().upper())
        except ValueError:
            raise ConfigError(f"naming strategy must be INCREMENTING or POOLING, got {value!r}") from None

    def ids_in_use(self, admin: ListingAdmin, prefix: str, prepared_ids: Iterable[str]) -> set[str]:
        """Ids a new checkpoint must not take: POOLING's open and PREPARED ids; none for INCREMENTING."""
        if self is NamingStrategy.INCREMENTING:
            return set()
        open_ids = {
            entry.transactional_id
            for entry in admin.list(prefixes=[prefix], states=["Ongoing"])
            if owned_by(prefix, entry.transactional_id)
        }
        return open_ids | set(prepared_ids)

    def id_factory(
        self, prefix: str, checkpoint_id: int, *, partitions: int, in_use: Iterable[str] = ()
    ) -> Callable[[int], str]:
        """Spark partition id -> transactional id, picklable (it travels to the executors)."""
        if self is NamingStrategy.INCREMENTING:
            return partial(incrementing_id, prefix, checkpoint_id=checkpoint_id)
        taken = frozenset(in_use)
        return partial(_pooled, pooling_ids(prefix, range(partitions), taken), prefix, taken)

    def check_switch_from(self, previous: Iterable[Any]) -> NamingStrategy:
        """:func:`check_strategy_switch` against the pipeline's manifests (``(uri, Manifest)`` rows)."""
        rows = list(previous)
        last = rows[-1][1].naming_strategy if rows else None
        return check_strategy_switch(last, self, has_state=bool(rows))


@dataclass(frozen=True)
class ParsedTransactionalId:
    prefix: str
    partition: int
    offset: int  # checkpoint id (INCREMENTING) or pool slot (POOLING)


def pipeline_identity(pipeline_id: str | None, transactional_id_prefix: str | None) -> tuple[str, str]:
    """(pipeline id, transactional-id prefix): the one rule for their defaults.

    Each defaults to the other (a pipeline is usually named by its prefix); at least one is
    required. Used by the writer, the spark job and the submit operator alike.
    """
    pipeline = (pipeline_id or "").strip() or None
    prefix = (transactional_id_prefix or "").strip() or None
    if pipeline is None and prefix is None:
        raise ConfigError(
            "a pipeline needs a pipeline_id or a transactional_id_prefix (each defaults to the other)"
        )
    return (pipeline or prefix), (prefix or pipeline)  # type: ignore[return-value]


def format_transactional_id(prefix: str, partition: int, offset: int) -> str:
    if partition < 0 or offset < 0:
        raise ConfigError(f"partition ({partition}) and offset ({offset}) of a transactional id must be >= 0")
    return f"{validate_prefix(prefix)}-{partition}-{offset}"


def parse_transactional_id(transactional_id: str) -> ParsedTransactionalId | None:
    """Split at the last two dashes; None when the id does not have our shape."""
    parts = transactional_id.rsplit("-", 2)
    if len(parts) != 3:
        return None
    prefix, partition, offset = parts
    if not prefix or not partition.isdigit() or not offset.isdigit():
        return None
    return ParsedTransactionalId(prefix, int(partition), int(offset))


def owned_by(prefix: str, transactional_id: str) -> bool:
    """True only for ids this prefix generated (``p-0-1`` is owned by ``p``, ``p2-0-1`` is not)."""
    parsed = parse_transactional_id(transactional_id)
    return parsed is not None and parsed.prefix == prefix


def _pooled(table: dict[int, str], prefix: str, in_use: frozenset[str], partition: int) -> str:
    return table.get(partition) or pooling_id(prefix, partition, in_use)


def incrementing_id(prefix: str, partition: int, checkpoint_id: int) -> str:
    """INCREMENTING: ``{prefix}-{partition}-{checkpoint}``."""
    return format_transactional_id(prefix, partition, checkpoint_id)


def pooling_id(prefix: str, partition: int, in_use: Iterable[str]) -> str:
    """POOLING: ``{prefix}-{partition}-{slot}`` with the smallest slot not in ``in_use``.

    ``in_use`` = ids of Ongoing transactions (ListTransactions) plus ids listed in PREPARED
    manifests: a prepared id must never be reused before its commit, or the new producer
    would fence and abort the prepared transaction.
    """
    taken = {
        parsed.offset
        for parsed in (parse_transactional_id(t) for t in in_use)
        if parsed is not None and parsed.prefix == prefix and parsed.partition == partition
    }
    slot = 0
    while slot in taken:
        slot += 1
    return format_transactional_id(prefix, partition, slot)


def pooling_ids(prefix: str, partitions: Iterable[int], in_use: Iterable[str]) -> dict[int, str]:
    """:func:`pooling_id` for several partitions at once (``in_use`` read once)."""
    taken = list(in_use)
    return {p: pooling_id(prefix, p, taken) for p in partitions}


def check_strategy_switch(
    previous: str | NamingStrategy | None, requested: str | NamingStrategy, *, has_state: bool
) -> NamingStrategy:
    """Validate a pipeline's strategy against the one its existing manifests used.

    POOLING -> INCREMENTING with state is refused; INCREMENTING -> POOLING is allowed (LISTING
    finds ids of both shapes under the prefix).
    """
    new = NamingStrategy.parse(requested)
    if previous is None or not has_state:
        return new
    old = NamingStrategy.parse(previous)
    if old is NamingStrategy.POOLING and new is NamingStrategy.INCREMENTING:
        raise ConfigError(
            "the pipeline's existing checkpoints use the POOLING naming strategy; switching to INCREMENTING "
            "is refused because pooled transactional ids do not follow checkpoint numbers and the PROBING "
            "abort strategy would miss lingering ones. Keep POOLING, or start a new pipeline id / prefix",
            runbook="configuration",
        )
    return new
