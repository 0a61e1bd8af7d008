"""spark-submit for the exactly-once job: the command's environment, the private file, the process.

Airflow's Spark provider keeps its submit logic in ``SparkSubmitHook`` and its operator only
hands arguments over; this module is that layer for ``SparkEosSubmitOperator``, which stays about
the pipeline (checkpoint ids, the input's claim, whose manifest the job found). Here:

* :class:`EosSparkSubmitHook`: the provider's hook, plus the job's result line (the manifest URI
  or its one-line error) read from spark-submit's output, the job in a process group of its own
  and killed as a group, its exit code;
* :func:`job_arguments`: the job's command line (ids and names only, never a secret);
  :func:`check_kafka_input` / :func:`kafka_input_flags`: the Kafka-input arguments (``input_topics``,
  a list or comma-separated, ``input_group``, ``input_start``, ``skip_lost_input_ranges``) refused
  by name as rendered, then the job's flags for them;
* :func:`launch_settings`: the environment variables, Spark conf and ``--py-files`` the job
  needs (interpreters, the private file's path, the runtime zip, the quiet driver log);
* :func:`write_private_config`: the Kafka client config, the store's credentials, the application
  params and the schema registry's settings in a 0600 file only the job reads (never the command
  line); :func:`record_format_argument` / :func:`registry_settings`: the record formats split
  between the two (formats and schemas on the command line, the registry connection in the file);
* :func:`require_spark_connection`: a missing Spark connection is an error, not the provider's
  silent fallback to YARN;
* the provider's absence (the ``[spark]`` extra not installed): :data:`SPARK_PROVIDER_INSTALLED`,
  :func:`missing_spark_provider_error`.

What of the provider's internals it touches, and why (it has no public API for these): the hook's
``_process_spark_submit_log`` (the one place the output lines pass), its ``_submit_sp`` (the
process, for its pid and exit code) and ``_connection`` (the master and deploy mode it resolved),
all read inside the subclass only; and :func:`EosSparkSubmitHook.adopt`, since the provider's
operator builds its hook itself with no way to name another class.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.kafka_input import StartChoice
from airflow_provider_kafka_eos.kafka.errors import ConfigError, MissingExtraError, UsageError
from airflow_provider_kafka_eos.kafka.validation import validate_flag, validate_topic
from airflow_provider_kafka_eos.spark import handoff, shipping
from airflow_provider_kafka_eos.spark.log_config import quiet_driver_conf

# The Spark provider (and the pyspark-client, pyarrow, pandas and numpy it requires) is in the
# [spark] extra, not the base install (docs/install.md). Without it this module still imports, so
# that the submit operator is still defined on workers that run only a DAG's other tasks.
SPARK_PROVIDER = "apache-airflow-providers-apache-spark"
try:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
except ModuleNotFoundError as _missing:
    if not (_missing.name or "").startswith("airflow.providers"):
        raise  # something else is broken: its own error says what
    SPARK_PROVIDER_INSTALLED = False

    class SparkSubmitHook:  # type: ignore[no-redef]
        """Stands in for the Spark provider's hook (never built: the operator refuses first)."""

else:
    SPARK_PROVIDER_INSTALLED = True

__all__ = [
    "SPARK_PROVIDER",
    "SPARK_PROVIDER_INSTALLED",
    "EosSparkSubmitHook",
    "LaunchSettings",
    "check_deploy_target",
    "check_kafka_input",
    "input_topic_list",
    "job_arguments",
    "kafka_input_flags",
    "launch_settings",
    "missing_spark_provider_error",
    "record_format_argument",
    "registry_settings",
    "require_job_file",
    "require_spark_connection",
    "spark_provider_missing",
    "write_private_config",
]

_MISSING_CONNECTION_ERRORS = ("AirflowNotFoundException", "AirflowException", "ConnectionNotFound")


def spark_provider_missing() -> str:
    """Why the submit task cannot run on this worker (the start of every message that says so)."""
    return (
        f"SparkEosSubmitOperator needs the Apache Spark provider ({SPARK_PROVIDER}), which this Python "
        f"({sys.executable}) lacks: it is part of this provider's [spark] extra"
    )


