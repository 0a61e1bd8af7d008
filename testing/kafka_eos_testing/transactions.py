"""Real transactions for tests and benchmarks, made the way a prepared Spark task makes them.

One implementation of "write these keys in a Kafka transaction, then commit it or walk away
from it", shared by every test folder, so the one subtle rule lives in one place: a producer
whose transaction must stay open is released by dropping the reference, never ``close()``d,
because confluent-kafka 2.16's ``close()`` aborts an open transaction (prior-art.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import Producer

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    Manifest,
    ManifestStatus,
    manifest_uri,
    write_manifest,
)
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable


def _default_value(key: bytes) -> bytes:
    return b"v-" + key


def produce_transaction(
    bootstrap_or_config: str | Mapping[str, Any],
    transactional_id: str,
    topic: str,
    keys: Iterable[bytes],
    *,
    commit: bool = False,
    partitions: Sequence[int] | None = None,
    transaction_timeout_ms: int | None = None,
    value: Callable[[bytes], bytes] = _default_value,
    **producer_config: Any,
) -> dict[tuple[str, int], int]:
    """Write ``keys`` in one transaction of ``transactional_id``; commit it, or leave it Ongoing.

    Returns where the transaction's records begin on each partition ((topic, partition) -> the
    first delivered offset), as the provider's producers record it in a committable.

    ``partitions`` spreads the keys round-robin over those partitions (default: the client's
    partitioner). ``bootstrap_or_config`` is a bootstrap string or a librdkafka config (SASL...).
    ``transaction_timeout_ms`` defaults to the client's own default (60 s in librdkafka).
    """
    base = (
        {"bootstrap.servers": bootstrap_or_config}
        if isinstance(bootstrap_or_config, str)
        else dict(bootstrap_or_config)
    )
    settings = {**base, "transactional.id": transactional_id, **producer_config}
    if transaction_timeout_ms is not None:
        settings["transaction.timeout.ms"] = transaction_timeout_ms
    producer = Producer(settings)
    producer.init_transactions(30)
    producer.begin_transaction()
    targets = list(partitions or ())
    first: dict[tuple[str, int], int] = {}

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            where = (msg.topic(), msg.partition())
            first[where] = min(first.get(where, msg.offset()), msg.offset())

    for i, key in enumerate(keys):
        if targets:
            producer.produce(topic, key=key, value=value(key), partition=targets[i % len(targets)],
                             on_delivery=delivered)
        else:
            producer.produce(topic, key=key, value=value(key), on_delivery=delivered)
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} record(s) of {transactional_id} were not delivered"
    if commit:
        producer.commit_transaction(30)
    # Released without close(): an open transaction stays open. The last reference goes here, so
    # the client is destroyed now (nothing else refers to it); a gc.collect() here cost 0.3-0.6 s a
    # call in a test process with Airflow loaded, some 85 call sites over the suite.
    del producer
    return first


def write_prepared_manifest(
    admin: Any,
    base_uri: str,
    pipeline_id: str,
    topic: str,
    transactional_ids: Sequence[str],
    *,
    checkpoint_id: int = 1,
    prefix: str = "",
    access: Any = None,
) -> str:
    """A PREPARED manifest listing these open transactions, as the Spark driver would write it
    (``access``: the store's ``StoreAccess``; None: the store client's standard chain)."""
    described = admin.describe(transactional_ids)
    tv = admin.transaction_version()
    committables = [
        Committable(
            transactional_id=tid,
            producer_id=d.producer_id,
            producer_epoch=d.producer_epoch,
            partitions=d.partitions,
            record_count=1,
            prepared_at_ms=int(time.time() * 1000),
            transaction_start_ms=d.start_time_ms,
            transaction_timeout_ms=d.timeout_ms,
            transaction_version=2 if tv >= 2 else 1,
            end_txn_version=admin.end_txn_version(),
        )
        for tid, d in described.items()
    ]
    now = int(time.time() * 1000)
    uri = manifest_uri(base_uri, pipeline_id, checkpoint_id)
    write_manifest(
        uri,
        Manifest(
            pipeline_id=pipeline_id,
            checkpoint_id=checkpoint_id,
            transactional_id_prefix=prefix or pipeline_id,
            naming_strategy="INCREMENTING",
            topic=topic,
            status=ManifestStatus.PREPARED,
            committables=committables,
            created_at_ms=now,
            updated_at_ms=now,
        ),
        **({"access": access} if access is not None else {}),
    )
    return uri


def wait_until_committed(admin: Any, transactional_ids: Iterable[str], timeout_s: float = 30.0) -> None:
    """Poll DescribeTransactions until every id is CompleteCommit.

    EndTxn answers once the coordinator logged PrepareCommit; the markers that move the last
    stable offset follow. On real Kafka a read_committed count taken right after the commit can
    run before them and see nothing, so data-path tests wait for CompleteCommit before counting.
    """
    ids = list(transactional_ids)
    deadline = time.monotonic() + timeout_s
    while True:
        states = {t: str(d.state) for t, d in admin.describe(ids).items()}
        if all(s == "CompleteCommit" for s in states.values()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not CompleteCommit after {timeout_s} s: {states}")
        time.sleep(0.05)  # polling the coordinator until the markers are written, bounded above


def write_hanging_transaction(
    bootstrap: str,
    topic: str,
    partition: int,
    keys: Sequence[bytes],
    *,
    value: Callable[[bytes], bytes] = _default_value,
    timeout_s: float = 30.0,
) -> tuple[int, int]:
    """Leave a *hanging* transaction on one partition (KIP-664): a transactional batch its
    coordinator never heard of. Returns its (producer id, epoch).

    The batch is the provider's own RecordBatch v2 (``encode_batch``) of a producer id no
    coordinator allocated, sent straight to the partition leader as Produce v11 with no
    AddPartitionsToTxn. Only a broker started with ``transaction_partition_verification=False``
    (``transaction.partition.verification.enable=false``) appends it, as Kafka does for clients
    below Produce v12 (TV2 Produce is always verified); a verifying broker refuses it, and this
    raises naming the refusal. Nothing will ever end the transaction but a marker written on the
    partition (``kafka-eos-txn abort-partition``): the partition's last stable offset stays at it.
    """
    import random

    import pyarrow as pa
    from kafka.protocol.producer import ProduceRequest
    from kafka.structs import TopicPartition as KafkaTopicPartition

    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from airflow_provider_kafka_eos.kafka.producers.record_batch import encode_batch
    from airflow_provider_kafka_eos.kafka.protocol.error_codes import NONE, error_name
    from airflow_provider_kafka_eos.kafka.protocol.wire import Wire

    # Far above the ids Kafka hands out (blocks of 1000 from 0) and the embedded broker's counter.
    producer_id, producer_epoch = random.randrange(1 << 40, 1 << 41), 0  # noqa: S311 - not a secret
    batch = encode_batch(
        pa.array(list(keys), pa.binary()),
        pa.array([value(k) for k in keys], pa.binary()),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=0,
        transactional=True,
    )
    config = KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap})
    wire = Wire(config, deadline=time.monotonic() + timeout_s)
    try:
        target = KafkaTopicPartition(topic, partition)
        leader = wire.leaders([target])[target]
        version = min(wire.api_version(ProduceRequest) or 3, 11)  # below v12: no TV2 implicit add
        data = ProduceRequest.TopicProduceData
        records = data.PartitionProduceData(index=partition, records=batch.data)
        request = ProduceRequest(
            transactional_id=f"hanging-{producer_id}",  # never initialised: no coordinator entry
            acks=-1,
            timeout_ms=int(timeout_s * 1000),
            topic_data=[data(name=topic, partition_data=[records])],
            version=version,
        )
        response = wire.send(request, leader)
    finally:
        wire.close()
    (answer,) = [p for t in response.responses for p in t.partition_responses]
    if answer.error_code != NONE:
        raise AssertionError(
            f"{topic}-{partition} refused the unverified transactional batch with "
            f"{error_name(answer.error_code)} ({answer.error_message}): was the broker started with "
            "transaction_partition_verification=False?"
        )
    return producer_id, producer_epoch


def age_transactional_ids(
    admin: Any, transactional_ids: Sequence[str], epoch: int, *, transaction_timeout_ms: int = 60_000,
    deadline_s: float = 600.0,
) -> dict[str, int]:
    """Raise the producer epoch of idle ids to ``epoch`` (at most 32766) with raw InitProducerId
    requests, as a long-lived POOLING pipeline would over weeks (each InitProducerId on an
    Empty/Complete id bumps the epoch once): the only way to reach the TV2 epoch limit on a real
    Kafka. A broker handles one connection's requests in order, so each id's requests are
    pipelined in chunks (no round trip between two bumps) and exactly as many are sent as the
    epoch still needs. Returns id -> epoch reached. ``admin``: a TransactionAdmin.
    """
    from kafka.protocol.producer.transaction import InitProducerIdRequest

    reached = {tid: -1 for tid in transactional_ids}
    stop_at = time.monotonic() + deadline_s
    while True:
        todo = {tid: epoch - e for tid, e in reached.items() if e < epoch}
        if not todo:
            return reached
        if time.monotonic() > stop_at:
            raise TimeoutError(f"aging {len(todo)} id(s) to epoch {epoch} took over {deadline_s} s")
        nodes = admin.wire.coordinators(list(todo))
        batch, order = [], []
        for tid, missing in todo.items():
            request = InitProducerIdRequest(transactional_id=tid, producer_id=-1, producer_epoch=-1,
                                            transaction_timeout_ms=transaction_timeout_ms)
            batch += [(request, nodes.get(tid))] * min(missing, 4096)
            order += [tid] * min(missing, 4096)
        for tid, response in zip(order, admin.wire.send_all(batch), strict=True):
            if response.error_code == 0:
                reached[tid] = max(reached[tid], response.producer_epoch)
            elif response.error_code not in (51, 14, 15):  # CONCURRENT_TRANSACTIONS, coordinator moving
                raise RuntimeError(f"InitProducerId for {tid} answered error code {response.error_code}")
