"""KafkaCommitTransactionsOperator: the commit phase of the two-phase commit.

Reads the checkpoint manifest the Spark job wrote, commits every transaction it lists
(``TransactionAdmin.commit`` verifies all of them, including their timeout deadline, before
it commits any, then commits in parallel), and marks the manifest COMMITTED with a report.

Retrying it is safe: a COMMITTED manifest is reported again without touching Kafka, and a
transaction that was committed by an earlier try counts as ``already_committed``. A
transaction that can no longer be committed (aborted, fenced, timed out) raises the
``DataLossError`` naming it; the manifest stays PREPARED (nothing is reported as success
that was not committed) and the next run's restore marks it ABORTED.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_provider_kafka_eos.kafka.errors import DataLossError, ManifestError
from airflow_provider_kafka_eos.kafka.manifest import ManifestStatus, read_manifest, write_manifest
from airflow_provider_kafka_eos.operators.assets import announce_committed_checkpoint, with_committed_alias
from airflow_provider_kafka_eos.operators.fail_now import raises_fail_now
from airflow_provider_kafka_eos.operators.lineage import KafkaLineageMixin

__all__ = ["KafkaCommitTransactionsOperator", "commit_report"]


def commit_report(
    manifest: Any, outcomes: Sequence[Any], *, started_ms: int, finished_ms: int
) -> dict[str, Any]:
    """What the commit did, for the manifest and XCom (no secrets: ids, counts, timings)."""
    prepared_at = max((c.prepared_at_ms for c in manifest.committables), default=started_ms)
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.outcome] = counts.get(o.outcome, 0) + 1
    return {
        "pipeline_id": manifest.pipeline_id,
        "checkpoint_id": manifest.checkpoint_id,
        "topic": manifest.topic,
        "transactions": len(manifest.committables),
        "records": sum(c.record_count for c in manifest.committables),
        "outcomes": counts,
        "transactional_ids": sorted(o.transactional_id for o in outcomes),
        "commit_latency_ms": finished_ms - started_ms,
        "prepare_to_commit_ms": finished_ms - prepared_at,
        "committed_at_ms": finished_ms,
    }


class KafkaCommitTransactionsOperator(KafkaLineageMixin, BaseOperator):
    """Commit every transaction of one checkpoint manifest, then mark it COMMITTED.

    :param manifest_uri: the manifest to commit (templated). Default: the XCom return value of
        ``submit_task_id`` (what ``SparkEosSubmitOperator`` pushes).
    :param submit_task_id: the task whose XCom names the manifest when ``manifest_uri`` is not set.
    :param kafka_eos_conn_id: the ``kafka_eos`` connection.
    :param max_workers: parallel EndTxn requests.
    :returns: (XCom) the commit report: transactions, records, outcomes, latencies.

    A try that commits a checkpoint emits one Asset event for ``kafka://host:port/topic``
    (``operators/assets.py``; a rerun of a COMMITTED manifest emits none), records the
    ``kafka_eos.*`` metrics and reports the topic to OpenLineage.
    """

    template_fields: Sequence[str] = ("manifest_uri", "kafka_eos_conn_id", "submit_task_id")
    ui_color = "#b7e8c4"

    def __init__(
        self,
        *,
        manifest_uri: str | None = None,
        submit_task_id: str = "submit",
        kafka_eos_conn_id: str = "kafka_eos_default",
        max_workers: int = 16,
        **kwargs: Any,
    ) -> None:
        kwargs["outlets"] = with_committed_alias(kwargs.get("outlets"))
        super().__init__(**kwargs)
        self.manifest_uri = manifest_uri
        self.submit_task_id = submit_task_id
        self.kafka_eos_conn_id = kafka_eos_conn_id
        self.max_workers = max_workers

    @raises_fail_now
    def execute(self, context: Any) -> dict[str, Any]:
        uri = self._resolve_uri(context)
        manifest = read_manifest(uri)
        if manifest.status is ManifestStatus.COMMITTED:
            self.log.info("%s is already COMMITTED (an earlier try or restore committed it)", uri)
            return dict(manifest.commit_report or {}, manifest_uri=uri, already_committed=True)
        if manifest.status is ManifestStatus.ABORTED:
            first = manifest.committables[0].transactional_id if manifest.committables else None
            raise DataLossError(
                f"checkpoint {manifest.checkpoint_id} ({uri}) is ABORTED: its transactions were lost before "
                "they could be committed; rerun the checkpoint to produce it again",
                transactional_id=first,
                runbook="rerun-a-checkpoint",
            )
        from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook

        started = _now_ms()
        outcomes: list[Any] = []
        if manifest.committables:
            with KafkaEosHook(kafka_eos_conn_id=self.kafka_eos_conn_id).transaction_admin() as admin:
                # Verifies every committable (state, producer id/epoch, deadline) before committing any.
                outcomes = admin.commit(manifest.committables, max_workers=self.max_workers)
        finished = _now_ms()
        report = commit_report(manifest, outcomes, started_ms=started, finished_ms=finished)
        manifest.status = ManifestStatus.COMMITTED
        manifest.updated_at_ms = finished
        manifest.commit_report = report
        write_manifest(uri, manifest)
        self.log.info(
            "checkpoint %d of %s committed: %d transaction(s), %d record(s), outcomes %s, commit took %d ms "
            "(%d ms after prepare)", manifest.checkpoint_id, manifest.pipeline_id, report["transactions"],
            report["records"], report["outcomes"], report["commit_latency_ms"],
            report["prepare_to_commit_ms"],
        )
        announce_committed_checkpoint(self, context, dict(report, manifest_uri=uri))
        return dict(report, manifest_uri=uri)

    def _resolve_uri(self, context: Any) -> str:
        if self.manifest_uri:
            return str(self.manifest_uri)
        uri = context["ti"].xcom_pull(task_ids=self.submit_task_id)
        if not uri or not isinstance(uri, str):
            raise ManifestError(
                f"no manifest to commit: manifest_uri is not set and task {self.submit_task_id!r} pushed no "
                "manifest URI to XCom",
                runbook="commit-task-failed",
            )
        return uri


def _now_ms() -> int:
    return int(time.time() * 1000)