def missing_spark_provider_error() -> MissingExtraError:
    """What running the submit task says on a worker without the [spark] extra."""
    return MissingExtraError(
        f"{spark_provider_missing()}. On the workers that run the submit task, install "
        "airflow-provider-kafka-eos[spark] (pip install 'airflow-provider-kafka-eos[spark]'); nothing was "
        "read or written. The DAG's other tasks (commit, abort, sensor) run without it"
    )


class EosSparkSubmitHook(SparkSubmitHook):
    """``SparkSubmitHook`` that remembers the job's ``KAFKA_EOS_MANIFEST_URI=`` line (or its error
    line) and kills the whole job on ``on_kill``.

    In client mode spark-submit's JVM starts the Python driver as a child; killing only the
    spark-submit process (what the parent does) leaves that driver running and writing. So the
    job gets its own process group, and ``on_kill`` signals the group first.
    """

    reported_manifest_uri: str | None = None
    reported_error: str | None = None
    # Called with spark-submit's pid once it runs, before its output is read (``tasks/reattach.py``).
    on_started: Callable[[int], None] | None = None

    @classmethod
    def adopt(cls, hook: SparkSubmitHook) -> EosSparkSubmitHook:
        """The provider operator's hook, built its way from the operator's arguments, as this class.

        The operator constructs ``SparkSubmitHook`` itself and takes no hook class; this is the one
        place its hook becomes ours (same state, our methods), instead of copying its ~30 arguments.
        """
        hook.__class__ = cls
        return hook  # type: ignore[return-value]

    @property
    def deploy_target(self) -> tuple[str, bool]:
        """(master, cluster deploy mode) as the provider resolved them from the Spark connection."""
        connection = self._connection
        return str(connection.get("master", "")), connection.get("deploy_mode") == "cluster"

    @property
    def exit_code(self) -> int | None:
        """spark-submit's exit code (None: not started, or still running)."""
        return getattr(getattr(self, "_submit_sp", None), "returncode", None)

    def submit(self, application: str = "", **kwargs: Any) -> Any:
        kwargs.setdefault("start_new_session", True)
        return super().submit(application, **kwargs)

    def on_kill(self) -> None:
        process = getattr(self, "_submit_sp", None)
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
        super().on_kill()

    def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
        process = getattr(self, "_submit_sp", None)
        if self.on_started is not None and process is not None:
            self.on_started(process.pid)

        def tee() -> Iterator[Any]:
            for raw in itr:
                line = str(raw).strip()
                uri = handoff.manifest_uri_of(line)
                if uri is not None:
                    self.reported_manifest_uri = uri
                elif line.startswith(handoff.ERROR_PREFIX):
                    self.reported_error = line[len(handoff.ERROR_PREFIX):]
                yield raw

        super()._process_spark_submit_log(tee())


def job_arguments(options: Mapping[str, Any]) -> list[str]:
    """The job's command line from option name -> value, in order: ``--name value`` for each value
    that is set (None and "" mean "the job's default": left out), ``--name`` alone for ``True``."""
    args: list[str] = []
    for name, value in options.items():
        if value is None or value == "" or value is False:
            continue
        args += [f"--{name}"] if value is True else [f"--{name}", str(value)]
    return args


def require_job_file(application: str, job_file: str) -> None:
    """ConfigError, before anything is claimed or started, when the provider's own job (``job_file``,
    the default ``application``) is not a file spark-submit can run: the provider was imported from
    an archive (a zip on ``sys.path``), where ``spark/job.py`` has no path of its own."""
    if application != job_file or os.path.isfile(job_file):
        return
    raise ConfigError(
        f"the exactly-once job {job_file} is not a file: this process imported airflow_provider_kafka_eos "
        "from an archive, which spark-submit cannot run a file from. Install the provider on the worker "
        "(pip install 'airflow-provider-kafka-eos[spark]') and keep archives of it off the worker's "
        "sys.path, or pass application= a job file. Nothing was claimed or submitted",
        runbook="configuration",
    )


