"""Manual resolution of one Kafka transaction: the Airflow UI twin of ``kafka-eos-txn`` (copy as is).

Trigger it with the form ("Trigger DAG w/ config"): pick an action and fill in what it needs.

- ``list``: transactions, optionally under a prefix (comma-separate several).
- ``describe``: one transactional id.
- ``abort``: fence one transactional id (or every Ongoing one under a prefix older than the
  transaction timeout, or ``manifest_uri``'s whole checkpoint, which is then marked ABORTED). The
  manifest store (``manifest_base_uri``; blank: the connection's) is read first and every id a
  PREPARED manifest lists is refused: commit those instead. A store that cannot be read refuses
  the abort. ``unprotected`` is the only way around it (logged loudly; the batch is lost). With
  ``producer_id`` and ``epoch``, a single abort is compare-and-abort.
- ``commit``: finish a prepared transaction with its producer id *and* epoch (from the manifest
  or the failed commit task's log).
- ``commit-from-manifest``: commit everything a PREPARED manifest lists and mark it COMMITTED.

Where Airflow has human-in-the-loop (>= 3.1 with the standard provider's ``hitl``), an ``approve`` task
asks a person first whenever the request may lose data (an unprotected abort, giving up a checkpoint,
a forced partition abort; ``ResolutionRequest.data_loss_risk``): "Reject" or no answer in 12 hours
sends nothing to Kafka. Requests that cannot lose data skip it. Without human-in-the-loop the DAG is
the resolve task alone, as before.

``dry_run`` (on by default: untick it to act) checks and reports without changing
anything. Validation is the CLI's
(``kafka/operations/resolution_request.py``) in this form's words: e.g. ``commit`` without a
"Producer epoch" fails
before anything is sent, and the task log starts with the request as submitted. The rows are
logged as a table and pushed to XCom. Runbook: ``kafka-eos-txn runbook`` lists the pages (each
has the DAG way and the CLI way).
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_kafka_eos.operators.resolve import KafkaTransactionResolutionOperator
from airflow_provider_kafka_eos.tasks.airflow_features import has

KAFKA_EOS_CONN_ID = os.environ.get("KAFKA_EOS_RESOLUTION_CONN_ID", "kafka_eos_default")

ACTIONS = ["list", "describe", "abort", "commit", "commit-from-manifest"]

with DAG(
    dag_id="eos_manual_resolution",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["kafka-eos", "operations"],
    doc_md=__doc__,
    params={
        "action": Param(
            "list", enum=ACTIONS, title="Action", description="What to do (kafka-eos-txn <action>)."
        ),
        "transactional_id": Param(
            None,
            type=["null", "string"],
            title="Transactional id",
            description="describe / abort / commit: the transaction.",
        ),
        "producer_id": Param(
            None,
            type=["null", "integer"],
            minimum=0,
            title="Producer id",
            description="commit (or compare-and-abort): the producer id of the transaction.",
        ),
        "epoch": Param(
            None,
            type=["null", "integer"],
            minimum=0,
            maximum=32767,
            title="Producer epoch",
            description="commit (or compare-and-abort): the producer epoch of the transaction.",
        ),
        "prefix": Param(
            None,
            type=["null", "string"],
            title="Transactional-id prefix(es)",
            description="list / abort: only ids under these prefixes (comma-separated).",
        ),
        "manifest_uri": Param(
            None,
            type=["null", "string"],
            title="Manifest URI",
            description="commit-from-manifest / abort: the checkpoint manifest to commit or abort.",
        ),
        "manifest_base_uri": Param(
            None,
            type=["null", "string"],
            title="Manifest store",
            description="abort: the store whose PREPARED manifests are protected (blank: the connection's "
            "manifest_base_uri).",
        ),
        "unprotected": Param(
            False,
            type="boolean",
            title="Unprotected abort",
            description="abort: also abort ids of PREPARED manifests (their batches are lost); logged.",
        ),
        "dry_run": Param(True, type="boolean", title="Dry run",
                         description="Check and report only (the default: untick it to act)."),
    },
) as dag:
    resolve = KafkaTransactionResolutionOperator(
        task_id="resolve", kafka_eos_conn_id=KAFKA_EOS_CONN_ID, retries=0,
        trigger_rule="none_failed",  # after the approval, or when it skipped itself (nothing at risk)
    )
    if has("human_in_the_loop"):
        from airflow_provider_kafka_eos.operators.approval import KafkaResolutionApprovalOperator

        KafkaResolutionApprovalOperator(task_id="approve", kafka_eos_conn_id=KAFKA_EOS_CONN_ID) >> resolve
