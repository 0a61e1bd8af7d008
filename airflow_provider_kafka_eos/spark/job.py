"""The program ``spark-submit`` runs: build the user's DataFrame, prepare it exactly once.

    spark-submit .../airflow_provider_kafka_eos/spark/job.py \\
        --pipeline-id orders --topic orders-enriched --transactional-id-prefix orders \\
        --checkpoint-id 1767225600 --manifest-base-uri /data/manifests \\
        --application my_pipeline.jobs:build_orders --params '{"input": "/data/in"}'

The Kafka client configuration (with its secrets) never travels on the command line, where
``ps`` and the Spark UI would show it: it is read from the file named by
``KAFKA_EOS_CLIENT_CONFIG_FILE`` (JSON object of librdkafka keys, or a Java
``client.properties``) or from the JSON in ``KAFKA_EOS_CLIENT_CONFIG``.
``SparkEosSubmitOperator`` writes that file as ``{"client_config": {...},
"application_params": {...}}``: the user's params (user-supplied JSON) travel there too, never
on the spark-submit command line; ``--params`` remains for running the job by hand. That
hand-off (the file, the variables, the result line below) is ``spark/handoff.py``'s.

The user's application is ``package.module:function`` or ``/path/to/file.py[:function]``
(default function name ``build_dataframe``); the function is called as
``function(spark, params) -> DataFrame`` with the ``--params`` JSON object. With Kafka as the input
(``--input-topics``, ``--input-group``, ``--input-start``) it is called as
``function(spark, params, input_df) -> DataFrame``: ``input_df`` is exactly this checkpoint's input
range, read by Spark's Kafka source (``spark/kafka_source.py``; the connector must be on the
classpath, e.g. spark-submit ``--packages org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>``).

On success the last line on stdout is ``KAFKA_EOS_MANIFEST_URI=<uri>``, which
``SparkEosSubmitOperator`` parses. Exit codes: 0 prepared (or already prepared/committed),
2 usage or configuration error, 3 any other Kafka-side error, 86/87 injected faults.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

# What the worker and this job say to each other (env names, the private file, the result line)
# is spark/handoff.py's; the names stay importable from here.
from airflow_provider_kafka_eos.spark.handoff import (
    CONFIG_ENV,
    CONFIG_FILE_ENV,
    ERROR_PREFIX,
    EXIT_KAFKA,
    EXIT_USAGE,
    PRIVATE_FILE_CONFIG_KEY,
    PRIVATE_FILE_PARAMS_KEY,
    PRIVATE_FILE_REGISTRY_KEY,
    PRIVATE_FILE_STORE_KEY,
    RESULT_PREFIX,
    load_client_config,
    load_params,
    load_registry_settings,
    load_store_access,
    result_line,
)

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE_ENV",
    "ERROR_PREFIX",
    "EXIT_USAGE",
    "PRIVATE_FILE_CONFIG_KEY",
    "PRIVATE_FILE_PARAMS_KEY",
    "PRIVATE_FILE_STORE_KEY",
    "RESULT_PREFIX",
    "build_arg_parser",
    "load_application",
    "load_client_config",
    "load_params",
    "load_store_access",
    "main",
]

DEFAULT_FUNCTION = "build_dataframe"

log = logging.getLogger("airflow_provider_kafka_eos.spark.job")


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airflow_provider_kafka_eos.spark.job",
        description="Prepare one checkpoint of a pipeline in Kafka (exactly-once, two-phase commit).",
    )
    parser.add_argument("--pipeline-id", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--transactional-id-prefix", required=True)
    parser.add_argument("--checkpoint-id", required=True, type=int)
    parser.add_argument("--manifest-base-uri", required=True)
    parser.add_argument("--naming-strategy", default="INCREMENTING", choices=("INCREMENTING", "POOLING"))
    parser.add_argument("--abort-strategy", default=None, choices=("LISTING", "PROBING"))
    parser.add_argument("--application", required=True,
                        help="module:function or path/file.py[:function], called as function(spark, params)")
    parser.add_argument("--params", default="{}", help="JSON object passed to the application function")
    parser.add_argument("--transaction-timeout-ms", type=int, default=None)
    parser.add_argument("--two-phase-commit", action="store_true",
                        help="KIP-939: open every transaction with Enable2Pc (needs --producer arrow)")
    parser.add_argument("--producer", choices=("arrow", "librdkafka"), default=None,
                        help="producer path in the tasks (default: the writer's DEFAULT_PRODUCER)")
    parser.add_argument("--key-col", default="key")
    parser.add_argument("--value-col", default="value")
    parser.add_argument("--headers-col", default=None)
    parser.add_argument("--partition-col", default=None)
    # The Airflow run that prepares the checkpoint (recorded in the manifest; no secrets).
    parser.add_argument("--dag-id", default=None)
    parser.add_argument("--run-id", default=None)
    parser.add_argument("--try-number", type=int, default=None)
    parser.add_argument("--logical-date", default=None, help="ISO-8601; omitted for runs without one")
    # The input the checkpoint carries (recorded in the manifest; the operator took its claim).
    parser.add_argument("--input-id", default=None, help="the input identity (e.g. the batch name)")
    parser.add_argument("--reprocess-of", type=int, default=None,
                        help="the checkpoint that wrote this input before (a deliberate reprocess)")
    # Kafka as the input (docs/user-guide/kafka-to-kafka.md): the range is planned before the read.
    parser.add_argument("--input-topics", default=None,
                        help="comma-separated Kafka topics the checkpoint reads (its offsets move with "
                             "the output)")
    parser.add_argument("--input-group", default=None,
                        help="the consumer group whose committed offsets mirror the pipeline's progress")
    parser.add_argument("--input-start", default=None,
                        help="where the first checkpoint starts: group, earliest, latest or timestamp:<ms>")
    parser.add_argument("--skip-lost-input-ranges", action="store_true",
                        help="go on past input ranges Kafka no longer has (recorded in the manifest)")
    parser.add_argument("--record-formats", default=None,
                        help="JSON: the key's and value's record formats (docs/configuration/"
                             "record-formats.md); the registry's credentials come from the private file")
    parser.add_argument("--app-name", default=None,
                        help="Spark application name (default: kafka-eos-<pipeline>)")
    return parser


def load_application(spec: str) -> Callable[[Any, dict], Any]:
    """``module:function`` or ``path/to/file.py[:function]`` -> the callable."""
    from airflow_provider_kafka_eos.kafka.errors import UsageError

    target, _, function = spec.partition(":") if not _looks_like_windows_path(spec) else (spec, "", "")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise UsageError(f"--application {spec!r}: file {target} does not exist")
        module_spec = importlib.util.spec_from_file_location(f"kafka_eos_app_{path.stem}", path)
        if module_spec is None or module_spec.loader is None:
            raise UsageError(f"--application {spec!r}: cannot load {target} as a Python module")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_spec.name] = module
        module_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise UsageError(f"--application {spec!r}: cannot import {target} ({exc})") from None
    name = function or DEFAULT_FUNCTION
    fn = getattr(module, name, None)
    if not callable(fn):
        raise UsageError(f"--application {spec!r}: {target} has no function {name!r} "
                         "(expected function(spark, params) -> DataFrame)")
    return fn


def run(args: argparse.Namespace, *, fault_plan: Any = None, spark: Any = None,
        environ: Mapping[str, str] | None = None) -> str:
    """Build the DataFrame and prepare it; returns the manifest URI.

    ``fault_plan`` is the test hook (``kafka_eos_testing/fault_job.py`` passes one); the job itself never
    reads one from its environment. ``spark``: a session to run on (a Spark Connect client session,
    ``operators/connect_submit.py``) instead of the one spark-submit gives this process; ``environ``:
    where the private file is named (default ``os.environ``).
    """
    from pyspark.sql import SparkSession

    from airflow_provider_kafka_eos.kafka.checkpoints.identity import InputRecord
    from airflow_provider_kafka_eos.kafka.log_levels import spark_log_level
    from airflow_provider_kafka_eos.spark import sessions
    from airflow_provider_kafka_eos.spark.faults import FaultPlan
    from airflow_provider_kafka_eos.spark.writer import choose_producer

    check_job_side(choose_producer(args.producer, args.two_phase_commit))
    params = load_params(args.params, environ)
    config = load_client_config(environ)
    access = load_store_access(environ)  # the store's credentials from the operator's private file, if any
    formats = record_formats_of(args, environ)  # refused here, before Spark starts, when malformed
    check_input_formats(args, formats)
    application = load_application(args.application)
    plan = fault_plan if fault_plan is not None else FaultPlan()
    if plan.active:
        log.warning("fault injection active (tests only): %s", plan)

    if spark is None:
        spark = SparkSession.builder.appName(args.app_name or f"kafka-eos-{args.pipeline_id}").getOrCreate()
    sessions.set_log_level(spark, spark_log_level())  # WARN unless KAFKA_EOS_SPARK_LOG_LEVEL says
    record = input_record(args)
    translated: Any = contextlib.nullcontext()
    if args.input_topics:
        from airflow_provider_kafka_eos.spark.kafka_source import input_loss_translated, source_options

        source_options(config)  # a connection the input reader cannot use is refused before the plan
        kafka_input = plan_kafka_input(args, config, access)
        record = InputRecord(record.id if record is not None else f"kafka:{args.checkpoint_id}",
                             record.reprocess_of if record is not None else None, kafka_input)
        log.info("checkpoint %d reads %s", args.checkpoint_id,
                 ", ".join(str(r) for r in kafka_input.ranges) or "nothing")
        # Spark's own data-loss error (the range left Kafka after the plan) -> InputRangeLostError.
        translated = input_loss_translated(kafka_input, pipeline_id=args.pipeline_id,
                                           checkpoint_id=args.checkpoint_id, base_uri=args.manifest_base_uri)
    with translated:
        manifest = _build_and_write(args, spark, application, params, record, config, plan, access, formats)
    plan.after_manifest()
    uri = manifest.uri
    log.info("checkpoint %d: manifest %s is %s with %d transaction(s)", manifest.checkpoint_id, uri,
             manifest.status.value, len(manifest.committables))
    return uri


def _build_and_write(args: argparse.Namespace, spark: Any, application: Any, params: Any, record: Any,
                     config: Any, plan: Any, access: Any, formats: tuple = (None, {}, None)) -> Any:
    """The user's DataFrame (from the input range when the input is Kafka), prepared by the writer."""
    from airflow_provider_kafka_eos.kafka.errors import UsageError
    from airflow_provider_kafka_eos.spark.writer import DEFAULT_TRANSACTION_TIMEOUT_MS, write_exactly_once

    dead_letters = None
    if record is not None and record.kafka is not None:
        from airflow_provider_kafka_eos.spark.kafka_source import decode_input, read_input_range, split_input

        # the input's key/value decoded by its record formats; a poison record fails the run by name,
        # or (dead-letter) goes raw to the dead-letter topic in more transactions of this checkpoint
        read = read_input_range(spark, record.kafka, config)
        if formats[1] and formats[2]:
            input_df, poison = split_input(read, formats[1])
            dead_letters = (poison, formats[2])
        else:
            input_df = decode_input(read, formats[1])
        df = application(spark, params, input_df)
    else:
        df = application(spark, params)
    if df is None or not hasattr(df, "mapInArrow"):
        raise UsageError(f"--application {args.application!r} returned {type(df).__name__}, not a DataFrame")
    return write_exactly_once(
        df,
        topic=args.topic,
        kafka_config=config,
        transactional_id_prefix=args.transactional_id_prefix,
        checkpoint_id=args.checkpoint_id,
        manifest_base_uri=args.manifest_base_uri,
        store_access=access,
        naming_strategy=args.naming_strategy,
        key_col=args.key_col,
        value_col=args.value_col,
        headers_col=args.headers_col,
        partition_col=args.partition_col,
        pipeline_id=args.pipeline_id,
        transaction_timeout_ms=args.transaction_timeout_ms or DEFAULT_TRANSACTION_TIMEOUT_MS,
        abort_strategy=args.abort_strategy,
        fault_plan=plan,
        prepared_by=run_identity(args),
        input_record=record,
        two_phase_commit=args.two_phase_commit,
        producer=args.producer,
        record_formats=formats[0],
        dead_letters=dead_letters,
    )


