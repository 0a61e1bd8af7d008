"""``SparkEosConnectOperator``: the exactly-once write job on a long-lived Spark Connect server.

``SparkEosSubmitOperator`` starts a JVM and a SparkSession for every run (spark-submit): 12-50 s of
fixed cost on a small machine. Here the job's body (``spark/job.py``'s ``run``: restore, the input's
range, the user's DataFrame, ``write_exactly_once``) runs in the task's own process against a Spark
Connect client session of the Spark provider's ``spark_connect`` connection (``SparkConnectHook``):
the driver side of the write (restore, the vote, the manifest) runs here, the per-partition producers
on the server's executors, which get the provider's code with ``addArtifacts``.

Everything else is ``SparkEosSubmitOperator``'s, inherited, not copied: validation, the input's claim,
the checkpoint id, the private file the job reads its Kafka config and store credentials from (never
argv, never the server), reading and judging the manifest, the XCom result. Retries and restore are
the same because the job body is the same: a retried try restores the pipeline first and returns a
checkpoint's existing manifest instead of producing it again.

How the launch is swapped: ``SparkEosSubmitOperator.execute`` hands the launch to the next class in
its MRO (the provider's ``SparkSubmitOperator``). This class puts ``_ConnectLaunch`` there, whose
``execute`` runs the job on the Connect session instead of calling spark-submit.
"""

from __future__ import annotations

import contextlib
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.identity import RunIdentity
from airflow_provider_kafka_eos.kafka.errors import ConfigError, UsageError
from airflow_provider_kafka_eos.operators import submit
from airflow_provider_kafka_eos.operators.submit import SparkEosSubmitOperator
from airflow_provider_kafka_eos.spark import handoff
from airflow_provider_kafka_eos.spark import job as eos_job
from airflow_provider_kafka_eos.tasks.fail_now import fail_now_exception

__all__ = ["SparkEosConnectOperator"]

DEFAULT_CONNECT_CONN_ID = "spark_connect_default"


class _ConnectLaunch(submit.SparkSubmitOperator):  # type: ignore[name-defined,misc]
    """The launch step of the submit operator, on Spark Connect (see the module's docstring)."""

    _session: Any = None

    def execute(self, context: Any) -> Any:
        from pyspark.sql import SparkSession

        args = eos_job.build_arg_parser().parse_args(self.application_args)
        url = _connect_url(self.spark_conn_id)
        session = SparkSession.builder.remote(url).create()  # one client session per try: fresh artifacts
        self._session = session
        try:
            session.addTag(f"kafka-eos-{args.pipeline_id}-{args.checkpoint_id}")
            uri = eos_job.run(args, spark=session, environ={handoff.CONFIG_FILE_ENV: str(self._config_file)})
        except (UsageError, ConfigError) as exc:
            raise fail_now_exception()(str(exc)) from exc  # the job's exit 2: no retry helps
        finally:
            self._session = None
            with contextlib.suppress(Exception):
                session.stop()
        self.log.info("%s", handoff.result_line(uri))
        return uri


class SparkEosConnectOperator(SparkEosSubmitOperator, _ConnectLaunch):
    """Prepare one checkpoint of a pipeline on a Spark Connect server (``SparkEosSubmitOperator``'s
    arguments; ``conn_id`` is a ``spark_connect`` connection, default ``spark_connect_default``).

    The application's callable is imported in the task's process and builds the DataFrame there;
    functions it runs on the executors (UDFs) must be importable on the server or shipped with the
    DataFrame's session (docs/user-guide/spark-connect.md). spark-submit's own arguments (``conf``,
    ``py_files``, ``executor_python``, ``driver_memory``...) do not apply: the server has its own.
    """

    ui_color = "#d5e8e0"

    def __init__(self, *, conn_id: str = DEFAULT_CONNECT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(conn_id=conn_id, **kwargs)

    def _prepare_launch(self, checkpoint: int, run: RunIdentity | None) -> None:
        """The job's arguments and its private file; no spark-submit settings (the server has its own)."""
        self.application_args = self._job_args(checkpoint, run)
        self._config_file = self._write_client_config()

    def on_kill(self) -> None:
        """Cancel this try's operations on the server (the server itself keeps running)."""
        session = self._session
        try:
            if session is not None:
                with contextlib.suppress(Exception):
                    session.interruptAll()
        finally:
            self._remove_config_file()


def _connect_url(conn_id: str) -> str:
    """The ``sc://`` URL of the Spark provider's ``spark_connect`` connection (token and user id in
    its parameters: the URL is never logged)."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    return SparkConnectHook(conn_id=conn_id).get_connection_url()


