"""SparkEosSubmitOperator: spark-submit the exactly-once write job for this run's checkpoint.

It is the Spark provider's ``SparkSubmitOperator`` with the parts an exactly-once pipeline
must get right done for you:

* the checkpoint id is derived from the DAG run (its logical date, else its ``run_after``, in
  microseconds; :func:`checkpoint_id_for_run`), so task retries and cleared reruns of one run
  prepare the *same* checkpoint (the job then finds its manifest and does not produce again),
  two runs triggered within one second get different ones, and later runs get larger ids;
* with ``input_id`` (the identity of the input this run reads: a batch name, a file set's
  digest, a date partition), the input's claim is taken before anything is written
  (``kafka/checkpoints/input_claims.py``): a run whose input another run already prepared or committed
  writes nothing and is skipped with "input X was already written by run Y (checkpoint N,
  committed at T)"; so is its commit task, and no Asset event fires (unless the run that wrote it
  ended owing it a commit or an event: then the commit task does that,
  ``assets/events.owed_by_an_ended_run``). ``reprocess=True`` writes it again on purpose;
* the manifest records the run that prepared it, and a run that finds *another* run's
  manifest for its checkpoint never succeeds silently: a duplicate of the same input (an
  explicit ``checkpoint_id``, or the same logical date) is skipped with "duplicate of run X,
  nothing written"; anything else fails with ``CheckpointConflictError``
  (``kafka/checkpoints/identity.py`` owns that rule);
* the manifest URI the job printed is checked (the manifest must exist and be PREPARED or
  COMMITTED) and returned, i.e. pushed to XCom for the commit task.

How the job is started (its arguments, environment and private file, spark-submit's process)
is the hook layer's: ``hooks/spark_submit.py``, as the Spark provider keeps its own in its hook.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow_provider_kafka_eos.assets.events import owed_by_an_ended_run
from airflow_provider_kafka_eos.assets.lineage import KafkaLineageMixin, kafka_namespace
from airflow_provider_kafka_eos.hooks.spark_submit import (
    SPARK_PROVIDER_INSTALLED,
    EosSparkSubmitHook,
    check_deploy_target,
    check_kafka_input,
    input_topic_list,
    job_arguments,
    kafka_input_flags,
    launch_settings,
    missing_spark_provider_error,
    record_format_argument,
    registry_settings,
    require_job_file,
    require_spark_connection,
    spark_provider_missing,
    write_private_config,
)
from airflow_provider_kafka_eos.kafka.checkpoints.identity import Reuse, RunIdentity, reuse_verdict
from airflow_provider_kafka_eos.kafka.checkpoints.input_claims import ClaimOutcome, InputVerdict, claim_input
from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import DEFAULT_TRANSACTION_TIMEOUT_MS
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, manifest_uri, read_manifest
from airflow_provider_kafka_eos.kafka.errors import ManifestError, UsageError
from airflow_provider_kafka_eos.kafka.validation import (
    validate_flag,
    validate_input_id,
    validate_pipeline_id,
    validate_positive_ms,
    validate_prefix,
    validate_topic,
)
from airflow_provider_kafka_eos.spark import handoff
from airflow_provider_kafka_eos.spark import job as eos_job
from airflow_provider_kafka_eos.tasks import reattach
from airflow_provider_kafka_eos.tasks.dag_run import checkpoint_id_for_run, run_identity, run_state_probe
from airflow_provider_kafka_eos.tasks.fail_now import fail_now_exception, raises_fail_now
from airflow_provider_kafka_eos.tasks.job_summary import job_summary
from airflow_provider_kafka_eos.tasks.writer_choices import parse_writer_choices
from airflow_provider_kafka_eos.ui.links import CheckpointViewLink, remember_checkpoint

# The Spark provider is in the [spark] extra, not the base install (docs/install.md). Without it
# this module still imports and the operator is still built, because every Airflow worker parses
# the whole DAG file to run any one of its tasks: a worker that runs only the commit task of a
# pipeline DAG must be able to define the submit task beside it. Running the submit task there
# fails with MissingExtraError naming the extra, before anything is read or written.
if SPARK_PROVIDER_INSTALLED:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

__all__ = ["XCOM_CHECKPOINT_KEY", "SparkEosSubmitOperator"]

JOB_FILE = str(Path(eos_job.__file__).resolve())
_log = logging.getLogger(__name__)
# XCom key of the submit task's checkpoint result (checkpoint id, manifest, outcome, runs).
XCOM_CHECKPOINT_KEY = "checkpoint"


if not SPARK_PROVIDER_INSTALLED:
    from airflow.sdk import BaseOperator

    _BASE_OPERATOR_ARGUMENTS = frozenset(inspect.signature(BaseOperator.__init__).parameters) - {
        "self", "kwargs"}

    class SparkSubmitOperator(BaseOperator):  # type: ignore[no-redef]
        """Stands in for the Spark provider's operator where it is not installed: the task is
        defined (its DAG file parses, so the DAG's other tasks run on this worker) and its
        ``execute`` refuses by name. The Spark arguments are kept, unused."""

        template_fields: Sequence[str] = ()

        def __init__(self, **kwargs: Any) -> None:
            own = {name: kwargs.pop(name) for name in list(kwargs) if name in _BASE_OPERATOR_ARGUMENTS}
            self.spark_submit_arguments = kwargs
            super().__init__(**own)
            _log.warning(
                "task %s: %s; it runs only on a worker with airflow-provider-kafka-eos[spark]",
                self.task_id,
                spark_provider_missing(),
            )

        def execute(self, context: Any) -> Any:
            raise missing_spark_provider_error()


class SparkEosSubmitOperator(KafkaLineageMixin, SparkSubmitOperator):
    """Run the exactly-once write job (``spark/job.py``) for one checkpoint of a pipeline.

    :param pipeline_id: names the pipeline's manifests folder (``<base>/<pipeline_id>/``).
    :param topic: the Kafka topic to write.
    :param transactional_id_prefix: the prefix of every transactional id the job uses; unique per
        pipeline (restore aborts open transactions under it). Defaults to ``pipeline_id``.
    :param manifest_base_uri: where manifests live (local path, ``file://``, ``s3://``...); default:
        ``manifest_base_uri`` in the ``kafka_eos`` connection's extra (the store cleanup reads too).
    :param application_callable: the user's code, ``module:function`` or ``path/file.py[:function]``,
        called as ``function(spark, params) -> DataFrame`` inside the job.
    :param application_params: JSON-serialisable dict passed to that function (templated).
    :param naming_strategy: ``INCREMENTING`` (an id per partition and checkpoint) or ``POOLING``.
    :param abort_strategy: ``LISTING`` or ``PROBING``; default chosen from the cluster's abilities.
    :param kafka_eos_conn_id: the ``kafka_eos`` connection with the librdkafka client config.
    :param conn_id: the Spark connection (must exist; no fallback to YARN).
    :param checkpoint_id: override the run-derived checkpoint id (templated).
    :param input_id: the identity of the input this run reads (templated), e.g. the batch name, a
        digest of the file list, a date partition: a run whose input another run of the pipeline
        already prepared or committed writes nothing and is skipped (docs/user-guide/pipeline.md,
        "The same input"). Empty after rendering is refused. Default None: no input check.
    :param reprocess: write ``input_id`` again although a COMMITTED checkpoint already holds it
        (templated; ``True``/``"true"``); recorded in the manifest (``input.reprocess_of``).
    :param input_topics: Kafka topic(s) the pipeline reads (templated; a list or a comma-separated
        string). Each checkpoint reads the offset range planned before it reads (from the last
        COMMITTED checkpoint's end to the last stable offsets), the callable is called as
        ``function(spark, params, input_df)``, and ``input_group``'s offsets commit with the output
        (docs/user-guide/kafka-to-kafka.md). Spark's Kafka connector must be on the job's classpath
        (``packages="org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>"``).
    :param input_group: the consumer group whose committed offsets mirror the progress (templated).
    :param input_start: where the pipeline's first checkpoint starts: ``group`` (the group's committed
        offsets), ``earliest``, ``latest`` or ``timestamp:<epoch ms>`` (templated; required with
        ``input_topics``; later checkpoints continue where the last COMMITTED one ended).
    :param skip_lost_input_ranges: (templated flag) go on past input ranges Kafka no longer has
        (retention, a deleted topic), recording them in the manifest; default False: such a range
        fails the run by name.
    :param input_claim_timeout: seconds to wait for another run that claimed the same input and has
        not prepared it yet, before failing (retry later); default 300.
    :param transaction_timeout_ms: producer ``transaction.timeout.ms``; the commit must happen within it.
    :param key_col, value_col, headers_col, partition_col: DataFrame columns the writer reads.
    :param two_phase_commit: KIP-939 two-phase commit: the prepared transactions never time out
        (needs Kafka 4.1+ with 2PC enabled, the TWO_PHASE_COMMIT ACL and the Arrow producer).
    :param producer: ``"arrow"`` or ``"librdkafka"``; default: the writer's ``DEFAULT_PRODUCER``.
    :param record_formats: the key's and value's formats (``{"value": {"format": "avro", "schema": ...},
        "schema_registry_conn_id": ...}``; docs/configuration/record-formats.md). Default: bytes.
    :param python_executable: the Python the driver runs (and, on a ``local`` master, the workers).
    :param executor_python: the Python the executors run on a cluster (``spark.pyspark.python``),
        an environment with the job-side requirements (docs/user-guide/spark-cluster.md); default:
        the cluster's own setting.
    :param lineage_inputs: what the job reads, as OpenLineage ``(namespace, name)`` pairs (templated),
        e.g. ``[("file", "/data/events")]``; reported with the output topic when the OpenLineage
        provider is installed.
    Any other keyword goes to ``SparkSubmitOperator`` (``conf``, ``py_files``, ``driver_memory``...).

    The worker that runs this task needs the ``[spark]`` extra (the Spark provider, PySpark's
    ``spark-submit``). Elsewhere the task is still defined, so that its DAG file parses on workers
    that run only the DAG's other tasks, and running it fails at once with ``MissingExtraError``
    naming the extra (docs/install.md).
    """

    operator_extra_links = (CheckpointViewLink(),)  # its checkpoint in the operators' view
    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "pipeline_id",
        "topic",
        "transactional_id_prefix",
        "manifest_base_uri",
        "application_callable",
        "application_params",
        "checkpoint_id",
        "kafka_eos_conn_id",
        "lineage_inputs",
        "input_id",
        "reprocess",
        "input_topics",
        "input_group",
        "input_start",
        "skip_lost_input_ranges",
    )
    template_fields_renderers = {"application_params": "json"}
    ui_color = "#e8d5b7"

    def __init__(
        self,
        *,
        pipeline_id: str,
        topic: str,
        application_callable: str,
        manifest_base_uri: str | None = None,
        application_params: dict[str, Any] | None = None,
        transactional_id_prefix: str | None = None,
        naming_strategy: str = "INCREMENTING",
        abort_strategy: str | None = None,
        kafka_eos_conn_id: str = "kafka_eos_default",
        conn_id: str = "spark_default",
        checkpoint_id: int | str | None = None,
        transaction_timeout_ms: int | None = None,
        key_col: str = "key",
        value_col: str = "value",
        headers_col: str | None = None,
        partition_col: str | None = None,
        python_executable: str | None = None,
        lineage_inputs: Sequence[Sequence[str]] | None = None,
        two_phase_commit: bool = False,
        producer: str | None = None,
        executor_python: str | None = None,
        input_id: str | None = None,
        reprocess: bool | str = False,
        input_claim_timeout: float = 300.0,
        input_topics: Sequence[str] | str | None = None,
        input_group: str | None = None,
        input_start: str | None = None,
        skip_lost_input_ranges: bool | str = False,
        record_formats: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        from airflow_provider_kafka_eos.kafka.checkpoints.naming import pipeline_identity

        naming_strategy, abort_strategy = parse_writer_choices(naming_strategy, abort_strategy, producer,
                                                         two_phase_commit)
        kwargs.setdefault("name", f"kafka-eos-{pipeline_id}")
        super().__init__(application=JOB_FILE, conn_id=conn_id, **kwargs)
        self.pipeline_id = pipeline_id
        self.topic = topic
        # Templated values are resolved again in execute; this is the one rule (naming.pipeline_identity).
        self.transactional_id_prefix = pipeline_identity(pipeline_id, transactional_id_prefix)[1]
        self.manifest_base_uri = manifest_base_uri
        self.application_callable = application_callable
        self.application_params = application_params or {}
        self.naming_strategy = naming_strategy
        self.abort_strategy = abort_strategy
        self.kafka_eos_conn_id = kafka_eos_conn_id
        self.checkpoint_id = checkpoint_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.key_col = key_col
        self.value_col = value_col
        self.headers_col = headers_col
        self.partition_col = partition_col
        self.python_executable = python_executable
        self.lineage_inputs = lineage_inputs
        self.two_phase_commit = two_phase_commit
        self.producer = producer
        self.executor_python = executor_python
        self.input_id = input_id
        self.reprocess = reprocess
        self.input_claim_timeout = float(input_claim_timeout)
        self.input_topics = input_topics
        self.input_group = input_group
        self.input_start = input_start
        self.skip_lost_input_ranges = skip_lost_input_ranges
        self.record_formats = record_formats
        self.spark_conn_id = conn_id
        self._input: ClaimOutcome | None = None
        self._announce_uri: str | None = None
        self._config_file: str | None = None
        self._eos_hook: EosSparkSubmitHook | None = None
        self._job_started: Any = None  # records a client-mode job's pid in task state (tasks/reattach.py)
        self._left_running: Any = None  # an earlier try's job this try waits for (stopped by on_kill)
        self._validate_identity(skip_templates=True)  # the first door: a DAG with a bad id does not load

    # -- Airflow entry points ----------------------------------------------------------------

    @raises_fail_now
    def execute(self, context: Any) -> str:
        if not SPARK_PROVIDER_INSTALLED:
            raise missing_spark_provider_error()  # before anything is read, claimed or written
        self._validate_arguments()  # rendered templates included; nothing is started on bad input
        require_spark_connection(self.spark_conn_id)
        store = self._manifest_store()
        self.manifest_base_uri = store.base_uri
        master, cluster_mode = self._deploy_target()
        # A driver on the cluster: refused here, before the input's claim, when it cannot work.
        check_deploy_target(master=master, cluster_mode=cluster_mode, store_uri=store.base_uri,
                            mounted_config=(self.env_vars or {}).get(handoff.CONFIG_FILE_ENV),
                            durable_yarn_untracked=bool(getattr(self, "durable", False))
                            and not getattr(self, "_yarn_track_via_rm_api", False))
        checkpoint = self._checkpoint_id(context)
        run = run_identity(context)
        checkpoint = self._claim_input(context, store, checkpoint, run)
        remember_checkpoint(self, self.kafka_eos_conn_id, self.pipeline_id, checkpoint)
        if self._announce_uri is not None:  # written and committed before: only the commit task runs
            return self._announce_uri
        expected_uri = manifest_uri(self.manifest_base_uri, self.pipeline_id, checkpoint)
        self._prepare_launch(checkpoint, run)
        self.log.info("pipeline %s: preparing checkpoint %d -> %s",
                      self.pipeline_id, checkpoint, expected_uri)
        started = time.monotonic()
        try:
            manifest = None if cluster_mode else self._earlier_try_prepared(context, checkpoint, expected_uri)
            if manifest is None:
                super().execute(context)
        except Exception as err:
            self._fail_now_on_job_usage_error(err)
            raise
        finally:
            self._remove_config_file()
        manifest = manifest or self._read_result(expected_uri)
        self._judge_reuse(context, manifest, expected_uri, run)
        self.log.info("%s", job_summary(manifest, expected_uri, time.monotonic() - started))
        return expected_uri

    def _prepare_launch(self, checkpoint: int, run: RunIdentity | None) -> None:
        """The job's arguments, and its environment, conf and files (``hooks/spark_submit.py``)."""
        self.application_args = self._job_args(checkpoint, run)
        master, cluster_mode = self._deploy_target()
        mounted_config = (self.env_vars or {}).get(handoff.CONFIG_FILE_ENV)
        self._config_file = None if mounted_config else self._write_client_config()
        if mounted_config and self.application_params:
            # The mounted file holds only the client config: the params (never secrets, see the
            # user guide) go on the command line, as when the job is run by hand.
            params = json.dumps(self.application_params, sort_keys=True, default=str)
            self.application_args += ["--params", params]
        settings = launch_settings(
            env_vars=self.env_vars, conf=self.conf, py_files=self.py_files,
            config_file=str(mounted_config or self._config_file), python_executable=self.python_executable,
            executor_python=self.executor_python, master=master, cluster_mode=cluster_mode,
        )
        self.env_vars, self.conf, self.py_files = settings.env_vars, settings.conf, settings.py_files

    def _earlier_try_prepared(self, context: Any, checkpoint: int, expected_uri: str) -> Any | None:
        """Client mode (local, or a standalone cluster's ``spark://``: the driver is spark-submit on
        this host): wait for the job an earlier try left running and return its manifest
        (``tasks/reattach.py``); else (None) record the job this try starts. Not called in cluster
        deploy mode (YARN, Kubernetes; refused on a standalone master): a driver on the cluster is
        the Spark provider's to re-attach to (``durable``, inside ``super().execute``)."""
        try_number = getattr(context.get("ti"), "try_number", None)
        self._job_started = functools.partial(reattach.remember, context, checkpoint_id=checkpoint,
                                              try_number=try_number)
        bound = self.execution_timeout.total_seconds() if self.execution_timeout else \
            (int(self.transaction_timeout_ms or 0) or DEFAULT_TRANSACTION_TIMEOUT_MS) / 1000
        if not reattach.wait_for_earlier_try(context, checkpoint, timeout_s=bound,
                                             found=functools.partial(setattr, self, "_left_running")):
            return None
        with contextlib.suppress(ManifestError):  # it ended before preparing: run the job now
            return self._read_result(expected_uri)
        self.log.warning("the job left running ended without a usable manifest at %s: starting it again",
                         expected_uri)
        return None

    def _deploy_target(self) -> tuple[str, bool]:
        """(master, cluster deploy mode), resolved the provider's way from this operator's arguments
        and its Spark connection (``deploy_mode``, else the connection's ``deploy-mode`` extra)."""
        return EosSparkSubmitHook.adopt(super()._get_hook()).deploy_target

    def _read_result(self, expected_uri: str) -> Any:
        """The job's manifest, PREPARED or COMMITTED (the URI it reported must be the expected one)."""
        reported = self._eos_hook.reported_manifest_uri if self._eos_hook is not None else None
        if reported and reported != expected_uri:
            raise ManifestError(f"the job reported manifest {reported}, expected {expected_uri}",
                                runbook="commit-task-failed")
        manifest = read_manifest(expected_uri, access=self._manifest_store().access)
        if manifest.status not in (ManifestStatus.PREPARED, ManifestStatus.COMMITTED):
            raise ManifestError(
                f"{expected_uri}: the job finished but the manifest is {manifest.status.value}",
                runbook="rerun-a-checkpoint",
            )
        return manifest

    def _fail_now_on_job_usage_error(self, err: Exception) -> None:
        """The job exits with ``EXIT_USAGE`` when its input or configuration is wrong: no retry helps."""
        hook = self._eos_hook
        if hook is None or hook.exit_code != handoff.EXIT_USAGE:
            return
        reported = hook.reported_error or (
            f"the Spark job refused its arguments or input (exit {handoff.EXIT_USAGE}); see the log above"
        )
        raise fail_now_exception()(reported) from err

    def _judge_reuse(self, context: Any, manifest: Any, uri: str, run: RunIdentity | None) -> None:
        """Whose manifest did the job find? This run's: fine. Another run's: never plain success.

        The job writes nothing when its checkpoint already has a usable manifest; only here,
        knowing which run asks and whether the id was chosen by the user, can that be told apart
        from a lost run. Pushes the result to XCom (key ``checkpoint``) in every case.
        """
        # The user chose the id, or the manifest carries this run's input: either way the same input.
        same_input = self._input is not None and manifest.input is not None \
            and manifest.input.id == self._input.input_id
        explicit = self.checkpoint_id not in (None, "") or same_input
        owner = manifest.prepared_by
        if run is not None and run.same_run(owner) and owner.try_number == run.try_number:
            outcome, message = "prepared", f"checkpoint {manifest.checkpoint_id} prepared by this try"
            verdict = None
        else:
            verdict = reuse_verdict(manifest, uri, run, explicit_checkpoint=explicit)
            outcome, message = verdict.reuse.value, verdict.message
        result = {
            "checkpoint_id": manifest.checkpoint_id,
            "manifest_uri": uri,
            "status": manifest.status.value,
            "outcome": outcome,
            "message": message,
            "run": run.to_dict() if run is not None else None,
            "prepared_by": owner.to_dict() if owner is not None else None,
            "input": manifest.input.to_dict() if manifest.input is not None else None,
        }
        _push_checkpoint_result(context, result)
        if verdict is None:
            return
        if verdict.reuse is Reuse.SAME_RUN:
            self.log.info("%s", message)
            return
        self.log.warning("%s", message)
        verdict.raise_if_conflict()
        from airflow.sdk.exceptions import AirflowSkipException

        raise AirflowSkipException(message)

    def _manifest_store(self) -> Any:
        """The operator's store, else the connection's (the hook's rule; ManifestStoreError when unset)."""
        from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook

        return KafkaEosHook(kafka_eos_conn_id=self.kafka_eos_conn_id).manifest_store(self.manifest_base_uri)

    def on_kill(self) -> None:
        try:
            if self._eos_hook is not None:  # the job was started: stop it (its process group)
                super().on_kill()
            if self._left_running is not None:  # the job an earlier try left, which this try waits for
                reattach.stop(self._left_running)
        finally:
            self._remove_config_file()

    def _get_hook(self) -> EosSparkSubmitHook:
        """The provider's hook, built the provider's way, as ours (it captures the job's result line)."""
        self._eos_hook = EosSparkSubmitHook.adopt(super()._get_hook())
        self._eos_hook.on_started = self._job_started
        return self._eos_hook

    # -- helpers -----------------------------------------------------------------------------

    def _claim_input(self, context: Any, store: Any, checkpoint: int, run: RunIdentity | None) -> int:
        """Take the input's claim before anything is written; returns the checkpoint to prepare.

        A duplicate input pushes the result to XCom and skips this task (and so the commit task and
        its Asset event): nothing was written, and the log says which run wrote it. Unless that run
        ended owing its checkpoint a commit or an Asset event: then the commit task runs to do it.
        """
        self._input, self._announce_uri = None, None
        if self.input_id is None:
            if input_topic_list(self.input_topics):
                self.log.info("Kafka input: the checkpoint's offset ranges are planned from the last "
                              "COMMITTED checkpoint, so no input_id is needed "
                              "(docs/user-guide/kafka-to-kafka.md)")
            else:
                self.log.info("no input_id: a second run over the same input cannot be recognised (the "
                              "checkpoint id comes from the run); set input_id to the batch this run reads")
            return checkpoint
        input_id = validate_input_id(self.input_id, field="input_id")
        reprocess = validate_flag(self.reprocess, field="reprocess")
        outcome = claim_input(
            store, pipeline_id=self.pipeline_id, input_id=input_id, checkpoint_id=checkpoint, run=run,
            reprocess=reprocess, run_is_active=run_state_probe(context), timeout_s=self.input_claim_timeout,
        )
        self._input = outcome
        if outcome.verdict is InputVerdict.WRITE:
            self.log.info("%s", outcome.message)
            return outcome.checkpoint_id
        # Not while the writing run still runs: its own commit task may be about to commit and announce.
        ended = outcome.written_by is not None and run_state_probe(context)(outcome.written_by) is False
        owed = ended and owed_by_an_ended_run(self.kafka_eos_conn_id, outcome.manifest_uri, store.access)
        self._announce_uri = outcome.manifest_uri if owed else None
        self.log.warning("%s%s", outcome.message, _OWED.get(owed or "", ""))
        _push_checkpoint_result(context, {
            "checkpoint_id": outcome.checkpoint_id,
            "manifest_uri": outcome.manifest_uri,
            "status": None,
            "outcome": outcome.verdict.value,
            "message": outcome.message,
            "run": run.to_dict() if run is not None else None,
            "prepared_by": outcome.written_by.to_dict() if outcome.written_by is not None else None,
            "input": {"id": outcome.input_id, "reprocess_of": None},
        })
        if owed:
            return outcome.checkpoint_id
        from airflow.sdk.exceptions import AirflowSkipException

        raise AirflowSkipException(outcome.message)

    def _checkpoint_id(self, context: Any) -> int:
        if self.checkpoint_id not in (None, ""):
            try:
                value = int(self.checkpoint_id)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                raise UsageError(f"checkpoint_id must be an integer, got {self.checkpoint_id!r}") from None
            if value < 0:
                raise UsageError(f"checkpoint_id must be >= 0, got {value}")
            return value
        return checkpoint_id_for_run(context)

    def _job_args(self, checkpoint: int, run: RunIdentity | None = None) -> list[str]:
        """``spark/job.py``'s command line: ids and names only, never a secret (those go in the
        private file); the run that prepares the checkpoint and the input, for its manifest."""
        claimed = self._input
        return job_arguments({
            "pipeline-id": self.pipeline_id, "topic": self.topic,
            "transactional-id-prefix": self.transactional_id_prefix, "checkpoint-id": checkpoint,
            "manifest-base-uri": self.manifest_base_uri, "naming-strategy": self.naming_strategy,
            "application": self.application_callable, "key-col": self.key_col, "value-col": self.value_col,
            "abort-strategy": self.abort_strategy, "headers-col": self.headers_col,
            "partition-col": self.partition_col, "producer": self.producer,
            "transaction-timeout-ms": int(self.transaction_timeout_ms or 0) or None,
            "two-phase-commit": bool(self.two_phase_commit),
            "record-formats": record_format_argument(self.record_formats),  # schemas: no secrets
            **({"dag-id": run.dag_id, "run-id": run.run_id, "try-number": run.try_number,
                "logical-date": run.logical_date} if run is not None else {}),
            **({"input-id": claimed.input_id, "reprocess-of": claimed.reprocess_of} if claimed else {}),
        }) + kafka_input_flags(self.input_topics, group=self.input_group, start=self.input_start,
                               skip=self.skip_lost_input_ranges)

    def _validate_identity(self, *, skip_templates: bool) -> None:
        """Pipeline id, prefix, topic and input id by ``kafka/validation.py``'s rules, the very
        functions the Spark driver applies, so nothing the driver would refuse is submitted.
        In ``__init__`` a value that is still a template is left to ``execute`` (rendered)."""
        checks = (
            (validate_pipeline_id, self.pipeline_id, "pipeline_id"),
            (validate_prefix, self.transactional_id_prefix, "transactional_id_prefix"),
            (validate_topic, self.topic, "topic"),
            *(((validate_input_id, self.input_id, "input_id"),) if self.input_id is not None else ()),
        )
        for check, value, field in checks:
            if not (skip_templates and _is_template(value)):
                check(value, field=field)

    def _validate_arguments(self) -> None:
        """Every argument as rendered (``_validate_identity`` and the rest), before anything starts."""
        self._validate_identity(skip_templates=False)
        require_job_file(self.application, JOB_FILE)
        if self.transaction_timeout_ms is not None:
            validate_positive_ms(self.transaction_timeout_ms, field="transaction_timeout_ms")
        check_kafka_input(self.input_topics, output_topic=self.topic, group=self.input_group,
                          start=self.input_start, skip=self.skip_lost_input_ranges)
        record_format_argument(self.record_formats)  # formats and schemas, before anything starts

    def _write_client_config(self) -> str:
        """The private file for the job (``hooks/spark_submit.write_private_config``): the Kafka config
        and the manifest store's credentials from the worker's Airflow connection, the params."""
        from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook

        hook = KafkaEosHook(kafka_eos_conn_id=self.kafka_eos_conn_id)
        config = hook.client_config()
        store_options = dict(hook.store_access(str(self.manifest_base_uri)).options)
        self.set_lineage(
            outputs=[(kafka_namespace(config.bootstrap_servers), str(self.topic))],
            inputs=[(str(ns), str(name)) for ns, name in (self.lineage_inputs or [])],
        )
        return write_private_config(config, store_options, self.application_params, self.log.warning,
                                    registry_settings(self.record_formats))

    def _remove_config_file(self) -> None:
        path, self._config_file = self._config_file, None
        if path:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


_OWED = {  # what a duplicate's commit task does instead of being skipped (assets/events.py)
    "commit": "; that run ended with it still PREPARED: the commit task commits it, as eos_cleanup would",
    "announce": "; Airflow holds no Asset event for that checkpoint: the commit task announces it",
}


def _push_checkpoint_result(context: Any, result: Mapping[str, Any]) -> None:
    ti = context.get("ti") if hasattr(context, "get") else None
    if ti is not None:
        ti.xcom_push(key=XCOM_CHECKPOINT_KEY, value=dict(result))


def _is_template(value: Any) -> bool:
    """Whether Airflow will render ``value`` (a Jinja expression or statement) before execute."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)
