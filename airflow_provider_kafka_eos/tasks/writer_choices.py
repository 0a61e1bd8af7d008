"""The writer's choices an operator takes by name (naming and abort strategy, producer, 2PC),
parsed once at the operator's edge, so a DAG with a bad one fails before anything runs."""

from __future__ import annotations

from airflow_provider_kafka_eos.kafka.checkpoints.abort_strategies import AbortStrategy
from airflow_provider_kafka_eos.kafka.checkpoints.naming import NamingStrategy
from airflow_provider_kafka_eos.kafka.errors import KafkaEosError, UsageError

__all__ = ["parse_writer_choices"]


def parse_writer_choices(naming_strategy: str, abort_strategy: str | None, producer: str | None,
                         two_phase_commit: bool) -> tuple[str, str | None]:
    """A writer's strategy names parsed once, at the operator's edge; the producer and 2PC checked
    together (their pairing is the writer's rule, refused before anything runs)."""
    try:
        naming = NamingStrategy.parse(naming_strategy).value
    except KafkaEosError as err:
        raise UsageError(err.cause) from None
    if producer not in (None, "arrow", "librdkafka"):
        raise UsageError(f"producer must be arrow or librdkafka, got {producer!r}")
    if two_phase_commit and producer == "librdkafka":
        raise UsageError("two_phase_commit=True needs producer='arrow' (librdkafka cannot set Enable2Pc)",
                         runbook="two-phase-commit")
    return naming, AbortStrategy.parse(abort_strategy).value if abort_strategy else None
