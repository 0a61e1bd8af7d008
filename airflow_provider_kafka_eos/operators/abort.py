"""KafkaAbortTransactionsOperator: abort lingering orphans by fencing, and nothing else.

Aborting is the one irreversible thing cleanup does, so the operator decides again, at abort
time, what each transaction is: it reads the manifest store first (one PREPARED manifest may
have been written since the sensor looked; a store that cannot be read fails the task with
nothing aborted), re-describes every transaction (one may have finished, or been restarted
under the same id by a live pipeline) and only then fences the orphans, in parallel. The
decision itself is ``kafka/checkpoints/abort_plan.py``'s :func:`plan_abort`, the same one the CLI and the
manual DAG use. ``protect=False`` is the only way around the PREPARED protection and is logged
loudly. Running it twice is harmless: the second run finds nothing Ongoing and aborts nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator

from airflow_provider_kafka_eos.kafka.checkpoints.abort_plan import AbortCandidate, AbortPolicy, plan_abort
from airflow_provider_kafka_eos.kafka.checkpoints.store import PreparedRef, load_prepared
from airflow_provider_kafka_eos.kafka.checkpoints.writer_lease import load_writing
from airflow_provider_kafka_eos.kafka.operations.classify import FindingKind
from airflow_provider_kafka_eos.kafka.operations.scan import Findings, format_table
from airflow_provider_kafka_eos.tasks.fail_now import raises_fail_now
from airflow_provider_kafka_eos.tasks.metrics import record_abort


def _as_list(value: str | Sequence[Any] | None) -> list[str]:
    """A flat list of strings from a string, a list, or a template-rendered list inside a list."""
    if not value:
        return []
    if isinstance(value, str):
        return [value]
    return [item for v in value for item in _as_list(v)]


def as_bool(value: Any) -> bool:
    """A templated flag (``"False"`` from a rendered Param is false, not truthy)."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


