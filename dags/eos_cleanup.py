"""Scheduled guard against lingering Kafka transactions (copy and adapt).

A lingering transaction blocks every read_committed consumer at the last stable offset until
the broker times it out, and then its data is lost. Every run of this DAG, in sequence:

1. ``find_lingering``: the sensor lists transactions Ongoing longer than ``min_age_seconds``
   under ``prefixes`` and classifies each against the PREPARED manifests of the manifest store
   (orphan / commit-pending / foreign). Nothing lingering: the sensor times out softly and the
   run is skipped, which is the healthy case.
2. ``commit_pending``: commits every checkpoint that holds a commit-pending transaction (first,
   so a prepared batch is committed before anything is aborted) and gives each checkpoint it made
   visible its Asset event, as the pipeline's commit task would have; with
   ``commit_pending_action = "alert"`` it commits nothing and ``summary`` fails loudly so a human
   decides (see docs/runbook/commit-pending-transaction.md).
3. ``abort_orphans``: re-reads the manifest store and fences the orphans (never an id a PREPARED
   manifest lists, unless the ``protect`` Param is switched off; logged loudly).
4. ``summary``: what was found and what became of it ("would ..." in a dry run).

The sensor is deferrable: between polls the triggerer waits, no worker slot is held. Up to
two runs may be active, so a manual "Trigger DAG w/ config" run starts at once instead of
queueing behind a scheduled run whose sensor is still waiting (scheduled runs never overlap:
the sensor gives up after 10 minutes, the schedule is every 15).

The manifest store is the ``kafka_eos`` connection's ``manifest_base_uri`` (the same store the
pipelines write to); a run can override it. A store that is not configured or cannot be read
fails the run with nothing aborted. Foreign transactions are only reported.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import Param, dag, task

from airflow_provider_kafka_eos.kafka.operations.classify import FindingKind
from airflow_provider_kafka_eos.kafka.operations.scan import Findings
from airflow_provider_kafka_eos.operators.abort import KafkaAbortTransactionsOperator
from airflow_provider_kafka_eos.sensors.lingering import KafkaLingeringTransactionSensor

KAFKA_EOS_CONN_ID = os.environ.get("KAFKA_EOS_CLEANUP_CONN_ID", "kafka_eos_default")
# The example pipeline's id (same variable and default as dags/eos_pipeline.py): its transactional
# ids are <pipeline id>-<partition>-<checkpoint>, so out of the box this DAG watches that pipeline.
PIPELINE_ID = os.environ.get("KAFKA_EOS_PIPELINE_ID", "user_activity")
DEFAULT_PREFIXES = [
    p.strip()
    for p in os.environ.get("KAFKA_EOS_CLEANUP_PREFIXES", f"{PIPELINE_ID}-").split(",")
    if p.strip()
]
DEFAULT_MIN_AGE_SECONDS = int(os.environ.get("KAFKA_EOS_CLEANUP_MIN_AGE_SECONDS", "900"))
POLL_SECONDS = float(os.environ.get("KAFKA_EOS_CLEANUP_POLL_SECONDS", "60"))
# How long one run's sensor looks before it gives up softly (nothing lingering: the run is skipped).
SENSOR_TIMEOUT_SECONDS = float(os.environ.get("KAFKA_EOS_CLEANUP_SENSOR_TIMEOUT_SECONDS", str(10 * 60)))

COMMIT = "commit"
ALERT = "alert"


@dag(
    dag_id="eos_cleanup",
    schedule=timedelta(minutes=15),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=2,  # a manual run starts while a scheduled one is still waiting (see above)
    render_template_as_native_obj=True,  # "{{ params.prefixes }}" renders as a list, not its repr
    tags=["kafka-eos", "cleanup"],
    doc_md=__doc__,
    params={
        "prefixes": Param(
            DEFAULT_PREFIXES,
            type="array",
            items={"type": "string"},
            minItems=1,
            title="Transactional-id prefixes",
            description="One per line: the prefixes our pipelines' transactional ids start with "
            "(<pipeline id>- for each pipeline; the example pipeline's is user_activity-). Ongoing "
            "transactions under them that no PREPARED manifest lists are orphans and are aborted.",
        ),
        "manifest_base_uri": Param(
            None,
            type=["null", "string"],
            title="Manifest store",
            description="The store whose PREPARED manifests protect transactions (blank: the kafka_eos "
            "connection's Manifest store URI, where the pipelines write).",
        ),
        "min_age_seconds": Param(
            DEFAULT_MIN_AGE_SECONDS,
            type="integer",
            minimum=0,
            title="Minimum age (seconds)",
            description="Only transactions Ongoing at least this long are findings (a running pipeline's "
            "transactions are younger).",
        ),
        "commit_pending_action": Param(
            COMMIT,
            enum=[COMMIT, ALERT],
            values_display={COMMIT: "commit them", ALERT: "alert: fail the run, commit nothing"},
            title="Commit-pending transactions",
            description="What to do with transactions a PREPARED manifest lists: commit them, or fail "
            "the run so a human decides.",
        ),
        "protect": Param(
            True,
            type="boolean",
            title="Protect prepared transactions",
            description="Never abort an id a PREPARED manifest lists. Off: those batches are lost (logged).",
        ),
        "dry_run": Param(
            False,
            type="boolean",
            title="Dry run",
            description="Find, classify and report what would be aborted or committed; change nothing.",
        ),
    },
)
def eos_cleanup() -> None:
    find = KafkaLingeringTransactionSensor(
        task_id="find_lingering",
        kafka_eos_conn_id=KAFKA_EOS_CONN_ID,
        prefixes="{{ params.prefixes }}",
        manifest_base_uri="{{ params.manifest_base_uri }}",
        min_age="{{ params.min_age_seconds }}",
        deferrable=True,  # the triggerer polls between checks; no worker slot is held while waiting
        poke_interval=POLL_SECONDS,
        timeout=SENSOR_TIMEOUT_SECONDS,
        soft_fail=True,  # nothing lingering is the healthy case: skip the rest of the run
    )

    @task
    def commit_pending(
        findings: dict[str, Any], params: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Commit every checkpoint holding a commit-pending transaction (idempotent per manifest)."""
        from airflow.sdk import get_current_context

        from airflow_provider_kafka_eos.assets.events import announce_settled_checkpoints
        from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
        from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import commit_checkpoint

        hook = KafkaEosHook(kafka_eos_conn_id=KAFKA_EOS_CONN_ID)
        found = Findings.from_dict(findings, access=hook.store_access(findings.get("findings_uri")))
        pending = found.of_kind(FindingKind.COMMIT_PENDING)
        uris = sorted({f.manifest_uri for f in pending if f.manifest_uri})
        if not uris or params["commit_pending_action"] != COMMIT:
            return []
        reports: list[dict[str, Any]] = []
        with hook.transaction_admin() as admin:
            for uri in uris:
                # The store's credentials from the connection (else the standard chain), per manifest.
                report = commit_checkpoint(
                    admin, uri, committed_by="eos_cleanup", dry_run=bool(params["dry_run"]),
                    access=hook.store_access(uri),
                )
                print(report.summary())
                reports.append(report.to_dict())
        # What this try made visible gets its Asset event here, as the pipeline's commit task would
        # have given it (a re-trigger that came before this commit found nothing to announce).
        announced = announce_settled_checkpoints(
            get_current_context(), bootstrap_servers=hook.client_config().bootstrap_servers, reports=reports
        )
        if announced:
            print(f"Asset events for {', '.join(announced)}")
        return reports

    abort = KafkaAbortTransactionsOperator(
        task_id="abort_orphans",
        kafka_eos_conn_id=KAFKA_EOS_CONN_ID,
        findings=find.output,
        owned_prefixes="{{ params.prefixes }}",
        manifest_base_uri="{{ params.manifest_base_uri }}",
        protect="{{ params.protect }}",
        dry_run="{{ params.dry_run }}",
    )

    @task(trigger_rule="none_failed_min_one_success")
    def summary(
        findings: dict[str, Any] | None,
        committed: list[dict[str, Any]] | None,
        aborted: dict[str, Any] | None,
        params: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """What this run found and what became of each finding (also the run's XCom)."""
        if not findings:
            print("no lingering transactions")
            return {"findings": {}, "aborted": [], "committed_manifests": [], "committed_inputs": []}
        from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook

        access = KafkaEosHook(kafka_eos_conn_id=KAFKA_EOS_CONN_ID).store_access(findings.get("findings_uri"))
        found = Findings.from_dict(findings, access=access)
        dry = bool(params["dry_run"])
        print(f"found: {found.summary()}\n{found.table()}")
        result = {
            "dry_run": dry,
            "findings": found.counts(),
            "aborted": (aborted or {}).get("aborted", []),
            "abort_skipped": (aborted or {}).get("skipped", []),
            "committed_manifests": [r["manifest_uri"] for r in committed or []],
            # the batches those checkpoints carry (None: a checkpoint without an input identity)
            "committed_inputs": [r.get("input_id") for r in committed or []],
            "foreign": [f.transactional_id for f in found.of_kind(FindingKind.FOREIGN)],
        }
        verb_abort, verb_commit = ("would abort", "would commit") if dry else ("aborted", "committed")
        print(
            f"{'dry run: ' if dry else ''}{verb_abort} {len(result['aborted'])} transaction(s); "
            f"{verb_commit} {len(result['committed_manifests'])} checkpoint(s)"
            f"{_inputs_text(result['committed_inputs'])}; "
            f"{len(result['abort_skipped'])} left alone"
        )
        print(result)
        _alert_if_pending(found, params)
        return result

    committed = commit_pending(find.output)
    find >> committed >> abort
    summary(find.output, committed, abort.output)


def _inputs_text(inputs: list[str | None]) -> str:
    """`` (inputs: B1, B2)``: the batches a person recognises, beside the checkpoint count."""
    named = [i if i is not None else "unknown" for i in inputs]
    return f" (inputs: {', '.join(named)})" if named else ""


def _alert_if_pending(found: Findings, params: dict[str, Any] | None) -> None:
    """``commit_pending_action = "alert"``: fail loudly, naming each prepared transaction and its manifest."""
    pending = found.of_kind(FindingKind.COMMIT_PENDING)
    if not pending or (params or {}).get("commit_pending_action") != ALERT:
        return
    from airflow_provider_kafka_eos.kafka.errors import KafkaEosError

    names = "; ".join(
        f"{f.transactional_id} in {f.manifest_uri} (Ongoing {f.age_ms // 1000} s)" for f in pending
    )
    raise KafkaEosError(
        f"{len(pending)} prepared transaction(s) are waiting to be committed: {names}; commit them "
        "before their transaction timeout or their batch is lost",
        runbook="commit-pending-transaction",
    )


eos_cleanup()