def require_spark_connection(conn_id: str) -> None:
    """ConfigError unless the Spark connection exists (the provider would fall back to YARN)."""
    from airflow.sdk import BaseHook

    try:
        BaseHook.get_connection(conn_id)
    except Exception as exc:
        if type(exc).__name__ not in _MISSING_CONNECTION_ERRORS:
            raise
        raise ConfigError(
            f"Spark connection {conn_id!r} does not exist; refusing to fall back to master 'yarn'. "
            "Create it (e.g. AIRFLOW_CONN_SPARK_LOCAL="
            "'{\"conn_type\": \"spark\", \"host\": \"local[2]\"}') or pass conn_id",
            runbook="configuration",
        ) from None


def write_private_config(
    config: Any, store_options: Mapping[str, Any], application_params: Any, warn: Callable[[str], None],
    registry: Mapping[str, Any] | None = None,
) -> str:
    """The Kafka config (secrets included), the manifest store's credentials (if any), the
    application params and the schema registry's settings (if any) in a 0600 file only this task's
    job reads; stale files of killed tasks are removed first (``warn`` names each)."""
    try:
        params = json.loads(json.dumps(application_params or {}, sort_keys=True, default=str))
    except (TypeError, ValueError) as exc:
        raise UsageError(f"application_params must be JSON-serialisable ({exc})") from None
    if not isinstance(params, dict):
        raise UsageError(f"application_params must be a dict, got {type(params).__name__}")
    directory = handoff.private_dir()
    for stale in handoff.sweep_private_files(directory):
        warn(f"removed {stale}, left behind by a task that died (its process is gone)")
    return handoff.write_private_file(
        directory,
        {handoff.PRIVATE_FILE_CONFIG_KEY: config.confluent(), handoff.PRIVATE_FILE_PARAMS_KEY: params,
         **({handoff.PRIVATE_FILE_STORE_KEY: dict(store_options)} if store_options else {}),
         **({handoff.PRIVATE_FILE_REGISTRY_KEY: dict(registry)} if registry else {})},
    )


# What Spark's own spark-submit says (measured on PySpark 4.2) when asked for a Python driver in a
# standalone cluster's cluster deploy mode; the operator says it first, with the next step.
STANDALONE_PYTHON_CLUSTER_REFUSAL = (
    "Cluster deploy mode is currently not supported for python applications on standalone clusters")


