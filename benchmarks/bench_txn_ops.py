"""Transaction operations at batch scale: commit 1,000 prepared transactions, find_lingering over 10,000.

Targets (embedded broker, this machine): commit of 1,000 prepared transactions < 2 s;
find_lingering over 10,000 open transactions < 3 s. Reports wall time and the number of
requests ``TransactionAdmin`` sent per API (counted in ``kafka/protocol/wire.py``).

Setting up 11,000 open transactions with confluent-kafka producers would take minutes, so the
seed step speaks the producer's protocol itself, pipelined: InitProducerId, AddPartitionsToTxn
and (for the commit set) one transactional Produce batch per transaction, exactly the requests
a transactional producer sends. The commit set is verified afterwards with a read_committed
consumer (each key exactly once).

    .venv/bin/python -m benchmarks txn_ops [--commit-count N] [--lingering-count N] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

from kafka.protocol.producer import ProduceRequest
from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest, InitProducerIdRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition
from airflow_provider_kafka_eos.kafka.protocol.wire import Wire

PARTITIONS = 8
TIMEOUT_MS = 600_000
TARGETS_S = {"commit": 2.0, "find_lingering": 3.0}


def _create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep a reference until the futures resolve
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(timeout=30)


def _check(responses: list[Any], what: str, code_of) -> None:
    bad = [code_of(r) for r in responses if code_of(r)]
    if bad:
        raise RuntimeError(f"seeding failed at {what}: {len(bad)} error(s), first code {bad[0]}")


SEED_CHUNK = 5000  # ids per pipelined wave: each wave must finish within one request budget


_LOADING = frozenset({14, 15, 51})  # COORDINATOR_LOAD_IN_PROGRESS / _NOT_AVAILABLE, CONCURRENT_TRANSACTIONS


def _init_producer_ids(wire: Wire, ids: list[str], coordinators: dict[str, Any]) -> list[Any]:
    """InitProducerId per id, pipelined; ids whose coordinator is still loading (a fresh real
    cluster loads its ``__transaction_state`` partitions one by one) are re-sent, for 60 s at most."""
    answers: dict[str, Any] = {}
    pending = list(ids)
    deadline = time.monotonic() + 60
    while pending:
        responses = wire.send_all(
            [
                (
                    InitProducerIdRequest(
                        transactional_id=t,
                        transaction_timeout_ms=TIMEOUT_MS,
                        producer_id=-1,
                        producer_epoch=-1,
                    ),
                    coordinators[t],
                )
                for t in pending
            ]
        )
        answers.update(zip(pending, responses, strict=True))
        pending = [t for t, r in zip(pending, responses, strict=True) if r.error_code in _LOADING]
        if pending and time.monotonic() > deadline:
            break
        if pending:
            time.sleep(0.2)  # protocol retry backoff, bounded by the deadline above
    return [answers[t] for t in ids]


def seed_open_transactions(
    wire: Wire, ids: list[str], topic: str, *, with_records: bool
) -> list[tuple[str, int, int, int]]:
    """Leave each id with an Ongoing transaction on ``topic`` (partition i % PARTITIONS).

    Returns (transactional id, producer id, epoch, partition) per id. Seeds in waves of
    :data:`SEED_CHUNK` ids (50,000 InitProducerIds on a real cluster outlast one request budget).
    """
    seeded: list[tuple[str, int, int, int]] = []
    for start in range(0, len(ids), SEED_CHUNK):
        seeded += _seed_chunk(wire, ids[start : start + SEED_CHUNK], topic, with_records=with_records)
    return seeded


def seed_in_parallel(
    config: KafkaClientConfig, ids: list[str], topic: str, *, with_records: bool, pools: int = 8
) -> list[tuple[str, int, int, int]]:
    """:func:`seed_open_transactions` over ``pools`` connection pools at once (Kafka serves one
    request per connection at a time, and each of these waits for a replicated write)."""
    from concurrent.futures import ThreadPoolExecutor

    from airflow_provider_kafka_eos.kafka.protocol.lanes import split

    shares = [share for share in split(ids, pools) if share]
    seeders = [TransactionAdmin(config, request_timeout_ms=60_000) for _ in shares]
    try:
        with ThreadPoolExecutor(max_workers=len(shares)) as pool:
            parts = pool.map(
                lambda pair: seed_open_transactions(pair[0].wire, pair[1], topic, with_records=with_records),
                zip(seeders, shares, strict=True),
            )
            return [row for part in parts for row in part]
    finally:
        for seeder in seeders:
            seeder.close()


def _seed_chunk(
    wire: Wire, ids: list[str], topic: str, *, with_records: bool
) -> list[tuple[str, int, int, int]]:
    coordinators = wire.coordinators(ids)
    inits = _init_producer_ids(wire, ids, coordinators)
    _check(inits, "InitProducerId", lambda r: r.error_code)
    seeded = [
        (t, r.producer_id, r.producer_epoch, i % PARTITIONS)
        for i, (t, r) in enumerate(zip(ids, inits, strict=True))
    ]
    topic_cls = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    adds = wire.send_all(
        [
            (
                AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=t,
                    v3_and_below_producer_id=pid,
                    v3_and_below_producer_epoch=epoch,
                    v3_and_below_topics=[topic_cls(name=topic, partitions=[p])],
                    max_version=3,
                ),
                coordinators[t],
            )
            for t, pid, epoch, p in seeded
        ]
    )
    _check(
        adds,
        "AddPartitionsToTxn",
        lambda r: next(
            (
                x.partition_error_code
                for tr in r.results_by_topic_v3_and_below
                for x in tr.results_by_partition
                if x.partition_error_code
            ),
            0,
        ),
    )
    if with_records:
        from kafka.structs import TopicPartition as KTP

        leaders = wire.leaders([KTP(topic, p) for p in range(PARTITIONS)])
        data_cls = ProduceRequest.TopicProduceData
        batch = []
        for t, pid, epoch, p in seeded:
            builder = DefaultRecordBatchBuilder(
                magic=2,
                compression_type=0,
                is_transactional=1,
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=0,
                batch_size=1 << 16,
            )
            builder.append(0, timestamp=None, key=t.encode(), value=b"v", headers=[])
            request = ProduceRequest(
                transactional_id=t,
                acks=-1,
                timeout_ms=10_000,
                topic_data=[
                    data_cls(
                        name=topic,
                        partition_data=[
                            data_cls.PartitionProduceData(index=p, records=bytes(builder.build()))
                        ],
                    )
                ],
                max_version=12,
            )
            batch.append((request, leaders[KTP(topic, p)]))
        produced = wire.send_all(batch)
        _check(
            produced,
            "Produce",
            lambda r: next(
                (x.error_code for td in r.responses for x in td.partition_responses if x.error_code), 0
            ),
        )
    return seeded


def _committables(admin: TransactionAdmin, seeded, topic: str) -> list[Committable]:
    tv = 2 if admin.transaction_version() >= 2 else 1
    end_txn = admin.end_txn_version()
    described = admin.describe([t for t, *_ in seeded])
    now = int(time.time() * 1000)
    return [
        Committable(
            transactional_id=t,
            producer_id=pid,
            producer_epoch=epoch,
            partitions=(TopicPartition(topic, p),),
            record_count=1,
            prepared_at_ms=now,
            transaction_start_ms=described[t].start_time_ms,
            transaction_timeout_ms=described[t].timeout_ms,
            transaction_version=tv,
            end_txn_version=end_txn,
        )
        for t, pid, epoch, p in seeded
    ]


def _diff(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in sorted(after.items()) if v - before.get(k, 0)}


def run(bootstrap: str, commit_count: int, lingering_count: int) -> dict[str, Any]:
    from kafka_eos_testing.verify import assert_exactly_once, count_keys

    run_id = uuid.uuid4().hex[:8]
    config = KafkaClientConfig.from_mapping({"bootstrap.servers": bootstrap})
    result: dict[str, Any] = {}

    topic = f"bench-txn-{run_id}"
    _create_topic(bootstrap, topic)
    with TransactionAdmin(config) as seeder:
        started = time.perf_counter()
        seeded = seed_open_transactions(
            seeder.wire, [f"bench-{run_id}-c-{i}-1" for i in range(commit_count)], topic, with_records=True
        )
        committables = _committables(seeder, seeded, topic)
        seed_commit_s = time.perf_counter() - started

    with TransactionAdmin(config) as admin:
        before = admin.requests_sent
        started = time.perf_counter()
        outcomes = admin.commit(committables)
        commit_s = time.perf_counter() - started
        commit_requests = _diff(admin.requests_sent, before)
    assert sum(o.outcome == "committed" for o in outcomes) == commit_count
    assert_exactly_once(count_keys(bootstrap, topic, timeout_s=60), [t.encode() for t, *_ in seeded])
    result["commit"] = {
        "transactions": commit_count,
        "wall_s": round(commit_s, 3),
        "per_txn_ms": round(1000 * commit_s / commit_count, 3),
        "requests": commit_requests,
        "requests_total": sum(commit_requests.values()),
        "target_s": TARGETS_S["commit"],
        "met": commit_s < TARGETS_S["commit"],
        "seed_s": round(seed_commit_s, 3),
        "verified_exactly_once": True,
    }

    prefix = f"bench-{run_id}-l"
    with TransactionAdmin(config) as seeder:
        started = time.perf_counter()
        seed_open_transactions(
            seeder.wire, [f"{prefix}-{i}-1" for i in range(lingering_count)], topic, with_records=False
        )
        seed_lingering_s = time.perf_counter() - started
    with TransactionAdmin(config) as admin:
        before = admin.requests_sent
        started = time.perf_counter()
        found = admin.find_lingering(prefixes=[prefix], min_age_ms=0)
        find_s = time.perf_counter() - started
        find_requests = _diff(admin.requests_sent, before)
        assert len(found) == lingering_count, f"found {len(found)} of {lingering_count}"
        # leave the broker clean (matters when pointed at a shared / real cluster)
        before = admin.requests_sent
        cleanup_started = time.perf_counter()
        aborted = admin.abort([d.transactional_id for d in found], max_workers=16)
        abort_s = time.perf_counter() - cleanup_started
        abort_requests = _diff(admin.requests_sent, before)
    assert sum(o.outcome == "aborted" for o in aborted) == lingering_count
    result["find_lingering"] = {
        "open_transactions": lingering_count,
        "wall_s": round(find_s, 3),
        "requests": find_requests,
        "requests_total": sum(find_requests.values()),
        "target_s": TARGETS_S["find_lingering"],
        "met": find_s < TARGETS_S["find_lingering"],
        "seed_s": round(seed_lingering_s, 3),
    }
    result["abort_by_fencing"] = {
        "transactions": lingering_count,
        "wall_s": round(abort_s, 3),
        "requests": abort_requests,
        "requests_total": sum(abort_requests.values()),
    }
    return result


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="bench txn_ops")
    parser.add_argument("--commit-count", type=int, default=1000)
    parser.add_argument("--lingering-count", type=int, default=10000)
    parser.add_argument("--bootstrap", default=None, help="use this cluster instead of an embedded broker")
    args = parser.parse_args(argv)
    if args.bootstrap:
        result = run(args.bootstrap, args.commit_count, args.lingering_count)
        result["broker"] = args.bootstrap
        return result
    from kafka_eos_testing.embedded import start_embedded_broker

    broker = start_embedded_broker({"partitions": PARTITIONS, "log_level": "WARNING"})
    try:
        result = run(broker.bootstrap, args.commit_count, args.lingering_count)
    finally:
        broker.stop()
    result["broker"] = "embedded (kafka-eos-devbroker subprocess)"
    return result