def plan_kafka_input(args: argparse.Namespace, config: Any, access: Any = None) -> Any:
    """Plan (or, on a retry, read back) this checkpoint's input range, before anything is read."""
    from airflow_provider_kafka_eos.kafka.admin.input_offsets import read_input_offsets
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.checkpoints.input_ranges import (
        offsets_transactional_id,
        plan_checkpoint_input,
    )
    from airflow_provider_kafka_eos.kafka.checkpoints.restore import settle_before_planning
    from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
    from airflow_provider_kafka_eos.kafka.errors import UsageError

    topics = [t.strip() for t in args.input_topics.split(",") if t.strip()]
    if not args.input_group or not args.input_start:
        raise UsageError("--input-topics needs --input-group (the consumer group that mirrors the "
                         "progress) and "
                         "--input-start (group, earliest, latest or timestamp:<ms>: where the first "
                         "checkpoint "
                         "starts)")
    from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import STANDARD_CHAIN

    store = ManifestStore.configured(args.manifest_base_uri, source="--manifest-base-uri",
                                     access=access or STANDARD_CHAIN)
    store.create()
    with TransactionAdmin(config) as admin:
        # An older checkpoint left PREPARED (its run died before the commit) is settled by restore's
        # rules first: committed, or marked ABORTED and its range read again. No person is needed.
        return plan_checkpoint_input(
            store, pipeline_id=args.pipeline_id, checkpoint_id=args.checkpoint_id,
            settle=lambda listing: settle_before_planning(
                admin, store, listing, pipeline_id=args.pipeline_id,
                transactional_id_prefix=args.transactional_id_prefix, checkpoint_id=args.checkpoint_id),
            facts_for=lambda start: read_input_offsets(admin, topics, start=start, group=args.input_group),
            topics=topics, group=args.input_group, start=args.input_start,
            offsets_transactional_id=offsets_transactional_id(args.transactional_id_prefix),
            skip_lost_ranges=args.skip_lost_input_ranges)