def check_deploy_target(
    *, master: str, cluster_mode: bool, store_uri: str, mounted_config: str | None,
    durable_yarn_untracked: bool = False,
) -> None:
    """Refuse, before an input is claimed or a job submitted, a cluster-mode launch that cannot work.

    In cluster deploy mode the driver runs on a cluster machine. It writes the checkpoint's
    manifest, which the commit task (on an Airflow worker) reads: a store on this worker's disk
    (``file://`` or a path) would be written on the cluster machine and never seen, so it is
    refused by name, with the next step (a shared store: ``s3://``, ``gs://``, ``abfs://``,
    ``hdfs://``). A standalone master (``spark://``) runs no Python driver in cluster mode (Spark
    refuses it); and the driver cannot read this worker's private file, so the Kafka config (and
    the store's credentials, under ``store_options``) must be a file the platform mounts on the
    driver, named in ``env_vars`` (never argv). ``durable_yarn_untracked``: on YARN the Spark
    provider's ``durable`` re-attach (Airflow >= 3.3, on by default) needs ``yarn_track_via_rm_api``
    and raises otherwise, inside its ``execute``, after the claim: said here first.
    """
    from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import is_local_uri

    if not cluster_mode:
        return
    if is_local_uri(store_uri):
        raise ConfigError(
            f"deploy_mode 'cluster': manifest store {store_uri} is on this Airflow worker's disk, but the "
            "driver runs on a cluster machine and would write the checkpoint's manifest there, where the "
            "commit task never reads it. Use a store the driver and the Airflow workers share (an s3:// "
            "store, or gs://, abfs://, hdfs://) as manifest_base_uri or the connection's manifest_base_uri, "
            "or deploy_mode 'client'. Nothing was claimed or submitted (docs/user-guide/spark-cluster.md)",
            runbook="manifest-store",
        )
    if master.startswith("spark://"):
        raise ConfigError(
            f"deploy_mode 'cluster' on the standalone master {master}: Spark runs no Python driver there "
            f"(spark-submit: {STANDALONE_PYTHON_CLUSTER_REFUSAL!r}). Use deploy_mode 'client' (the driver "
            "runs on this worker, the executors on the cluster), or YARN / Kubernetes for a driver on the "
            "cluster. Nothing was claimed or submitted (docs/user-guide/spark-cluster.md)",
            runbook="configuration",
        )
    if not mounted_config:
        raise ConfigError(
            f"deploy_mode 'cluster': the driver cannot read this worker's private file; mount the Kafka "
            f"client config (and the store's credentials under {handoff.PRIVATE_FILE_STORE_KEY!r}) on the "
            f"driver with the platform's secrets and name the path in "
            f"env_vars={{'{handoff.CONFIG_FILE_ENV}': ...}}. Nothing was claimed or submitted "
            "(docs/user-guide/spark-cluster.md)",
            runbook="configuration",
        )
    if master.startswith("yarn") and durable_yarn_untracked:
        raise ConfigError(
            "deploy_mode 'cluster' on YARN with durable=True (the Spark provider's default on Airflow >= "
            "3.3): the provider re-attaches a retry to the application through the ResourceManager's REST "
            "API and refuses to start without it. Set yarn_track_via_rm_api=True (and the Spark "
            "connection's yarn_resourcemanager_webapp_address), or durable=False (a retry then submits "
            "again and its transactional ids fence the earlier driver). Nothing was claimed or submitted "
            "(docs/user-guide/spark-cluster.md)",
            runbook="configuration",
        )


def input_topic_list(value: Any) -> list[str]:
    """The topics named (a list, or one comma-separated string); [] for no Kafka input."""
    if value is None:
        return []
    topics = value.split(",") if isinstance(value, str) else value
    return [str(t).strip() for t in topics if str(t).strip()]


def check_kafka_input(value: Any, *, output_topic: Any, group: Any, start: Any, skip: Any) -> None:
    """Refuse, by name, a Kafka input the pipeline could not read exactly once."""
    topics = input_topic_list(value)
    if not topics:
        if value not in (None, "", []) or group or start:
            raise UsageError("input_group / input_start were given without input_topics (or input_topics "
                             "rendered empty): name the Kafka topic(s) the pipeline reads")
        return
    for topic in topics:
        validate_topic(topic, field="input_topics")
    if output_topic in topics:
        raise UsageError(f"input_topics includes the output topic {output_topic!r}: a pipeline reading "
                         "its own output would read each checkpoint's records again")
    if not group or not str(group).strip():
        raise UsageError("input_topics needs input_group: the consumer group whose committed offsets "
                         "mirror the pipeline's progress (lag tools read it)")
    if start is None:
        raise UsageError("input_topics needs input_start: where the pipeline's first checkpoint starts "
                         "(group, earliest, latest or timestamp:<epoch ms>); it is never guessed")
    StartChoice.parse(start, field="input_start")
    validate_flag(skip, field="skip_lost_input_ranges")


def kafka_input_flags(value: Any, *, group: Any, start: Any, skip: Any) -> list[str]:
    """The job's command-line flags for the Kafka input (checked first by :func:`check_kafka_input`)."""
    topics = input_topic_list(value)
    if not topics:
        return []
    flags = ["--input-topics", ",".join(topics), "--input-group", str(group), "--input-start", str(start)]
    skipping = validate_flag(skip, field="skip_lost_input_ranges")
    return [*flags, "--skip-lost-input-ranges"] if skipping else flags


