"""What each Spark task runs: one partition's rows into its own Kafka transaction, prepared.

``partition_preparer`` builds the function ``mapInArrow`` runs once per partition (pickled with
everything it closes over, so it imports what it needs inside); the writer
(``spark/writer.py``) runs it and turns the committables the tasks return into the vote. Split
from the writer so the driver's plan and the executor's work each fit one module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.producers.librdkafka import TransactionProtocol
from airflow_provider_kafka_eos.kafka.producers.producer_config import ArrowProducerSettings
from airflow_provider_kafka_eos.spark import client_files, requirements
from airflow_provider_kafka_eos.spark import record_formats as record_formats_module
from airflow_provider_kafka_eos.spark.faults import FaultPlan

__all__ = ["partition_preparer"]


def partition_preparer(
    *,
    confluent_config: dict[str, Any],
    topic: str,
    id_for_partition: Any,
    transaction_timeout_ms: int,
    protocol: TransactionProtocol,
    has_headers: bool,
    has_partition: bool,
    plan: FaultPlan,
    has_timestamp: bool = False,
    producer: str = "librdkafka",
    two_phase: bool = False,
    install_specs: dict[str, str] | None = None,
    arrow_settings: ArrowProducerSettings | None = None,
    resolved_formats: record_formats_module.ResolvedFormats | None = None,
):
    """The function Spark runs once per partition (it is pickled with everything it closes over)."""
    # The connection's request.timeout.ms bounds the task's requests too (the Arrow producer's
    # Produce requests travel on this admin's connections).
    admin_timeouts = ({"request_timeout_ms": arrow_settings.request_timeout_ms}
                      if arrow_settings is not None and "request.timeout.ms" in confluent_config else {})
    # Certificates and keys travel as their bytes, not as driver paths (spark/client_files.py).
    carried = client_files.carry(confluent_config, source="the Kafka client config")

    def prepare_partition(batches: Iterator[Any]) -> Iterator[Any]:
        # First, before any package of the write is imported: one clear line when one is missing.
        requirements.check_importable(install_specs, where=requirements.executor_python(), marked=True,
                                      producer=producer,
                                      codec=arrow_settings.codec.name if arrow_settings is not None else None)
        with client_files.materialised(carried) as task_config:
            yield from prepare_with(batches, task_config)

    def prepare_with(batches: Iterator[Any], confluent_config: dict[str, Any]) -> Iterator[Any]:
        from concurrent.futures import ThreadPoolExecutor

        import pyarrow as pa
        from pyspark import TaskContext

        from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin

        context = TaskContext.get()
        partition, attempt = context.partitionId(), context.attemptNumber()
        transactional_id = id_for_partition(partition)
        # The verification after flush needs an admin connection: open it while rows are written.
        connecting = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafka-eos-admin")
        admin_future = connecting.submit(
            lambda: TransactionAdmin(KafkaClientConfig.from_mapping(confluent_config, source="spark task"),
                                     **admin_timeouts)
        )

        txn = _open_transaction(producer, admin_future, confluent_config=confluent_config,
                                transactional_id=transactional_id, topic=topic,
                                transaction_timeout_ms=transaction_timeout_ms, protocol=protocol,
                                two_phase=two_phase, arrow_settings=arrow_settings)
        if resolved_formats is not None:  # key/value framed in the Confluent wire format, batch by batch
            batches = record_formats_module.encode_batches(batches, resolved_formats, partition=partition)
        try:
            txn.begin()
            _write_partition(txn, batches, plan=plan, partition=partition, attempt=attempt,
                             arrow=producer == "arrow", has_headers=has_headers, has_partition=has_partition,
                             has_timestamp=has_timestamp)
            committable = txn.prepare()
        finally:
            txn.release()  # also on failure: a fenced or failed producer must not linger in the worker
            connecting.shutdown(wait=True)
            if admin_future.exception() is None:
                admin_future.result().close()
        if committable is not None:
            yield pa.RecordBatch.from_pydict({"committable": [json.dumps(committable.to_dict())]})

    return prepare_partition


def _open_transaction(producer: str, admin_future: Any, *, confluent_config: dict[str, Any],
                      transactional_id: str, topic: str, transaction_timeout_ms: int,
                      protocol: TransactionProtocol, two_phase: bool,
                      arrow_settings: ArrowProducerSettings | None) -> Any:
    """The partition's transaction on the chosen producer (in the task; ``admin_future`` is the
    admin connection opened beside it)."""
    if producer == "arrow":
        from airflow_provider_kafka_eos.kafka.producers.arrow import ArrowPartitionTransaction

        return ArrowPartitionTransaction(
            admin=admin_future.result(),
            transactional_id=transactional_id,
            topic=topic,
            transaction_timeout_ms=transaction_timeout_ms,
            protocol=protocol,
            two_phase=two_phase,
            settings=arrow_settings,
        )
    from airflow_provider_kafka_eos.kafka.producers.librdkafka import PartitionTransaction

    return PartitionTransaction(
        confluent_config=confluent_config,
        transactional_id=transactional_id,
        topic=topic,
        transaction_timeout_ms=transaction_timeout_ms,
        protocol=protocol,
        describe=lambda ids: admin_future.result().describe(ids),
    )


def _write_partition(txn: Any, batches: Iterator[Any], *, plan: FaultPlan, partition: int, attempt: int,
                     arrow: bool, has_headers: bool, has_partition: bool, has_timestamp: bool) -> None:
    """Every Arrow batch of the partition into its open transaction; the fault plan's hooks (tests
    only) kill or fail the task at the point a fault test names."""
    from airflow_provider_kafka_eos.spark.faults import stop_task

    written = 0
    for batch in batches:
        kill_at = plan.kill_point(partition, attempt, written, batch.num_rows)
        if kill_at is not None:  # tests only: die part way through this batch
            batch = batch.slice(0, kill_at)
        _write_batch(txn, batch, arrow=arrow, has_headers=has_headers,
                     has_partition=has_partition, has_timestamp=has_timestamp)
        written += batch.num_rows
        if kill_at is not None:
            txn.flush()
            stop_task(plan, partition)
    if plan.fail_task_partition == partition:  # tests only: fail once the records reached Kafka
        txn.flush()
    plan.check_task_failure(partition)


def _write_batch(txn: Any, batch: Any, *, arrow: bool, has_headers: bool, has_partition: bool,
                 has_timestamp: bool = False) -> None:
    """One Arrow batch into the partition's transaction (columns k, v[, h][, p][, t])."""
    headers = batch.column(2) if has_headers else None
    partitions = batch.column(2 + int(has_headers)) if has_partition else None
    stamps = batch.column(2 + int(has_headers) + int(has_partition)) if has_timestamp else None
    if arrow:  # whole Arrow columns, no Python object per row
        txn.write_columns(batch.column(0), batch.column(1), headers, partitions, stamps)
        return
    txn.write_rows(
        batch.column(0).to_pylist(),
        batch.column(1).to_pylist(),
        None if headers is None else headers.to_pylist(),
        None if partitions is None else partitions.to_pylist(),
        None if stamps is None else stamps.to_pylist(),
    )