# RegistryConfig's secret fields: never accepted on the command line (ps and the Spark UI show it).
_REGISTRY_SECRETS = ("basic_auth_password", "bearer_token", "ssl_key_password")


def record_formats_of(args: argparse.Namespace, environ: Any = None) -> tuple[Any, dict, str | None]:
    """``--record-formats`` as the output's ``RecordFormats`` (None: bytes, as without it), the
    Kafka input's decoders by part ({}: bytes) and its dead-letter topic (None: the ``fail``
    policy); the registry from the private file's
    ``schema_registry`` (credentials included), else from the JSON's ``registry`` (a registry
    without credentials, for a job run by hand)."""
    from airflow_provider_kafka_eos.kafka.errors import UsageError
    from airflow_provider_kafka_eos.kafka.registry.config import RecordFormats
    from airflow_provider_kafka_eos.spark.handoff import json_object

    if not args.record_formats:
        return None, {}, None
    spec = json_object(args.record_formats, "--record-formats")
    unknown = sorted(set(spec) - {"key", "value", "registry", "input"})
    if unknown:
        raise UsageError(f"--record-formats: unknown key(s) {', '.join(unknown)}; "
                         "known: key, value, registry, input")
    given = spec.get("registry")
    if isinstance(given, dict) and any(given.get(k) for k in _REGISTRY_SECRETS):
        raise UsageError("--record-formats carries a schema registry secret; put the registry's settings in "
                         f"the private file's {PRIVATE_FILE_REGISTRY_KEY!r} object (the operator does)")
    from_file = load_registry_settings(environ)
    if from_file is not None and given is not None:
        raise UsageError("--record-formats names a registry and the private file holds one; use one")
    formats = RecordFormats(key=spec.get("key", "bytes"), value=spec.get("value", "bytes"),
                            registry=from_file if from_file is not None else given)
    return formats, *_input_decoders(spec.get("input"), formats.registry)