@dataclass
class AbortDecision:
    """What the operator did (or would do) with one transaction, and why."""

    transactional_id: str
    kind: str
    action: str  # aborted | already_aborted | already_committed | would-abort | skipped
    reason: str
    producer_id: int | None = None
    producer_epoch: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class KafkaAbortTransactionsOperator(BaseOperator):
    """Abort transactions by fencing: explicit ids, every Ongoing one under prefixes, or sensor findings.

    :param transactional_ids: ids to abort.
    :param prefixes: abort every transaction Ongoing under these prefixes for at least ``min_age``.
    :param findings: the sensor's XCom (``Findings.to_dict()``); its transactions (and LSO stalls
        with a known transactional id) are candidates, but only if their producer id and epoch
        are still the ones the sensor saw.
    :param owned_prefixes: which transactional ids are ours; defaults to ``prefixes``, else to what
        the sensor classified as ours. Anything else is *foreign*.
    :param manifest_base_uri: the manifest store; default: ``manifest_base_uri`` in the connection's
        extra. Transactions of its PREPARED manifests are *commit-pending* and never aborted. A store
        that is not configured or cannot be read fails the task before anything is aborted.
    :param protect: ``False`` aborts commit-pending transactions too (their batch is lost) and
        does not require the store; logged loudly. Templated (a DAG Param).
    :param force_abort_foreign: abort transactions outside our prefixes too.
    :param dry_run: decide and report, abort nothing.

    XCom ``return_value``: ``{"dry_run", "protect", "aborted", "unchanged", "skipped", "rows"}``:
    ``unchanged`` are ids the coordinator had already finished when the fence arrived
    (``already_aborted`` / ``already_committed``); every row names the id, its kind, the action and why.
    """

    template_fields: Sequence[str] = (
        "transactional_ids",
        "prefixes",
        "findings",
        "owned_prefixes",
        "manifest_base_uri",
        "dry_run",
        "protect",
    )
    ui_color = "#f4cccc"

    def __init__(
        self,
        *,
        manifest_base_uri: str | None = None,
        kafka_eos_conn_id: str = "kafka_eos_default",
        transactional_ids: str | Sequence[str] | None = None,
        prefixes: str | Sequence[str] | None = None,
        findings: Mapping[str, Any] | str | None = None,
        owned_prefixes: str | Sequence[str] | None = None,
        min_age: timedelta | float = 0,
        dry_run: bool | str = False,
        protect: bool | str = True,
        force_abort_foreign: bool = False,
        max_workers: int = 16,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kafka_eos_conn_id = kafka_eos_conn_id
        self.transactional_ids = transactional_ids
        self.prefixes = prefixes
        self.findings = findings
        self.owned_prefixes = owned_prefixes
        self.manifest_base_uri = manifest_base_uri
        seconds = min_age.total_seconds() if isinstance(min_age, timedelta) else float(min_age)
        self.min_age_ms = int(seconds * 1000)
        self.dry_run = dry_run
        self.protect = protect
        self.force_abort_foreign = force_abort_foreign
        self.max_workers = max_workers

    @raises_fail_now
    def execute(self, context: Any) -> dict[str, Any]:
        from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
        from airflow_provider_kafka_eos.kafka.validation import validate_prefix, validate_transactional_id

        # Rendered arguments as Kafka can carry them (kafka/validation.py), before anything is read.
        for tid in _as_list(self.transactional_ids):
            validate_transactional_id(tid, field="transactional_ids")
        for prefix in [*_as_list(self.prefixes), *_as_list(self.owned_prefixes)]:
            validate_prefix(prefix, field="prefixes")
        hook = KafkaEosHook(kafka_eos_conn_id=self.kafka_eos_conn_id)
        protect = as_bool(self.protect)
        if not protect:
            self.log.warning(
                "UNPROTECTED ABORT (protect=False): transactions listed in PREPARED manifests will be "
                "aborted too; their checkpoints' batches are lost"
            )
        base, source = hook.manifest_store_setting(self.manifest_base_uri)
        prepared = load_prepared(base, protect=protect, source=source,  # before Kafka is touched
                                 access=hook.store_access(base))
        writing = load_writing(base, protect=protect, source=source, access=hook.store_access(base))
        with hook.transaction_admin() as admin:
            report = self.abort_with(admin, prepared, protect=protect, writing=writing)
        if not report["dry_run"]:
            record_abort(len(report["aborted"]))
        self.log.info(
            "%s: %d aborted, %d skipped\n%s",
            "dry run" if report["dry_run"] else "abort",
            len(report["aborted"]),
            len(report["skipped"]),
            self.table(report["rows"]),
        )
        return report

    # -- the decision, separate from Airflow so it reads top to bottom --------------------------

    def abort_with(self, admin: Any, prepared: Mapping[str, PreparedRef], *, protect: bool,
                   writing: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Decide (``plan_abort``) for every candidate, then fence the ones it allows. ``writing``:
        the prefixes whose pipeline's writer holds its lease (left alone)."""
        seen, sensor_owned = self._sightings()
        candidates = dict.fromkeys(_as_list(self.transactional_ids))
        prefixes = _as_list(self.prefixes)
        if prefixes:
            for desc in admin.find_lingering(prefixes=prefixes, min_age_ms=self.min_age_ms):
                candidates.setdefault(desc.transactional_id)
        for tid in seen:
            candidates.setdefault(tid)
        # Everything is decided before anything is aborted: a bad id fails the task with nothing done.
        descriptions = admin.describe(list(candidates)) if candidates else {}
        owned = _as_list(self.owned_prefixes) or prefixes
        policy = AbortPolicy(
            protect=protect,
            prefixes=tuple(owned),
            owned_ids=frozenset(sensor_owned),
            min_age_ms=self.min_age_ms,
            expected=seen,
            abort_foreign=self.force_abort_foreign,
            writing=dict(writing or {}),
        )
        plan = plan_abort(
            (AbortCandidate.of(descriptions[t]) for t in candidates), prepared=prepared, policy=policy
        )
        dry_run = as_bool(self.dry_run)
        rows = [
            AbortDecision(
                v.transactional_id,
                v.kind,
                ("would-abort" if dry_run else "aborted") if v.abort else "skipped",
                v.reason,
                v.producer_id,
                v.producer_epoch,
            )
            for v in plan.verdicts
        ]
        if plan.to_abort and not dry_run:
            outcomes = {
                o.transactional_id: o.outcome
                for o in admin.abort(plan.to_abort, max_workers=self.max_workers)
            }
            for row in rows:
                if row.transactional_id in outcomes:
                    row.action = str(
                        getattr(outcomes[row.transactional_id], "value", outcomes[row.transactional_id])
                    )
        return {
            "dry_run": dry_run,
            "protect": protect,
            "aborted": [r.transactional_id for r in rows if r.action in ("aborted", "would-abort")],
            "unchanged": [r.transactional_id for r in rows if r.action.startswith("already_")],
            "skipped": [r.transactional_id for r in rows if r.action == "skipped"],
            "rows": [r.to_dict() for r in rows],
        }

    def _sightings(self) -> tuple[dict[str, tuple[int, int]], set[str]]:
        """From the sensor's findings: id -> (producer id, epoch) it saw, and the ids it called ours."""
        findings = self._findings()
        seen: dict[str, tuple[int, int]] = {}
        owned: set[str] = set()
        if findings is None:
            return seen, owned
        for f in findings.transactions:
            seen[f.transactional_id] = (f.producer_id, f.producer_epoch)
            if f.kind is not FindingKind.FOREIGN:
                owned.add(f.transactional_id)
        for s in findings.lso_stalls:
            if s.transactional_id and s.blocking_producer_id is not None:
                seen[s.transactional_id] = (s.blocking_producer_id, int(s.blocking_producer_epoch or 0))
                if s.kind is not FindingKind.FOREIGN:
                    owned.add(s.transactional_id)
        return seen, owned

    def _findings(self) -> Findings | None:
        if not self.findings:
            return None
        if isinstance(self.findings, str):
            import json

            data = json.loads(self.findings)
        else:
            data = self.findings
        return Findings.from_dict(data, access=self._findings_access(data))

    def _findings_access(self, data: Mapping[str, Any]) -> Any:
        """How to reach the findings file a cut payload names (the store's credentials)."""
        from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook

        uri = data.get("findings_uri") if isinstance(data, Mapping) else None
        return KafkaEosHook(kafka_eos_conn_id=self.kafka_eos_conn_id).store_access(uri)

    @staticmethod
    def table(rows: Sequence[Mapping[str, Any]]) -> str:
        if not rows:
            return "(no transactions selected)"
        header = ("TRANSACTIONAL ID", "KIND", "ACTION", "PRODUCER", "EPOCH", "WHY")
        body = [
            (
                r["transactional_id"],
                r["kind"],
                r["action"],
                str(r["producer_id"]),
                str(r["producer_epoch"]),
                r["reason"],
            )
            for r in rows
        ]
        return format_table([header, *body])


__all__ = ["AbortDecision", "KafkaAbortTransactionsOperator", "as_bool"]
