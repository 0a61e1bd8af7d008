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

from airflow_provider_kafka_eos.kafka.operations.findings_store import XCOM_MAX_FINDINGS
from airflow_provider_kafka_eos.kafka.operations.lso_stalls import LsoStallTracker
from airflow_provider_kafka_eos.kafka.operations.scan import Findings, ScanSpec
from airflow_provider_kafka_eos.tasks.fail_now import raises_fail_now
from airflow_provider_kafka_eos.triggers.lingering import (
    STATUS_FOUND,
    LingeringTransactionTrigger,
    bounded_findings,
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
    :param manifest_base_uri: where the pipelines write checkpoint manifests (default: the
        connection extra's ``manifest_base_uri``); transactions in a PREPARED manifest are
        *commit-pending*. A store that is not configured or cannot be read fails the poke.
    :param lso_partitions: ``"topic"`` or ``"topic:N"`` entries to also watch for LSO stalls
        (catches producers outside the prefixes and clusters without ListTransactions).
    :param min_lso_stall: how long an LSO must be pinned to count (defaults to ``min_age``).
    :param input_topics: a Kafka-input pipeline's input topic(s) (a list or a comma-separated
        string, templated; the submit operator's ``input_topics``): every partition is watched
        like ``lso_partitions``, and a stall there is reported as an *input stall*: the pipeline
        cannot read past it, naming the transaction holding it (transactional id, producer id,
        partition, since when) and the next step (runbook ``input-lag``).
    :param deferrable: poke once, then hand the waiting to the triggerer.
    :param findings_base_uri: where the full findings go as a JSON file when there are more
        than ``xcom_max_findings`` (templated; defaults to the manifest store the scan reads, this sensor's
        ``manifest_base_uri`` or the connection's; the file is
        ``<base>/_lingering-findings/findings-<ms>-<hash>.json``).
    :param xcom_max_findings: at most this many findings per list in XCom (the metadata
        database); the rest are counted in ``omitted`` and are in the findings file.

    XCom ``return_value``: ``Findings.to_dict()`` bounded (counts, the first
    ``xcom_max_findings`` transactions and LSO stalls, ``omitted``, ``findings_uri``; ids,
    producer ids/epochs, ages, kinds, reasons; no configuration, no secrets).
    ``Findings.from_dict`` reads the findings file back, so the abort operator and the cleanup
    DAG act on every finding.
    """

    template_fields: Sequence[str] = (
        "prefixes",
        "owned_prefixes",
        "min_age",
        "manifest_base_uri",
        "lso_partitions",
        "input_topics",
        "findings_base_uri",
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
        findings_base_uri: str | None = None,
        xcom_max_findings: int = XCOM_MAX_FINDINGS,
        input_topics: str | Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if xcom_max_findings < 0:
            raise ValueError(f"xcom_max_findings must not be negative, got {xcom_max_findings!r}")
        self.findings_base_uri = findings_base_uri
        self.xcom_max_findings = int(xcom_max_findings)
        self.kafka_eos_conn_id = kafka_eos_conn_id
        self.prefixes = prefixes  # normalised once templates are rendered (scan_spec)
        self.owned_prefixes = owned_prefixes
        self.min_age = min_age
        if not isinstance(min_age, str):  # a template is checked once rendered
            _milliseconds(min_age, "min_age")
        self.manifest_base_uri = manifest_base_uri
        self.lso_partitions = lso_partitions
        self.input_topics = input_topics  # validated once templates are rendered (scan_spec)
        self.min_lso_stall_ms = (
            None if min_lso_stall is None else _milliseconds(min_lso_stall, "min_lso_stall")
        )
        self.deferrable = deferrable
        self._tracker = LsoStallTracker()

    def scan_spec(self) -> ScanSpec:
        from airflow_provider_kafka_eos.kafka.validation import validate_prefix, validate_topic

        for prefix in (*(_as_tuple(self.prefixes) or ()), *(_as_tuple(self.owned_prefixes) or ())):
            validate_prefix(prefix, field="prefixes")  # as Kafka can carry it (kafka/validation.py)
        input_topics = tuple(t.strip() for entry in _as_tuple(self.input_topics) or ()
                             for t in entry.split(",") if t.strip())
        for topic in input_topics:
            validate_topic(topic, field="input_topics")
        return ScanSpec(
            min_age_ms=_milliseconds(self.min_age, "min_age"),
            prefixes=_as_tuple(self.prefixes),
            owned_prefixes=_as_tuple(self.owned_prefixes),
            manifest_base_uri=self.manifest_base_uri or None,
            lso_partitions=_as_tuple(self.lso_partitions) or (),
            min_lso_stall_ms=self.min_lso_stall_ms,
            input_topics=input_topics,
        )

    def poke(self, context: Any) -> PokeReturnValue:
        findings = scan_with_connection(self.kafka_eos_conn_id, self.scan_spec(), self._tracker)
        if not findings:
            self.log.info(
                "no transaction Ongoing for more than %d ms (%s)", findings.min_age_ms, findings.summary()
            )
            return PokeReturnValue(is_done=False)
        payload = bounded_findings(findings, self._findings_base_uri(), self.xcom_max_findings,
                                   conn_id=self.kafka_eos_conn_id)
        self._log_findings(findings, payload.get("findings_uri"))
        return PokeReturnValue(is_done=True, xcom_value=payload)

    def _findings_base_uri(self) -> str | None:
        # None: bounded_findings uses the store the scan read (this sensor's or the connection's)
        return self.findings_base_uri or None

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
                findings_base_uri=self._findings_base_uri(),
                xcom_max_findings=self.xcom_max_findings,
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
        payload = event["findings"]
        from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook

        hook = KafkaEosHook(kafka_eos_conn_id=self.kafka_eos_conn_id)
        access = hook.store_access(payload.get("findings_uri"))
        findings = Findings.from_dict(payload, access=access)  # the full list (from the findings file if cut)
        if "omitted" not in payload:  # an event of a trigger started before the XCom was bounded
            payload = bounded_findings(findings, self._findings_base_uri(), self.xcom_max_findings,
                                       conn_id=self.kafka_eos_conn_id)
        self._log_findings(findings, payload.get("findings_uri"))
        return payload

    def _log_findings(self, findings: Findings, findings_uri: str | None) -> None:
        """The table in the task log: all rows, or the first 200 when a findings file has them all."""
        where = f"; all of them in {findings_uri}" if findings_uri else ""
        self.log.warning(
            "lingering transactions found: %s%s\n%s",
            findings.summary(),
            where,
            findings.table(limit=200 if findings_uri else None),
        )
