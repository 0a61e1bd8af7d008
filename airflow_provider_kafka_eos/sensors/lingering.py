"""KafkaLingeringTransactionSensor: fires when transactions linger, with every finding classified.

A lingering transaction blocks every read_committed consumer at the LSO until the broker times
it out (and then its data is gone). The sensor turns that silent stall into a task that
succeeds with the findings in XCom, so the cleanup DAG can abort orphans and commit the
commit-pending ones. It supports the three sensor modes: ``poke`` (holds a worker slot and
keeps LSO-stall history in memory), ``reschedule`` (frees the slot between pokes; LSO stalls
are then judged from the blocking producer's last write) and ``deferrable`` (one poke, then the
triggerer polls with :class:`LingeringTransactionTrigger`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue, conf

from airflow_provider_kafka_eos.kafka.classify import Findings, LsoStallTracker, ScanSpec
from airflow_provider_kafka_eos.operators.fail_now import raises_fail_now
from airflow_provider_kafka_eos.triggers.lingering import (
    STATUS_FOUND,
    LingeringTransactionTrigger,
    error_from_event,
    scan_with_connection,
)


def _milliseconds(value: timedelta | float | int | str, name: str) -> int:
    seconds = (
        value.total_seconds() if isinstance(value, timedelta) else float(value)
    )  # "30" renders from a template
    if seconds < 0:
        raise ValueError(f"{name} must not be negative, got {value!r}")
    return int(seconds * 1000)


def _as_tuple(value: str | Sequence[Any] | None) -> tuple[str, ...] | None:
    """Prefixes as a flat tuple; accepts a string, a list, or a list rendered inside a list."""
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    flat: list[str] = []
    for item in value:
        flat.extend(_as_tuple(item) or ())
    return tuple(flat)


class KafkaLingeringTransactionSensor(BaseSensorOperator):
    """Wait until a Kafka transaction has been Ongoing longer than ``min_age``; push the findings.

    :param kafka_eos_conn_id: the ``kafka_eos`` connection (its secrets never leave the hook).
    :param prefixes: transactional-id prefixes to watch; ``None`` watches the whole cluster.
    :param owned_prefixes: which prefixes are ours (transactions under them that no PREPARED
        manifest lists are *orphans*, safe to abort); defaults to ``prefixes``.
    :param min_age: how long a transaction must have been Ongoing to count, ``timedelta`` or
        seconds (templated; keep it above the longest a healthy pipeline needs between prepare
        and commit).
    :param manifest_base_uri: where the pipelines write checkpoint manifests; transactions in a
        PREPARED manifest are *commit-pending*. Without it nothing can be commit-pending, so
        the abort operator (which always re-reads the manifests) is the guard.
    :param lso_partitions: ``"topic"`` or ``"topic:N"`` entries to also watch for LSO stalls
        (catches producers outside the prefixes and clusters without ListTransactions).
    :param min_lso_stall: how long an LSO must be pinned to count (defaults to ``min_age``).
    :param deferrable: poke once, then hand the waiting to the triggerer.

    XCom ``return_value``: ``Findings.to_dict()`` (ids, producer ids/epochs, ages, kinds,
    reasons; no configuration, no secrets).
    """

    template_fields: Sequence[str] = (
        "prefixes",
        "owned_prefixes",
        "min_age",
        "manifest_base_uri",
        "lso_partitions",
    )
    ui_color = "#f6e7c8"

    def __init__(
        self,
        *,
        kafka_eos_conn_id: str = "kafka_eos_default",
        prefixes: str | Sequence[str] | None = None,
        owned_prefixes: str | Sequence[str] | None = None,
        min_age: timedelta | float = timedelta(minutes=15),
        manifest_base_uri: str | None = None,
        lso_partitions: Sequence[str] | None = None,
        min_lso_stall: timedelta | float | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kafka_eos_conn_id = kafka_eos_conn_id
        self.prefixes = prefixes  # normalised once templates are rendered (scan_spec)
        self.owned_prefixes = owned_prefixes
        self.min_age = min_age
        if not isinstance(min_age, str):  # a template is checked once rendered
            _milliseconds(min_age, "min_age")
        self.manifest_base_uri = manifest_base_uri
        self.lso_partitions = lso_partitions
        self.min_lso_stall_ms = (
            None if min_lso_stall is None else _milliseconds(min_lso_stall, "min_lso_stall")
        )
        self.deferrable = deferrable
        self._tracker = LsoStallTracker()

    def scan_spec(self) -> ScanSpec:
        return ScanSpec(
            min_age_ms=_milliseconds(self.min_age, "min_age"),
            prefixes=_as_tuple(self.prefixes),
            owned_prefixes=_as_tuple(self.owned_prefixes),
            manifest_base_uri=self.manifest_base_uri or None,
            lso_partitions=_as_tuple(self.lso_partitions) or (),
            min_lso_stall_ms=self.min_lso_stall_ms,
        )

    def poke(self, context: Any) -> PokeReturnValue:
        findings = scan_with_connection(self.kafka_eos_conn_id, self.scan_spec(), self._tracker)
        if not findings:
            self.log.info(
                "no transaction Ongoing for more than %d ms (%s)", findings.min_age_ms, findings.summary()
            )
            return PokeReturnValue(is_done=False)
        self._log_findings(findings)
        return PokeReturnValue(is_done=True, xcom_value=findings.to_dict())

    @raises_fail_now
    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        first = self.poke(context)
        if first.is_done:
            return first.xcom_value
        self.defer(
            trigger=LingeringTransactionTrigger(
                kafka_eos_conn_id=self.kafka_eos_conn_id,
                spec=self.scan_spec().to_dict(),
                poll_interval=self.poke_interval,
                tracker=self._tracker.to_dict(),
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    # Not fail-now wrapped: the base sensor turns any AirflowException raised on resume into a skip
    # under soft_fail, which would hide the error; the trigger's error is re-raised as our own class.
    def execute_complete(self, context: Any, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Resume after the trigger: return its findings, or fail with the error it reported."""
        if not event or event.get("status") != STATUS_FOUND:
            raise error_from_event(event or {"cause": "the lingering-transaction trigger sent no event"})
        findings = Findings.from_dict(event["findings"])
        self._log_findings(findings)
        return findings.to_dict()

    def _log_findings(self, findings: Findings) -> None:
        self.log.warning("lingering transactions found: %s\n%s", findings.summary(), findings.table())