def record_format_argument(record_formats: Mapping[str, Any] | None) -> str | None:
    """``--record-formats``' JSON: each part's format, schema, subject strategy and registration
    switch (no registry: its settings go in the private file). None when both parts are bytes."""
    import dataclasses

    from airflow_provider_kafka_eos.hooks.schema_registry import checked_formats

    checked, _ = checked_formats(record_formats)
    if checked is None:
        return None
    formats, input_spec = checked
    parts: dict[str, Any] = {
        name: {k: getattr(v, "value", v) for k, v in dataclasses.asdict(getattr(formats, name)).items()}
        for name in ("key", "value")}
    return json.dumps({**parts, **({"input": input_spec} if input_spec is not None else {})}, sort_keys=True)


def registry_settings(record_formats: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The registry connection's settings (credentials included: for the private file only), or
    None when no part uses a registry format."""
    import dataclasses

    from airflow_provider_kafka_eos.hooks.schema_registry import SchemaRegistryHook, checked_formats

    checked, conn_id = checked_formats(record_formats)
    if checked is None:
        return None
    return dataclasses.asdict(SchemaRegistryHook(conn_id).registry_config())


@dataclass(frozen=True)
class LaunchSettings:
    """What the operator hands spark-submit besides the job's arguments."""

    env_vars: dict[str, str]
    conf: dict[str, Any]
    py_files: str | None


def launch_settings(
    *,
    env_vars: Mapping[str, str] | None,
    conf: Mapping[str, Any] | None,
    py_files: str | None,
    config_file: str,
    python_executable: str | None,
    executor_python: str | None,
    master: str,
    cluster_mode: bool,
) -> LaunchSettings:
    """The job's environment, conf and ``--py-files`` (``config_file``: the private file, or the
    path of the config mounted on a cluster-mode driver).

    ``PYSPARK_PYTHON``: ``executor_python``, else the user's ``spark.pyspark.python``, else (local
    master only) the driver's Python; on a cluster without either, the cluster's own setting. A
    driver on the cluster, or in another Python, may lack this provider: the job-side code goes
    with ``--py-files`` (executors get it from the writer's ``addPyFile`` either way).
    """
    python = python_executable or sys.executable
    driver_python = python_executable if cluster_mode else python
    executors = executor_python or (conf or {}).get("spark.pyspark.python") or (
        python if master.startswith("local") else None)
    env = {
        **(env_vars or {}),
        handoff.CONFIG_FILE_ENV: config_file,
        **({"PYSPARK_DRIVER_PYTHON": driver_python} if driver_python else {}),
        **({"PYSPARK_PYTHON": str(executors)} if executors else {}),
        **_path_with_spark_submit(python, (env_vars or {}).get("PATH")),
    }
    spark_conf = {
        **(conf or {}),
        "spark.speculation": "false",
        **({"spark.pyspark.driver.python": driver_python} if driver_python else {}),
        **({"spark.pyspark.python": str(executors)} if executors else {}),
    }
    if cluster_mode or python_executable:
        runtime = str(shipping.runtime_zip())
        shipped = [f for f in (py_files or "").split(",") if f]
        if runtime not in shipped:
            py_files = ",".join([*shipped, runtime])
    if not cluster_mode:  # a cluster-mode driver cannot read this worker's files
        spark_conf = quiet_driver_conf(spark_conf)
    return LaunchSettings(env, spark_conf, py_files)


def _path_with_spark_submit(python: str, path: str | None) -> dict[str, str]:
    """Put the interpreter's bin folder on PATH when ``spark-submit`` is only found there.

    pip-installed pyspark puts ``spark-submit`` next to the venv's python, which is often not on
    the worker's PATH; the hook's Popen looks the binary up in the environment we pass.
    """
    current = path if path is not None else os.environ.get("PATH", "")
    if shutil.which("spark-submit", path=current):
        return {}
    venv_bin = str(Path(python).parent)
    if not Path(venv_bin, "spark-submit").exists():
        return {}
    return {"PATH": os.pathsep.join(p for p in (venv_bin, current) if p)}
