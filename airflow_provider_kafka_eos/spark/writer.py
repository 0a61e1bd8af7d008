"""``write_exactly_once``: a DataFrame into Kafka, prepared for a two-phase commit.

Rows travel to the producers as Arrow batches (``mapInArrow``). Each Spark partition owns
one transactional producer whose id comes from the naming strategy (partition id +
checkpoint), so a retried task attempt reuses the id and fences the attempt before it. Each
task returns its committable as a row; the driver writes the checkpoint manifest (status
PREPARED) only after it has collected every one of them, so a manifest never lists a
transaction that was not prepared, and a job that dies earlier leaves no manifest (restore
aborts its transactions on the next attempt).

The job does not commit: a later Airflow task does (``KafkaCommitTransactionsOperator``).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.abort_strategies import AbortStrategy, probing_ceiling
from airflow_provider_kafka_eos.kafka.checkpoints.identity import InputRecord, RunIdentity
from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import DEFAULT_TRANSACTION_TIMEOUT_MS
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import Manifest, ManifestStatus, write_manifest
from airflow_provider_kafka_eos.kafka.checkpoints.naming import NamingStrategy, pipeline_identity
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import STANDARD_CHAIN, StoreAccess
from airflow_provider_kafka_eos.kafka.checkpoints.writer_lease import DEFAULT_WAIT_S, writer_lease
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import (
    KafkaEosError,
    ProducerFencedError,
    SpeculativeExecutionError,
    UsageError,
)
from airflow_provider_kafka_eos.kafka.producers.librdkafka import TransactionProtocol
from airflow_provider_kafka_eos.kafka.producers.producer_config import (
    ArrowProducerSettings,
    arrow_producer_settings,
    check_producer_settings,
)
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable
from airflow_provider_kafka_eos.kafka.registry.config import RecordFormats
from airflow_provider_kafka_eos.kafka.validation import validate_pipeline_id, validate_prefix, validate_topic
from airflow_provider_kafka_eos.spark import partition_task, requirements, sessions, shipping
from airflow_provider_kafka_eos.spark import record_formats as record_formats_module
from airflow_provider_kafka_eos.spark.faults import FaultPlan

__all__ = ["DEFAULT_PRODUCER", "DEFAULT_TRANSACTION_TIMEOUT_MS", "PRODUCERS", "write_exactly_once"]

log = logging.getLogger(__name__)

_COMMITTABLE_SCHEMA = "committable string"
# "arrow": kafka/producers/arrow.py (Arrow columns -> record batches, the only path that can set
# KIP-939 Enable2Pc); "librdkafka": confluent-kafka, one produce() per row. The default is the
# faster one in benchmarks/bench_arrow_producer.py (docs/benchmarks.md).
PRODUCERS = ("arrow", "librdkafka")
DEFAULT_PRODUCER = "arrow"


def _checked_inputs(
    kafka_config: KafkaClientConfig | Mapping[str, Any], validated: tuple[str, str, str, int, int],
    producer: str | None, two_phase_commit: bool,
) -> tuple[KafkaClientConfig, str, Any]:
    """The client config, the inputs validated (``_validate``'s arguments) and the producer path
    with its settings: each refused by name before anything is written."""
    config = kafka_config if isinstance(kafka_config, KafkaClientConfig) else \
        KafkaClientConfig.from_mapping(kafka_config)
    _validate(*validated)
    chosen = choose_producer(producer, two_phase_commit)
    return config, chosen, _producer_settings(config, chosen)


def _offsets_ids(input_record: InputRecord | None) -> tuple[str, ...]:
    """The transactional id that moves a Kafka input's group offsets: ours, whatever its prefix."""
    kafka = input_record.kafka if input_record is not None else None
    return (kafka.offsets_transactional_id,) if kafka is not None and kafka.offsets_transactional_id else ()


def _group_offsets(config: KafkaClientConfig, input_record: InputRecord | None, transaction_timeout_ms: int,
                   protocol: TransactionProtocol, admin: Any) -> list[Committable]:
    """The group's offsets transaction of a Kafka input (they move with the checkpoint), if any."""
    if input_record is None or input_record.kafka is None:
        return []
    offsets = _prepare_group_offsets(config, input_record.kafka, transaction_timeout_ms, protocol, admin)
    return [offsets] if offsets is not None else []


def write_exactly_once(
    df: Any,
    *,
    topic: str,
    kafka_config: KafkaClientConfig | Mapping[str, Any],
    transactional_id_prefix: str | None = None,
    checkpoint_id: int,
    manifest_base_uri: str | None = None,
    naming_strategy: str | NamingStrategy = NamingStrategy.INCREMENTING,
    key_col: str = "key",
    value_col: str = "value",
    headers_col: str | None = None,
    partition_col: str | None = None,
    timestamp_col: str | None = None,
    pipeline_id: str | None = None,
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS,
    abort_strategy: str | AbortStrategy | None = None,
    fault_plan: FaultPlan | None = None,
    prepared_by: RunIdentity | None = None,
    two_phase_commit: bool = False,
    producer: str | None = None,
    input_record: InputRecord | None = None,
    store_access: StoreAccess = STANDARD_CHAIN,
    record_formats: RecordFormats | Mapping[str, Any] | None = None,
    dead_letters: tuple[Any, str] | None = None,
    writer_wait_s: float = DEFAULT_WAIT_S,
) -> Manifest:
    """Prepare checkpoint ``checkpoint_id`` of ``df`` in Kafka and return its PREPARED manifest.

    ``manifest_base_uri``: the manifest store; the manifest is ``<base>/<pipeline_id>/checkpoint-<id>.json``.
    Earlier checkpoints are restored first (``kafka/checkpoints/restore.py``); when this checkpoint
    already has a PREPARED or COMMITTED manifest, nothing is produced and that manifest is returned
    (``prepared_by`` names the run that wrote it). ``fault_plan``: the tests' fault injection hook.
    ``input_record``: the input the checkpoint carries, recorded in the manifest (its claim is the
    caller's). ``store_access``: the store's credentials (default: the standard chain).

    ``two_phase_commit=True`` opens every partition's transaction with KIP-939's Enable2Pc (the
    coordinator never times it out; each committable records ``two_phase``); it needs the Arrow
    producer. ``producer`` is ``"arrow"`` or ``"librdkafka"`` (default :data:`DEFAULT_PRODUCER`).
    ``timestamp_col`` (a timestamp, or epoch ms) is each record's CreateTime (else the producer's).
    ``record_formats``: key/value structs in the Confluent wire format, ids resolved once, in the manifest.
    ``dead_letters``: (a DataFrame of key, value, headers, a topic): more transactions of this checkpoint.
    ``writer_wait_s``: how long to queue behind another writer of the pipeline (``writer_lease.py``).
    """
    store = ManifestStore.configured(manifest_base_uri, source="manifest_base_uri", access=store_access)
    pipeline_id, transactional_id_prefix = pipeline_identity(pipeline_id, transactional_id_prefix)
    naming = NamingStrategy.parse(naming_strategy)
    config, producer, arrow_settings = _checked_inputs(
        kafka_config, (pipeline_id, topic, transactional_id_prefix, checkpoint_id, transaction_timeout_ms),
        producer, two_phase_commit)
    _check_session(df.sparkSession)
    formats = record_formats_module.parse(record_formats, df, key_col=key_col, value_col=value_col)
    plan = fault_plan if fault_plan is not None else FaultPlan()
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    outputs, extra = _dead_letter_counts(df, dead_letters)
    with writer_lease(store, pipeline_id=pipeline_id, transactional_id_prefix=transactional_id_prefix,
                      checkpoint_id=checkpoint_id, holder=prepared_by, wait_s=writer_wait_s) as lease, \
            TransactionAdmin(config) as admin:
        listing, newer = _listing(store, pipeline_id, naming, checkpoint_id)
        protocol = TransactionProtocol.from_admin(admin)
        aborter, partitions = _lingering_aborter(abort_strategy, naming, admin, checkpoint_id, df, newer,
                                                 extra)
        report = _restore(admin, store, listing, pipeline_id, transactional_id_prefix, checkpoint_id, aborter,
                          also_owned=_offsets_ids(input_record))
        if report.existing is not None:
            return report.existing
        resolved = formats.resolve(topic) if formats is not None else None  # before any transaction opens
        id_for_partition = _id_factory(naming, admin, transactional_id_prefix, checkpoint_id, partitions,
                                       report.protected_transactions)
        started_ms = _now_ms()
        committables = _prepare_checkpoint(
            df, dead_letters, outputs, resolved, plan=plan, config=config, id_for_partition=id_for_partition,
            transaction_timeout_ms=transaction_timeout_ms, protocol=protocol, producer=producer,
            two_phase=two_phase_commit, arrow_settings=arrow_settings, topic=topic,
            columns=(key_col, value_col, headers_col, partition_col, timestamp_col))
        return _vote(admin, store, committables, config=config, input_record=input_record,
                     transaction_timeout_ms=transaction_timeout_ms, protocol=protocol, plan=plan, lease=lease,
                     pipeline_id=pipeline_id, checkpoint_id=checkpoint_id, prefix=transactional_id_prefix,
                     naming=naming, topic=topic, started_ms=started_ms, prepared_by=prepared_by,
                     record_formats={topic: resolved.describe()} if resolved is not None else None)


def _prepare_checkpoint(df: Any, dead_letters: tuple[Any, str] | None, outputs: int,
                        resolved: record_formats_module.ResolvedFormats | None, *, plan: FaultPlan,
                        topic: str,
                        columns: tuple[str, str, str | None, str | None, str | None],
                        **prepare: Any) -> list[Committable]:
    """Every transaction of the checkpoint prepared: the output's partitions, then the dead letters'."""
    committables = _prepare_all(df, topic=topic, columns=columns, plan=plan, resolved_formats=resolved,
                                **prepare)
    return committables + _prepare_dead_letters(dead_letters, prepare.pop("id_for_partition"), outputs,
                                                **prepare)


def _vote(admin: Any, store: ManifestStore, committables: list[Committable], *, config: KafkaClientConfig,
          input_record: InputRecord | None, transaction_timeout_ms: int, protocol: TransactionProtocol,
          plan: FaultPlan, lease: Any, **manifest_fields: Any) -> Manifest:
    """The vote: every transaction checked once more, the offsets transaction added (Kafka input),
    the writer lease confirmed (no other writer's restore can have run meanwhile), then the PREPARED
    manifest written; from here on the batch must commit."""
    _check_one_per_transactional_id(committables)
    _verify_still_prepared(admin, committables)
    committables.extend(_group_offsets(config, input_record, transaction_timeout_ms, protocol, admin))
    plan.before_manifest()
    lease.confirm()
    return _write_vote(store, committables, input_record=input_record, **manifest_fields)


def _prepare_group_offsets(config: KafkaClientConfig, kafka_input: Any, transaction_timeout_ms: int,
                           protocol: TransactionProtocol, admin: Any) -> Committable | None:
    """The offsets transaction of a Kafka-input checkpoint (``kafka/producers/offsets_transaction.py``):
    prepared in the driver after the output's transactions, before the vote that lists it."""
    from airflow_provider_kafka_eos.kafka.producers.offsets_transaction import prepare_group_offsets

    if not kafka_input.offsets_transactional_id:
        raise UsageError("the input plan names no offsets transaction; plan it with offsets_transactional_id")
    return prepare_group_offsets(
        offsets=kafka_input.end_offsets(), group=kafka_input.group, confluent_config=config.confluent(),
        transactional_id=kafka_input.offsets_transactional_id, topic=kafka_input.topics[0],
        transaction_timeout_ms=transaction_timeout_ms, protocol=protocol, describe=admin.describe)


def _prepare_dead_letters(dead_letters: tuple[Any, str] | None, id_for_partition: Any, outputs: int,
                          **prepare: Any) -> list[Committable]:
    """A Kafka input's poison records, raw (key, value, headers naming where they came from), in more
    transactions of the same checkpoint, numbered after the output's ``outputs``: the same vote
    commits them with the output or not at all."""
    if dead_letters is None:
        return []
    frame, topic = dead_letters
    shifted = functools.partial(_shifted, id_for_partition, outputs)
    return _prepare_all(frame, topic=topic, id_for_partition=shifted,
                        columns=("key", "value", "headers", None, None), plan=FaultPlan(), **prepare)


def _dead_letter_counts(df: Any, dead_letters: tuple[Any, str] | None) -> tuple[int, int]:
    """(the output's partitions, the dead letters' partitions): a Kafka input's dead letters'
    transactions are numbered after the output's; (0, 0) without dead letters (nothing counted)."""
    if dead_letters is None:
        return 0, 0
    return sessions.partition_count(df), sessions.partition_count(dead_letters[0])


def _shifted(id_for_partition: Any, offset: int, partition: int) -> str:
    return id_for_partition(offset + partition)  # a dead-letter partition's id, after the output's


def _listing(store: ManifestStore, pipeline_id: str, naming: NamingStrategy,
             checkpoint_id: int) -> tuple[list[tuple[str, Manifest]], int | None]:
    """The pipeline's manifests, the one listing of this write (restore settles from it too), read
    under the writer lease; check the earlier checkpoints against this write: a naming-strategy
    switch is refused; the checkpoint a backfill's PROBING must stop below."""
    listing = store.manifests(pipeline_id)
    naming.check_switch_from(listing)
    return listing, probing_ceiling(listing, checkpoint_id)


def _id_factory(naming: NamingStrategy, admin: Any, prefix: str, checkpoint_id: int, partitions: int,
                protected: Iterable[str]) -> Any:
    """Partition -> transactional id. POOLING: ids still open (none, normally, after restore) or
    listed in a PREPARED manifest are taken."""
    in_use = naming.ids_in_use(admin, prefix, protected)
    return naming.id_factory(prefix, checkpoint_id, partitions=partitions, in_use=in_use)


def _check_session(spark: Any) -> None:
    """Refuse a Spark session the write cannot run on, before anything is written."""
    requirements.check_spark_version(spark.version, where="this Spark session")
    requirements.check_distribution_pair()
    refuse_speculation(spark)


def _lingering_aborter(abort_strategy: str | AbortStrategy | None, naming: NamingStrategy, admin: Any,
                       checkpoint_id: int, df: Any, newer: int | None, extra: int = 0) -> tuple[Any, int]:
    """How restore aborts what earlier attempts left open: the strategy asked for, else the one the
    naming strategy and the cluster call for (``kafka/checkpoints/abort_strategies.py``); with the
    partition-count hint it was given."""
    strategy = (AbortStrategy.parse(abort_strategy) if abort_strategy
                else AbortStrategy.default_for(naming, admin))
    partitions = _partition_hint(df, naming, strategy) + extra  # extra: the dead letters' transactions
    aborter = strategy.aborter(checkpoint_id=checkpoint_id, partitions_hint=partitions, stop_before=newer)
    return aborter, partitions


def _partition_hint(df: Any, naming: NamingStrategy, strategy: AbortStrategy) -> int:
    """``df``'s partition count where restore or the ids use it as a hint (POOLING's id table,
    PROBING's first range; ``kafka/checkpoints/abort_strategies.py``); 0 where nothing reads it.
    Classic Spark counts for free; Spark Connect runs a job for it (``spark/sessions.py``), so the
    usual INCREMENTING + LISTING write does not ask."""
    if naming is NamingStrategy.INCREMENTING and strategy is AbortStrategy.LISTING \
            and sessions.is_connect(df.sparkSession):
        return 0
    return sessions.partition_count(df)


def _restore(admin: Any, store: ManifestStore, listing: list[tuple[str, Manifest]], pipeline_id: str,
             prefix: str, checkpoint_id: int, abort_lingering: Any, also_owned: tuple[str, ...] = ()) -> Any:
    """Restore the pipeline before a new checkpoint (``kafka/checkpoints/restore.py``); when this
    checkpoint already has a manifest, say so (the caller returns it instead of producing).
    ``also_owned``: a Kafka-input checkpoint's offsets transaction (a dead attempt's is fenced)."""
    from airflow_provider_kafka_eos.kafka.checkpoints.restore import restore_pipeline

    report = restore_pipeline(
        admin, store=store, manifests=listing, pipeline_id=pipeline_id, transactional_id_prefix=prefix,
        checkpoint_id=checkpoint_id, abort_lingering=abort_lingering, also_owned=also_owned,
    )
    if report.existing is not None:
        owner = report.existing.prepared_by
        log.warning("checkpoint %d of %s is already %s (%s), prepared by %s: not producing again",
                    checkpoint_id, pipeline_id, report.existing.status.value, report.existing_uri,
                    owner.describe() if owner is not None else "a writer that recorded no run")
    return report


def _write_vote(store: ManifestStore, committables: list[Committable], *, pipeline_id: str,
                checkpoint_id: int, prefix: str, naming: NamingStrategy, topic: str,
                started_ms: int, prepared_by: RunIdentity | None = None,
                input_record: InputRecord | None = None, record_formats: dict | None = None) -> Manifest:
    """Write the PREPARED manifest (the vote); from now on the batch must be committed."""
    now = _now_ms()
    manifest = Manifest(
        pipeline_id=pipeline_id,
        checkpoint_id=checkpoint_id,
        transactional_id_prefix=prefix,
        naming_strategy=naming.value,
        topic=topic,
        status=ManifestStatus.PREPARED,
        committables=sorted(committables, key=lambda c: c.transactional_id),
        created_at_ms=now,
        updated_at_ms=now,
        prepared_by=prepared_by,
        input=input_record,
        record_formats=record_formats,  # the schema ids resolved before any transaction opened
    )
    uri = store.uri(pipeline_id, checkpoint_id)
    write_manifest(uri, manifest, access=store.access)
    log.info("checkpoint %d of %s prepared: %d transaction(s), %d record(s) in %.1fs -> %s",
             checkpoint_id, pipeline_id, len(committables),
             sum(c.record_count for c in manifest.output_committables),
             (now - started_ms) / 1000, uri)
    return manifest


def _prepare_all(df: Any, *, config: KafkaClientConfig, topic: str, id_for_partition: Any,
                 transaction_timeout_ms: int, protocol: TransactionProtocol,
                 columns: tuple[str, str, str | None, str | None, str | None], plan: FaultPlan,
                 producer: str, two_phase: bool,
                 arrow_settings: ArrowProducerSettings | None = None,
                 resolved_formats: record_formats_module.ResolvedFormats | None = None) -> list[Committable]:
    """Run the partition preparer on every Spark partition; the committables the tasks returned."""
    key_col, value_col, headers_col, partition_col, timestamp_col = columns
    prepare = partition_task.partition_preparer(
        confluent_config=config.confluent(),
        topic=topic,
        id_for_partition=id_for_partition,
        transaction_timeout_ms=transaction_timeout_ms,
        protocol=protocol,
        has_headers=headers_col is not None,
        has_partition=partition_col is not None,
        has_timestamp=timestamp_col is not None,
        plan=plan,
        producer=producer,
        two_phase=two_phase,
        install_specs=requirements.install_specs(),
        arrow_settings=arrow_settings,
        resolved_formats=resolved_formats,
    )
    shipping.ship_to_executors(df.sparkSession)  # executors need nothing of ours installed
    selected = [df[key_col].alias("k"), df[value_col].alias("v")]
    if headers_col is not None:
        selected.append(df[headers_col].alias("h"))
    if partition_col is not None:
        selected.append(df[partition_col].cast("int").alias("p"))
    if timestamp_col is not None:
        selected.append(_epoch_millis(df, timestamp_col).alias("t"))
    rows = _collect_committables(df.select(*selected).mapInArrow(prepare, _COMMITTABLE_SCHEMA))
    return [Committable.from_dict(json.loads(r["committable"]), source="spark task result") for r in rows]


def _collect_committables(frame: Any) -> list[Any]:
    """Run the write; a task that found a job-side requirement missing fails the job with its one line."""
    try:
        return frame.collect()
    except Exception as exc:
        translated = (requirements.translate_task_failure(exc, requirements.install_specs())
                      or record_formats_module.translate_task_failure(exc))
        if translated is None:
            raise
        raise translated from None


def refuse_speculation(spark: Any) -> None:
    """Two attempts of one task would share one transactional id and fence each other endlessly,
    and only one of their committables would reach the manifest: speculation is refused."""
    values = sessions.conf_values(spark, "spark.speculation", "false")
    if any(str(v).strip().lower() == "true" for v in values):
        raise SpeculativeExecutionError(
            "spark.speculation=true: speculative task attempts would write the same Kafka transaction twice; "
            "set spark.speculation=false for the exactly-once write job",
            runbook="speculative-execution",
        )


def _epoch_millis(df: Any, column: str) -> Any:
    """A timestamp column as epoch milliseconds (long); a numeric one is taken as milliseconds."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DateType, TimestampNTZType, TimestampType

    kind = df.schema[column].dataType
    if isinstance(kind, (TimestampType, TimestampNTZType, DateType)):
        return F.unix_millis(df[column].cast("timestamp"))
    return df[column].cast("long")


def _check_one_per_transactional_id(committables: list[Committable]) -> None:
    seen: set[str] = set()
    for c in committables:
        if c.transactional_id in seen:
            raise SpeculativeExecutionError(
                "two task attempts returned a committable for the same transactional id; only one can be "
                "committed (is speculation or a custom retry wrapper running tasks twice?)",
                transactional_id=c.transactional_id,
            )
        seen.add(c.transactional_id)


def _verify_still_prepared(admin: Any, committables: list[Committable]) -> None:
    """Re-check every committable on the coordinator right before the vote is written.

    A task attempt that Spark gave up on (lost executor) can finish after a newer attempt of the
    same partition fenced it; Spark keeps whichever result arrived first. Writing a manifest
    that lists a fenced transaction would only defer the failure to the commit task, so the job
    fails here instead and its retry (restore + produce again) repairs it.
    """
    if not committables:
        return
    descriptions = admin.describe([c.transactional_id for c in committables], missing_ok=True)
    for c in committables:
        description = descriptions.get(c.transactional_id)
        try:
            if description is None:
                raise ProducerFencedError("the coordinator no longer knows this transactional id",
                                          transactional_id=c.transactional_id)
            if admin.verify_committable(c, description) != "commit" or description.state != "Ongoing":
                raise ProducerFencedError(
                    f"the transaction is no longer open under producer id {c.producer_id}, epoch "
                    f"{c.producer_epoch}: the coordinator holds producer id {description.producer_id}, epoch "
                    f"{description.producer_epoch} (state {description.state})",
                    transactional_id=c.transactional_id, runbook="speculative-execution")
        except KafkaEosError as exc:
            # Same class, id and runbook; the cause says what the job did about it.
            raise type(exc)(
                f"{exc.cause}; the job wrote no manifest and fails, so that its retry produces the "
                "checkpoint again",
                transactional_id=exc.transactional_id,
                runbook=exc.runbook,
            ) from None


def choose_producer(producer: str | None, two_phase_commit: bool) -> str:
    """The producer path; 2PC needs the Arrow producer (librdkafka cannot set Enable2Pc)."""
    if producer is None:
        return "arrow" if two_phase_commit else DEFAULT_PRODUCER
    if producer not in PRODUCERS:
        raise UsageError(f"producer must be one of {', '.join(PRODUCERS)}, got {producer!r}")
    if two_phase_commit and producer != "arrow":
        raise UsageError(
            "two_phase_commit=True needs producer='arrow': librdkafka cannot open a KIP-939 two-phase-commit "
            "transaction (Enable2Pc); drop producer= or set it to 'arrow'",
            runbook="two-phase-commit",
        )
    return producer


def _producer_settings(config: KafkaClientConfig, producer: str) -> ArrowProducerSettings | None:
    """Every producer key of the connection honoured by the chosen path, or a ConfigError naming the
    key and the path (``kafka/producers/producer_config.py``); the Arrow producer's settings, if it is
    chosen."""
    if producer == "arrow":
        return arrow_producer_settings(config.confluent(), source=config.source)
    check_producer_settings(config.confluent(), producer, source=config.source)
    return None


def _validate(pipeline_id: str, topic: str, prefix: str, checkpoint_id: int, timeout_ms: int) -> None:
    """The arguments by the rules of ``kafka/validation.py``: the ones the submit operator applied
    before spark-submit, so the driver refuses nothing the operator let through."""
    validate_pipeline_id(pipeline_id, field="pipeline_id")
    validate_prefix(prefix, field="transactional_id_prefix")
    validate_topic(topic, field="topic")
    if isinstance(checkpoint_id, bool) or not isinstance(checkpoint_id, int) or checkpoint_id < 0:
        raise UsageError(f"checkpoint_id must be an integer >= 0, got {checkpoint_id!r}")
    if timeout_ms <= 0:
        raise UsageError(f"transaction_timeout_ms must be > 0, got {timeout_ms}")


def _now_ms() -> int:
    return int(time.time() * 1000)
