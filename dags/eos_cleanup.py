"""Scheduled guard against lingering Kafka transactions (copy and adapt).

A lingering transaction blocks every read_committed consumer at the last stable offset until
the broker times it out, and then its data is lost. Every run of this DAG:

1. ``find_lingering``: the sensor lists transactions Ongoing longer than ``min_age_seconds``
   under ``prefixes`` and classifies each against the PREPARED manifests under
   ``manifest_base_uri`` (orphan / commit-pending / foreign). Nothing lingering: the sensor
   times out softly and the run is skipped, which is the healthy case.
2. ``route``: picks what to do per kind.
3. ``abort_orphans``: fences the orphans (re-checking manifests and epochs first).
4. ``commit_pending``: commits the commit-pending ones from their manifests, or, with
   ``commit_pending_action = "alert"``, ``alert_commit_pending`` fails loudly instead so a human
   decides (see docs/runbook/commit-pending-transaction.md).
5. ``summary``: what was found and what became of it (after the branches that ran; when the
   sensor, the abort or the commit failed, the run fails instead).

The sensor is deferrable: between polls the triggerer waits, no worker slot is held. Up to
two runs may be active, so a manual "Trigger DAG w/ config" run starts at once instead of
queueing behind a scheduled run whose sensor is still waiting (scheduled runs never overlap:
the sensor gives up after 10 minutes, the schedule is every 15).

Foreign transactions are only reported. Configure the defaults below (or the environment
variables they read) for your pipelines; every value can be overridden per run.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import Param, dag, task

from airflow_provider_kafka_eos.kafka.classify import FindingKind, Findings
from airflow_provider_kafka_eos.operators.abort import KafkaAbortTransactionsOperator
from airflow_provider_kafka_eos.sensors.lingering import KafkaLingeringTransactionSensor

KAFKA_EOS_CONN_ID = os.environ.get("KAFKA_EOS_CLEANUP_CONN_ID", "kafka_eos_default")
DEFAULT_PREFIXES = [
    p.strip() for p in os.environ.get("KAFKA_EOS_CLEANUP_PREFIXES", "eos-").split(",") if p.strip()
]
DEFAULT_MANIFEST_BASE_URI = os.environ.get(
    "KAFKA_EOS_MANIFEST_BASE_URI", "file:///var/lib/kafka-eos/manifests"
)
DEFAULT_MIN_AGE_SECONDS = int(os.environ.get("KAFKA_EOS_CLEANUP_MIN_AGE_SECONDS", "900"))
POLL_SECONDS = float(os.environ.get("KAFKA_EOS_CLEANUP_POLL_SECONDS", "60"))

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
            description="Transactional-id prefixes that belong to our pipelines.",
        ),
        "manifest_base_uri": Param(
            DEFAULT_MANIFEST_BASE_URI,
            type="string",
            minLength=1,
            description="Where the pipelines write checkpoint manifests.",
        ),
        "min_age_seconds": Param(
            DEFAULT_MIN_AGE_SECONDS,
            type="integer",
            minimum=0,
            description="Only transactions Ongoing at least this long are findings.",
        ),
        "commit_pending_action": Param(
            COMMIT,
            enum=[COMMIT, ALERT],
            description="Commit commit-pending transactions, or fail to alert a human.",
        ),
        "dry_run": Param(False, type="boolean", description="Decide and report; abort and commit nothing."),
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
        timeout=10 * 60,
        soft_fail=True,  # nothing lingering is the healthy case: skip the rest of the run
    )

    @task.branch
    def route(findings: dict[str, Any], params: dict[str, Any] | None = None) -> list[str]:
        """Which follow-up tasks this run needs; ``summary`` always runs."""
        found = Findings.from_dict(findings)
        chosen = ["summary"]
        if found.of_kind(FindingKind.ORPHAN) or any(s.kind is FindingKind.ORPHAN for s in found.lso_stalls):
            chosen.append("abort_orphans")
        if found.of_kind(FindingKind.COMMIT_PENDING):
            chosen.append(
                "commit_pending" if params["commit_pending_action"] == COMMIT else "alert_commit_pending"
            )
        return chosen

    abort = KafkaAbortTransactionsOperator(
        task_id="abort_orphans",
        kafka_eos_conn_id=KAFKA_EOS_CONN_ID,
        findings=find.output,
        owned_prefixes="{{ params.prefixes }}",
        manifest_base_uri="{{ params.manifest_base_uri }}",
        dry_run="{{ params.dry_run }}",
    )

    @task
    def commit_pending(
        findings: dict[str, Any], params: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Commit every manifest that holds a commit-pending transaction (idempotent per manifest)."""
        from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
        from airflow_provider_kafka_eos.kafka.resolution import ResolutionRequest, run_resolution

        uris = sorted(
            {
                f.manifest_uri
                for f in Findings.from_dict(findings).of_kind(FindingKind.COMMIT_PENDING)
                if f.manifest_uri
            }
        )
        reports = []
        with KafkaEosHook(kafka_eos_conn_id=KAFKA_EOS_CONN_ID).transaction_admin() as admin:
            for uri in uris:
                request = ResolutionRequest(
                    action="commit-from-manifest", manifest_uri=uri, dry_run=bool(params["dry_run"])
                )
                request.validate()
                result = run_resolution(admin, request)
                print(f"{uri}: {result.summary}")
                reports.append(
                    {
                        "manifest_uri": uri,
                        "summary": result.summary,
                        "ok": bool(result.ok),
                        "rows": [dict(r) for r in result.rows],
                    }
                )
                if not result.ok:
                    from airflow_provider_kafka_eos.kafka.errors import KafkaEosError

                    raise KafkaEosError(
                        f"commit from {uri} failed: {result.summary}", runbook="commit-pending-transaction"
                    )
        return reports

    @task(retries=0)
    def alert_commit_pending(findings: dict[str, Any]) -> None:
        """Fail loudly, naming each commit-pending transaction and its manifest, so a human decides."""
        from airflow_provider_kafka_eos.kafka.errors import KafkaEosError

        pending = Findings.from_dict(findings).of_kind(FindingKind.COMMIT_PENDING)
        names = "; ".join(
            f"{f.transactional_id} in {f.manifest_uri} (Ongoing {f.age_ms // 1000} s)" for f in pending
        )
        raise KafkaEosError(
            f"{len(pending)} prepared transaction(s) are waiting to be committed: {names}; commit them "
            "before their transaction timeout or their batch is lost",
            runbook="commit-pending-transaction",
        )

    # Runs after whichever branches ran; a failed sensor, abort or commit fails the run instead.
    @task(trigger_rule="none_failed_min_one_success")
    def summary(
        findings: dict[str, Any] | None,
        aborted: dict[str, Any] | None,
        committed: list[dict[str, Any]] | None,
    ) -> dict[str, Any]:
        """What this run found and what became of each finding (also the run's XCom)."""
        if not findings:
            print("no lingering transactions")
            return {"findings": {}, "aborted": [], "committed_manifests": []}
        found = Findings.from_dict(findings)
        print(f"found: {found.summary()}\n{found.table()}")
        result = {
            "findings": found.counts(),
            "aborted": (aborted or {}).get("aborted", []),
            "abort_skipped": (aborted or {}).get("skipped", []),
            "committed_manifests": [r["manifest_uri"] for r in committed or [] if r.get("ok")],
            "foreign": [f.transactional_id for f in found.of_kind(FindingKind.FOREIGN)],
        }
        print(result)
        return result

    routed = route(find.output)
    committed = commit_pending(find.output)
    alert = alert_commit_pending(find.output)
    routed >> [abort, committed, alert]
    summary(find.output, abort.output, committed) << [routed, abort, committed, alert]


eos_cleanup()
