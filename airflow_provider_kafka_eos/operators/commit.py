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

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_provider_kafka_eos.assets.events import (
    announce_committed_checkpoint,
    settle_declared_topic_assets,
    with_committed_alias,
)
from airflow_provider_kafka_eos.assets.lineage import KafkaLineageMixin
from airflow_provider_kafka_eos.kafka.errors import ManifestError, UsageError
from airflow_provider_kafka_eos.tasks.fail_now import raises_fail_now
from airflow_provider_kafka_eos.ui.links import CheckpointViewLink, remember_checkpoint

__all__ = ["KafkaCommitTransactionsOperator"]


class KafkaCommitTransactionsOperator(KafkaLineageMixin, BaseOperator):
    """Commit every transaction of one checkpoint manifest, then mark it COMMITTED.

    :param manifest_uri: the manifest to commit (templated). Default: the checkpoint that carries
        ``input_id`` when that is set, else the XCom return value of ``submit_task_id`` (what
        ``SparkEosSubmitOperator`` pushes).
    :param pipeline_id: with ``input_id`` (both templated): commit the checkpoint whose input claim
        names that input, found in the manifest store; what a job started by any other operator
        prepared with ``write_input_exactly_once`` (docs/user-guide/own-runner.md). No XCom needed.
    :param input_id: the input identity the job claimed (templated).
    :param manifest_base_uri: the store to look the input up in; default: the connection's
        ``manifest_base_uri``.
    :param submit_task_id: the task whose XCom names the manifest when ``manifest_uri`` is not set.
    :param kafka_eos_conn_id: the ``kafka_eos`` connection.
    :param max_workers: parallel EndTxn requests.
    :returns: (XCom) ``CommitReport.to_dict()`` (``kafka/checkpoints/lifecycle.py``): status, transactions,
        records, outcomes, latencies, ``already_committed``.

    A try that turns the manifest from PREPARED into COMMITTED emits one Asset event for
    ``kafka://host:port/topic`` (``assets/events.py``; with ``partition_key`` = the input identity on
    Airflow >= 3.2; a rerun of a COMMITTED manifest emits none unless Airflow has no event for the
    checkpoint yet: its committing try died before it succeeded), records the ``kafka_eos.*``
    metrics and reports the topic to OpenLineage. Declare the topic's Asset in ``outlets`` to list
    this task as its producer on the Asset page (and, on Airflow >= 3.2, to key its events): it still
    gets an event only for the checkpoint that made records visible in it.
    """

    template_fields: Sequence[str] = ("manifest_uri", "kafka_eos_conn_id", "submit_task_id", "pipeline_id",
                                      "input_id", "manifest_base_uri")
    operator_extra_links = (CheckpointViewLink(),)  # its checkpoint in the operators' view
    ui_color = "#b7e8c4"

    def __init__(
        self,
        *,
        manifest_uri: str | None = None,
        submit_task_id: str = "submit",
        kafka_eos_conn_id: str = "kafka_eos_default",
        max_workers: int = 16,
        pipeline_id: str | None = None,
        input_id: str | None = None,
        manifest_base_uri: str | None = None,
        **kwargs: Any,
    ) -> None:
        if (pipeline_id is None) != (input_id is None):
            raise UsageError("pipeline_id and input_id go together: the commit task finds the checkpoint "
                             "by both (or give manifest_uri, or neither for the submit task's XCom)")
        kwargs["outlets"] = with_committed_alias(kwargs.get("outlets"))
        super().__init__(**kwargs)
        self.manifest_uri = manifest_uri
        self.submit_task_id = submit_task_id
        self.kafka_eos_conn_id = kafka_eos_conn_id
        self.max_workers = max_workers
        self.pipeline_id = pipeline_id
        self.input_id = input_id
        self.manifest_base_uri = manifest_base_uri

    @raises_fail_now
    def execute(self, context: Any) -> dict[str, Any]:
        from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
        from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint
        from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, read_manifest

        hook = KafkaEosHook(kafka_eos_conn_id=self.kafka_eos_conn_id)
        uri = self._resolve_uri(context, hook)
        access = hook.store_access(uri)  # the store's credentials: the connection's, else the standard chain
        manifest = read_manifest(uri, access=access)
        remember_checkpoint(self, self.kafka_eos_conn_id, manifest.pipeline_id, manifest.checkpoint_id)
        was_prepared = manifest.status is ManifestStatus.PREPARED  # also the Asset event rule
        if not was_prepared:  # COMMITTED: reported again; ABORTED: DataLossError. Neither needs Kafka.
            report = commit_checkpoint(None, uri, committed_by=f"task {self.task_id}", access=access)
        else:
            with hook.transaction_admin() as admin:
                # Verifies every committable (state, producer id/epoch, deadline) before committing any.
                report = commit_checkpoint(
                    admin, uri, committed_by=f"task {self.task_id}", max_workers=self.max_workers,
                    access=access,
                )
        self.log.info(
            "%s: %d record(s), outcomes %s, commit took %d ms (%d ms after prepare)",
            report.summary(),
            report.records or 0,
            report.outcomes,
            report.commit_latency_ms,
            report.prepare_to_commit_ms,
        )
        if report.status in ("committed", "already_committed"):
            # PREPARED at the start: this try made it visible. COMMITTED: an earlier try (or a rerun's
            # first run) did; its event is emitted only if Airflow has none for it (assets/events.py).
            announce_committed_checkpoint(self, context, report.to_dict(), recovering=not was_prepared)
        else:  # nothing new became visible: no declared topic Asset may get an event from this try
            settle_declared_topic_assets(self, None)
        return report.to_dict()

    def _resolve_uri(self, context: Any, hook: Any) -> str:
        if self.manifest_uri:
            return str(self.manifest_uri)
        if self.input_id is not None:  # a job of any runner: the input's claim names the checkpoint
            from airflow_provider_kafka_eos.kafka.checkpoints.input_claims import claimed_manifest_uri
            from airflow_provider_kafka_eos.kafka.validation import validate_pipeline_id

            pipeline_id = validate_pipeline_id(str(self.pipeline_id), field="pipeline_id")
            store = hook.manifest_store(self.manifest_base_uri)
            uri = claimed_manifest_uri(store, pipeline_id, str(self.input_id))
            self.log.info("pipeline %s, input %r: checkpoint manifest %s", pipeline_id, self.input_id, uri)
            return uri
        uri = context["ti"].xcom_pull(task_ids=self.submit_task_id)
        if not uri or not isinstance(uri, str):
            raise ManifestError(
                f"no manifest to commit: manifest_uri is not set and task {self.submit_task_id!r} pushed no "
                "manifest URI to XCom",
                runbook="commit-task-failed",
            )
        return uri
