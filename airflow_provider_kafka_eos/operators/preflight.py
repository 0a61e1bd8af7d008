"""KafkaEosPreflightOperator: the first task of an exactly-once pipeline DAG.

It proves, before a single record is written, that the cluster and the DAG's own settings
make exactly-once possible: transaction APIs present, ACLs granted, ``transaction.timeout.ms``
within the broker's limit, and the commit task's whole retry schedule shorter than the
transaction timeout (otherwise the broker may abort a prepared batch while Airflow is still
retrying its commit: data loss). The commit task's retries, retry_delay, backoff and
execution_timeout are read from the DAG itself (``commit_task_id``), so the check follows the
DAG when someone edits it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator

from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
from airflow_provider_kafka_eos.hooks.schema_registry import output_formats
from airflow_provider_kafka_eos.tasks.fail_now import raises_fail_now

XCOM_KEY = "preflight_report"


class KafkaEosPreflightOperator(BaseOperator):
    """Run the pipeline preflight; log the report, push it to XCom, fail on blockers.

    :param transactional_id_prefix: the pipeline's transactional-id prefix (templated).
    :param topics: output topics (templated).
    :param transaction_timeout_ms: the producers' ``transaction.timeout.ms``.
    :param job_duration_budget: the longest the Spark job may run (its own timeout), from the
        first record to the manifest: the first part of the prepare -> commit window.
    :param commit_task_id: the DAG's commit task; its retry settings bound the second part.
        Without it, ``commit_retries`` / ``commit_retry_delay`` / ``commit_retry_exponential_backoff``
        / ``commit_max_retry_delay`` / ``commit_execution_timeout`` are used.
    :param two_phase_commit: require KIP-939 2PC (advertised, enabled, ACL granted).
    :param fail_on_warning: treat warnings (unknowns) as failures.
    :param record_formats: the pipeline's record formats, as the submit operator takes them: each
        encoded output key/value is checked against the registry without registering anything.

    The report's JSON goes to XCom once per try: as the task's return value (``return_value``)
    when it passes, under ``preflight_report`` when it fails (a failed task returns nothing, yet its
    report must stay inspectable). Pushing it under both keys on success stored it twice.
    """

    template_fields: Sequence[str] = ("transactional_id_prefix", "topics", "kafka_eos_conn_id")
    ui_color = "#e8f4ea"

    def __init__(
        self,
        *,
        transactional_id_prefix: str,
        topics: Sequence[str] | str,
        transaction_timeout_ms: int,
        job_duration_budget: timedelta | float,
        commit_task_id: str | None = None,
        commit_retries: int = 0,
        commit_retry_delay: timedelta | float = timedelta(minutes=5),
        commit_retry_exponential_backoff: float | bool = 0.0,
        commit_max_retry_delay: timedelta | float | None = None,
        commit_execution_timeout: timedelta | float | None = None,
        two_phase_commit: bool = False,
        fail_on_warning: bool = False,
        kafka_eos_conn_id: str = KafkaEosHook.default_conn_name,
        record_formats: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.transactional_id_prefix = transactional_id_prefix
        self.topics = topics
        self.transaction_timeout_ms = transaction_timeout_ms
        self.job_duration_budget = job_duration_budget
        self.commit_task_id = commit_task_id
        self.commit_retries = commit_retries
        self.commit_retry_delay = commit_retry_delay
        self.commit_retry_exponential_backoff = commit_retry_exponential_backoff
        self.commit_max_retry_delay = commit_max_retry_delay
        self.commit_execution_timeout = commit_execution_timeout
        self.two_phase_commit = two_phase_commit
        self.fail_on_warning = fail_on_warning
        self.kafka_eos_conn_id = kafka_eos_conn_id
        self.record_formats = record_formats

    def commit_schedule(self) -> Any:
        """The commit task's worst-case schedule, from the DAG when ``commit_task_id`` is set."""
        from airflow_provider_kafka_eos.kafka.errors import PreflightError
        from airflow_provider_kafka_eos.kafka.operations.preflight import RetrySchedule

        if self.commit_task_id:
            dag = getattr(self, "dag", None)
            if dag is None or not dag.has_task(self.commit_task_id):
                raise PreflightError(
                    f"commit_task_id {self.commit_task_id!r} is not a task of this DAG",
                    runbook="transaction-timeout-risk",
                )
            return RetrySchedule.from_operator(dag.get_task(self.commit_task_id))
        return RetrySchedule.of(
            retries=self.commit_retries,
            retry_delay=self.commit_retry_delay,
            retry_exponential_backoff=self.commit_retry_exponential_backoff,
            max_retry_delay=self.commit_max_retry_delay,
            execution_timeout=self.commit_execution_timeout,
        )

    @raises_fail_now
    def execute(self, context: Any) -> dict[str, Any]:
        from airflow_provider_kafka_eos.kafka.errors import PreflightError

        topics = [self.topics] if isinstance(self.topics, str) else list(self.topics)
        hook = KafkaEosHook(self.kafka_eos_conn_id)
        report = hook.preflight(
            transactional_id_prefix=self.transactional_id_prefix,
            topics=topics,
            transaction_timeout_ms=self.transaction_timeout_ms,
            job_duration_budget=self.job_duration_budget,
            commit_schedule=self.commit_schedule(),
            two_phase_commit=self.two_phase_commit,
            raise_on_failure=False,
            record_formats=output_formats(self.record_formats),
        )
        self.log.info("%s", report.render())
        data = report.to_dict()
        warnings = [c for c in report.checks if c.status == "warn"]
        if not report.ok or (self.fail_on_warning and warnings):
            context["ti"].xcom_push(key=XCOM_KEY, value=data)
        report.raise_on_failure()
        if self.fail_on_warning and warnings:
            raise PreflightError(
                "preflight warnings treated as failures (fail_on_warning=True): "
                + "; ".join(f"{c.name}: {c.message}" for c in warnings),
                runbook=warnings[0].runbook,
            )
        return data
