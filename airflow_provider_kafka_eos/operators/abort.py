"""KafkaAbortTransactionsOperator: abort lingering orphans by fencing, and nothing else.

Aborting is the one irreversible thing cleanup does, so the operator decides again, at abort
time, what each transaction is: it re-reads the PREPARED manifests (one may have been written
since the sensor looked), re-describes every transaction (one may have finished, or been
restarted under the same id by a live pipeline) and only then fences the orphans, in parallel.
Commit-pending and foreign transactions are skipped unless a named override forces them.
Running it twice is harmless: the second run finds nothing Ongoing and aborts nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator

from airflow_provider_kafka_eos.kafka.classify import (
    FindingKind,
    Findings,
    classify_one,
    format_table,
    load_prepared,
)
from airflow_provider_kafka_eos.operators.fail_now import raises_fail_now


def _as_list(value: str | Sequence[Any] | None) -> list[str]:
    """A flat list of strings from a string, a list, or a template-rendered list inside a list."""
    if not value:
        return []
    if isinstance(value, str):
        return [value]
    return [item for v in value for item in _as_list(v)]


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
    :param manifest_base_uri: where PREPARED manifests live; their transactions are
        *commit-pending* and are never aborted. Required: pass ``None`` explicitly only for a
        producer that writes no manifests.
    :param force_abort_commit_pending: abort commit-pending transactions too (their batch is lost).
    :param force_abort_foreign: abort transactions outside our prefixes too.
    :param dry_run: decide and report, abort nothing.

    XCom ``return_value``: ``{"dry_run", "aborted", "unchanged", "skipped", "rows"}``: ``unchanged``
    are ids the coordinator had already finished when the fence arrived (``already_aborted`` /
    ``already_committed``); every row names the id, its kind, the action and why.
    """

    template_fields: Sequence[str] = (
        "transactional_ids",
        "prefixes",
        "findings",
        "owned_prefixes",
        "manifest_base_uri",
        "dry_run",
    )
    ui_color = "#f4cccc"

    def __init__(
        self,
        *,
        manifest_base_uri: str | None,
        kafka_eos_conn_id: str = "kafka_eos_default",
        transactional_ids: str | Sequence[str] | None = None,
        prefixes: str | Sequence[str] | None = None,
        findings: Mapping[str, Any] | str | None = None,
        owned_prefixes: str | Sequence[str] | None = None,
        min_age: timedelta | float = 0,
        dry_run: bool = False,
        force_abort_commit_pending: bool = False,
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
        self.force_abort_commit_pending = force_abort_commit_pending
        self.force_abort_foreign = force_abort_foreign
        self.max_workers = max_workers

    @raises_fail_now
    def execute(self, context: Any) -> dict[str, Any]:
        from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook

        with KafkaEosHook(kafka_eos_conn_id=self.kafka_eos_conn_id).transaction_admin() as admin:
            report = self.abort_with(admin)
        if not report["dry_run"]:
            from airflow_provider_kafka_eos.operators.metrics import record_abort

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

    def abort_with(self, admin: Any) -> dict[str, Any]:
        findings = self._findings()
        seen: dict[str, tuple[int, int]] = {}  # id -> (producer id, epoch) the sensor saw
        sensor_owned: set[str] = set()
        if findings is not None:
            for f in findings.transactions:
                seen[f.transactional_id] = (f.producer_id, f.producer_epoch)
                if f.kind is not FindingKind.FOREIGN:
                    sensor_owned.add(f.transactional_id)
            for s in findings.lso_stalls:
                if s.transactional_id and s.blocking_producer_id is not None:
                    seen[s.transactional_id] = (s.blocking_producer_id, int(s.blocking_producer_epoch or 0))
                    if s.kind is not FindingKind.FOREIGN:
                        sensor_owned.add(s.transactional_id)

        candidates = dict.fromkeys(_as_list(self.transactional_ids))
        prefixes = _as_list(self.prefixes)
        if prefixes:
            for desc in admin.find_lingering(prefixes=prefixes, min_age_ms=self.min_age_ms):
                candidates.setdefault(desc.transactional_id)
        for tid in seen:
            candidates.setdefault(tid)

        # Everything is decided before anything is aborted: a bad id fails the task with nothing done.
        prepared = load_prepared(self.manifest_base_uri)
        descriptions = admin.describe(list(candidates)) if candidates else {}
        owned = _as_list(self.owned_prefixes) or prefixes

        rows: list[AbortDecision] = []
        to_abort: list[str] = []
        for tid in candidates:
            desc = descriptions[tid]
            pid, epoch = int(desc.producer_id), int(desc.producer_epoch)
            state = str(getattr(desc.state, "value", desc.state))
            if owned:
                kind, why, _ = classify_one(
                    tid, producer_id=pid, producer_epoch=epoch, owned_prefixes=owned, prepared=prepared
                )
            else:
                kind, why, _ = classify_one(
                    tid,
                    producer_id=pid,
                    producer_epoch=epoch,
                    owned_prefixes=[tid] if tid in sensor_owned else [],
                    prepared=prepared,
                )
                if kind is FindingKind.ORPHAN:
                    why = "classified as ours by the sensor and in no PREPARED manifest"

            action = "skipped"
            if state != "Ongoing":
                why = f"not open (state {state}): nothing to abort"
            elif tid in seen and seen[tid] != (pid, epoch):
                why = (
                    f"now producer {pid} epoch {epoch}, the sensor saw producer {seen[tid][0]} epoch "
                    f"{seen[tid][1]}: a new transaction reuses this id; re-run the sensor"
                )
            elif kind is FindingKind.COMMIT_PENDING and not self.force_abort_commit_pending:
                why = (
                    f"commit-pending ({why}): commit it from its manifest; "
                    "force_abort_commit_pending=True would lose the batch"
                )
            elif kind is FindingKind.FOREIGN and not self.force_abort_foreign:
                why = f"foreign ({why}): not ours to abort; force_abort_foreign=True overrides"
            elif self.dry_run:
                action = "would-abort"
            else:
                action = "aborted"
                to_abort.append(tid)
            rows.append(AbortDecision(tid, kind.value, action, why, pid, epoch))

        if to_abort:
            outcomes = {
                o.transactional_id: o.outcome for o in admin.abort(to_abort, max_workers=self.max_workers)
            }
            for row in rows:
                if row.transactional_id in outcomes:
                    row.action = str(
                        getattr(outcomes[row.transactional_id], "value", outcomes[row.transactional_id])
                    )

        return {
            "dry_run": bool(self.dry_run),
            "aborted": [r.transactional_id for r in rows if r.action in ("aborted", "would-abort")],
            "unchanged": [r.transactional_id for r in rows if r.action.startswith("already_")],
            "skipped": [r.transactional_id for r in rows if r.action == "skipped"],
            "rows": [r.to_dict() for r in rows],
        }

    def _findings(self) -> Findings | None:
        if not self.findings:
            return None
        if isinstance(self.findings, str):
            import json

            return Findings.from_dict(json.loads(self.findings))
        return Findings.from_dict(self.findings)

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


__all__ = ["AbortDecision", "KafkaAbortTransactionsOperator"]
