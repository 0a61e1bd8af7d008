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
import uuid
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
# spark-submit's launch settings: a Connect server has its own. Given to this operator they could only
# be dropped, so they are refused by name (set them on the server, or use SparkEosSubmitOperator).
SUBMIT_ONLY_ARGUMENTS = (
    "conf", "files", "py_files", "archives", "driver_class_path", "jars", "java_class", "packages",
    "exclude_packages", "repositories", "total_executor_cores", "executor_cores", "executor_memory",
    "driver_memory", "keytab", "principal", "proxy_user", "num_executors", "env_vars", "spark_binary",
    "properties_file", "yarn_queue", "deploy_mode", "use_krb5ccache", "python_executable", "executor_python",
)


class _ConnectLaunch(submit.SparkSubmitOperator):  # type: ignore[name-defined,misc]
    """The launch step of the submit operator, on Spark Connect (see the module's docstring)."""

    _session: Any = None
    _tag: str | None = None
    reuse_session: bool = True

    def execute(self, context: Any) -> Any:
        args = eos_job.build_arg_parser().parse_args(self.application_args)
        session = self._open_session()
        self._session, self._tag = session, f"kafka-eos-{uuid.uuid4().hex}"
        try:
            session.addTag(self._tag)  # on_kill interrupts this try's operations, no other run's
            uri = eos_job.run(args, spark=session, environ={handoff.CONFIG_FILE_ENV: str(self._config_file)})
        except (UsageError, ConfigError) as exc:
            raise fail_now_exception()(str(exc)) from exc  # the job's exit 2: no retry helps
        finally:
            self._session = None
            session.release_session_on_close = not self.reuse_session  # a shared session stays
            with contextlib.suppress(Exception):
                session.stop()
        self.log.info("%s", handoff.result_line(uri))
        return uri

    def _open_session(self) -> Any:
        """A client of the server's shared session for this connection and this provider's runtime
        (``reuse_session``), else of a session of its own.

        Why shared: a new server session starts its own Python workers and loads the runtime zip
        into them on its first task, ~7.5 s here, while a session that ran the write before answers
        in 0.3-0.6 s. Keyed by the runtime zip's content hash: a session's artifacts are fixed, so
        another provider version gets a session of its own instead of two runtimes on one path.
        A shared session the server has closed (idle timeout) is not reusable: this try then runs
        on a new session and says so.
        """
        from pyspark.sql import SparkSession

        from airflow_provider_kafka_eos.spark import shipping

        url = _connect_url(self.spark_conn_id)
        if not self.reuse_session:
            return SparkSession.builder.remote(url).create()
        key = f"{self.spark_conn_id}:{shipping.runtime_zip().name}"
        session_id = uuid.uuid5(uuid.NAMESPACE_URL, key)
        shared = SparkSession.builder.remote(f"{url};session_id={session_id}").create()
        try:
            shared.version  # noqa: B018 (the first request: a closed session id is refused here)
            return shared
        except Exception as exc:
            if "SESSION_CLOSED" not in str(exc) and "INVALID_HANDLE" not in str(exc):
                raise
            self.log.warning("the shared Spark Connect session for %s was closed by the server (%s); "
                             "this try runs on a new session", self.spark_conn_id, type(exc).__name__)
            shared.release_session_on_close = False
            shared.stop()
            return SparkSession.builder.remote(url).create()


class SparkEosConnectOperator(SparkEosSubmitOperator, _ConnectLaunch):
    """Prepare one checkpoint of a pipeline on a Spark Connect server (``SparkEosSubmitOperator``'s
    arguments; ``conn_id`` is a ``spark_connect`` connection, default ``spark_connect_default``).

    The application's callable is imported in the task's process and builds the DataFrame there;
    functions it runs on the executors (UDFs) must be importable on the server or shipped with the
    DataFrame's session (docs/user-guide/spark-connect.md). spark-submit's own arguments (``conf``,
    ``py_files``, ``executor_python``, ``driver_memory``...: :data:`SUBMIT_ONLY_ARGUMENTS`) are
    refused by name: the server has its own.

    ``reuse_session`` (default True): every run of this connection joins one server session (its
    Python workers and the provider's runtime stay warm: ``_ConnectLaunch._open_session``); False:
    a session per try, released after it (each try pays the session's cold start).
    """

    ui_color = "#d5e8e0"

    def __init__(self, *, conn_id: str = DEFAULT_CONNECT_CONN_ID, reuse_session: bool = True,
                 **kwargs: Any) -> None:
        given = sorted(name for name in SUBMIT_ONLY_ARGUMENTS
                       if kwargs.get(name) not in (None, "", {}, [], ()))
        if given:
            raise UsageError(
                f"SparkEosConnectOperator {kwargs.get('task_id', '')!r}: {', '.join(given)} are spark-submit "
                "settings; a Spark Connect server has its own and would ignore them. Set them on the server "
                "(its spark-submit or spark-defaults), or use SparkEosSubmitOperator")
        super().__init__(conn_id=conn_id, **kwargs)
        self.reuse_session = reuse_session

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
                    session.interruptTag(self._tag)
        finally:
            self._remove_config_file()


def _connect_url(conn_id: str) -> str:
    """The ``sc://`` URL of the Spark provider's ``spark_connect`` connection (token and user id in
    its parameters: the URL is never logged)."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    return SparkConnectHook(conn_id=conn_id).get_connection_url()