def _input_decoders(spec: Any, registry: Any) -> tuple[dict[str, Any], str | None]:
    """The Kafka input's decoders by part (``--record-formats``' ``input``; {}: bytes) and its
    dead-letter topic (None: the ``fail`` policy)."""
    from airflow_provider_kafka_eos.kafka.registry.decoder import decoder_for, input_settings, poison_policy

    if spec is None:
        return {}, None
    settings = input_settings(spec)
    decoders = {part: decoder_for(setting, registry, part=part) for part, setting in settings.items()}
    return {part: d for part, d in decoders.items() if d is not None}, poison_policy(spec)[1]


def check_input_formats(args: argparse.Namespace, formats: tuple) -> None:
    """Input formats need a Kafka input; the dead-letter topic is neither the output nor an input."""
    from airflow_provider_kafka_eos.kafka.errors import UsageError

    _, decoders, dead_letter_topic = formats
    if decoders and not args.input_topics:
        raise UsageError("--record-formats names input formats but the job reads no Kafka input "
                         "(--input-topics); drop 'input' or name the input topics")
    inputs = [t.strip() for t in (args.input_topics or "").split(",")]
    if dead_letter_topic and (dead_letter_topic == args.topic or dead_letter_topic in inputs):
        raise UsageError(f"dead_letter_topic {dead_letter_topic!r} is the output topic or an input topic; "
                         "name a topic of its own")


