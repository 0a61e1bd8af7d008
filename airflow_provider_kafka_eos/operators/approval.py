"""The manual resolution DAG's approval step: a person approves any action that may lose data.

An ``ApprovalOperator`` (Airflow's human-in-the-loop, standard provider, Airflow >= 3.1) in front of
the resolve task. It reads the same form the resolve task reads and asks the one rule
(``ResolutionRequest.data_loss_risk``): when the request cannot lose data (a dry run, a listing, a
commit, a protected abort) it skips itself and the resolve task runs at once; otherwise it waits for
"Approve" or "Reject" with the risk in its subject and body. "Reject", or no answer within
``response_timeout`` (then the default, "Reject"), skips the resolve task: nothing is sent to Kafka.

This module imports the standard provider's ``hitl`` module at import time: import it only where
``tasks/airflow_features.has("human_in_the_loop")`` (the example DAG does); without it the DAG keeps
the resolve task alone, as before.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator

from airflow_provider_kafka_eos.operators.resolve import form_field_names, request_from_form

__all__ = ["KafkaResolutionApprovalOperator"]


class KafkaResolutionApprovalOperator(ApprovalOperator):
    """Approve a data-losing resolution request before the resolve task carries it out.

    :param kafka_eos_conn_id: the connection whose manifest store setting the request uses (as the
        resolve task does).
    :param response_timeout: how long to wait for an answer; then "Reject" (default 12 hours).
    """

    def __init__(self, *, kafka_eos_conn_id: str = "kafka_eos_default",
                 response_timeout: timedelta = timedelta(hours=12), **kwargs: Any) -> None:
        kwargs.setdefault("subject", "Kafka EOS manual resolution: approve an action that may lose data")
        super().__init__(ignore_downstream_trigger_rules=True, defaults=self.REJECT,
                         response_timeout=response_timeout, **kwargs)
        self.kafka_eos_conn_id = kafka_eos_conn_id

    def execute(self, context: Any) -> Any:
        from airflow.sdk.exceptions import AirflowSkipException

        from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
        from airflow_provider_kafka_eos.kafka.errors import UsageError

        form = dict(context["params"])
        names = form_field_names(getattr(getattr(self, "dag", None), "params", None))
        hook = KafkaEosHook(kafka_eos_conn_id=self.kafka_eos_conn_id)
        # An invalid form is the resolve task's to report (in the form's words); nothing to approve here.
        # Any other failure (the connection, the store setting) fails this task, so resolve does not
        # run: a request whose risk could not be judged is never carried out unasked.
        try:
            request = request_from_form(form, store_setting=hook.manifest_store_setting, field_names=names)
            risk = request.validate(names).data_loss_risk()
        except UsageError:  # the resolve task fails on it, naming the field (once, in its log)
            raise AirflowSkipException(
                "no approval asked: the request is invalid; the resolve task says why") from None
        if risk is None:
            raise AirflowSkipException(f"no approval needed: {request.action} cannot lose data as asked"
                                       f"{' (dry run)' if request.dry_run else ''}")
        self.log.warning("approval needed before %s: %s", request.action, risk)
        # The risk's first clause ("gives up checkpoint s3://b/p/checkpoint-2.json"): cut at ": ",
        # never at a bare colon, which every store URI has.
        self.subject = f"Approve {request.action}? It {risk.split(': ')[0]}"[:250]
        self.body = (f"**{request.action}** {risk}.\n\nApprove to carry it out, Reject to send nothing to "
                     "Kafka. Runbook: `kafka-eos-txn runbook resolve-manually` and "
                     "`kafka-eos-txn runbook data-loss`.")
        return super().execute(context)