def check_job_side(producer: str | None = None) -> None:
    """Before Spark starts: a supported PySpark, not mixed with another pyspark-client, and the
    driver's Python has what the write imports (each refusal is one line naming the fix)."""
    import pyspark

    from airflow_provider_kafka_eos.spark import requirements

    requirements.check_distribution_pair()
    requirements.check_spark_version(pyspark.__version__, where=f"PySpark in {sys.executable}")
    requirements.check_importable(requirements.install_specs(), where=f"the driver Python {sys.executable}",
                                  producer=producer)


def run_identity(args: argparse.Namespace) -> Any:
    """The ``RunIdentity`` given on the command line, or None (the job run outside Airflow)."""
    from airflow_provider_kafka_eos.kafka.checkpoints.identity import RunIdentity
    from airflow_provider_kafka_eos.kafka.errors import UsageError

    if not args.dag_id and not args.run_id:
        return None
    if not (args.dag_id and args.run_id):
        raise UsageError("--dag-id and --run-id name the Airflow run together; pass both or neither")
    return RunIdentity(args.dag_id, args.run_id, args.try_number, args.logical_date or None)


def input_record(args: argparse.Namespace) -> Any:
    """The ``InputRecord`` given on the command line, or None (no input identity)."""
    from airflow_provider_kafka_eos.kafka.checkpoints.identity import InputRecord
    from airflow_provider_kafka_eos.kafka.errors import UsageError
    from airflow_provider_kafka_eos.kafka.validation import validate_input_id

    if args.input_id is None:
        if args.reprocess_of is not None:
            raise UsageError("--reprocess-of needs --input-id (the input written again)")
        return None
    return InputRecord(validate_input_id(args.input_id, field="--input-id"), args.reprocess_of)


def main(argv: Sequence[str] | None = None, *, fault_plan: Any = None) -> int:
    from airflow_provider_kafka_eos.kafka.errors import ConfigError, KafkaEosError, UsageError
    from airflow_provider_kafka_eos.kafka.log_levels import quiet_client_loggers

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    args = build_arg_parser().parse_args(argv)
    try:
        quiet_client_loggers()  # kafka-python / py4j at WARNING unless KAFKA_EOS_CLIENT_LOG_LEVEL says
        uri = run(args, fault_plan=fault_plan)
    except (UsageError, ConfigError) as exc:
        print(f"{ERROR_PREFIX}{exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except KafkaEosError as exc:
        print(f"{ERROR_PREFIX}{exc}", file=sys.stderr, flush=True)
        return EXIT_KAFKA
    print(result_line(uri), flush=True)
    return 0


def _looks_like_windows_path(spec: str) -> bool:
    return len(spec) > 2 and spec[1] == ":" and spec[2] in "\\/"


if __name__ == "__main__":
    sys.exit(main())
