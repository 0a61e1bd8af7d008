"""``./run demo --pipeline kafka-to-kafka``: the Kafka -> PySpark -> Kafka example DAG end to end.

Runs ``dags/eos_kafka_to_kafka.py`` with ``dag.test()`` on the demo's Kafka (the embedded broker by
default, or ``--kafka apache``), the Airflow home and connections ``scripts/demo.py`` prepared:

1. creates the input topic (3 partitions) and the output topic;
2. produces a round of input: committed transactional batches, an aborted transaction (its
   records must never reach the output) and plain idempotent records;
3. runs the DAG: one checkpoint plans its range (``[from, to)`` per partition), reads it with Spark's
   Kafka source (the connector's jars from the Maven cache, ``KAFKA_EOS_K2K_SPARK_JARS``), writes the
   output and the group's offsets in one two-phase commit; a second round, a second checkpoint;
4. prints the exactly-once report of the output (read_committed count: every committed input
   record once, aborted input never) and checks the consumer group's committed offsets equal the
   last COMMITTED checkpoint's ``to``. Exit status 1 otherwise.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

PIPELINE_ID = "events_upper_demo"
INPUT_TOPIC = "demo-events"
OUTPUT_TOPIC = "demo-events-upper"
GROUP = "demo-events-upper-pipeline"
PARTITIONS = 3
ROUNDS = (("round1", "20260301T100000"), ("round2", "20260301T110000"))


def configure(out: Path) -> None:
    """The example DAG's settings (read when it is imported), set before Airflow parses it."""
    import pyspark

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.bench_spark_vs_sink import sink_jars

    version = pyspark.__version__
    jars = sink_jars(version, "2.12" if version.startswith("3.") else "2.13")  # Maven, cached once
    os.environ.update({
        "KAFKA_EOS_K2K_PIPELINE_ID": PIPELINE_ID,
        "KAFKA_EOS_K2K_INPUT_TOPIC": INPUT_TOPIC,
        "KAFKA_EOS_K2K_OUTPUT_TOPIC": OUTPUT_TOPIC,
        "KAFKA_EOS_K2K_GROUP": GROUP,
        "KAFKA_EOS_K2K_START": "earliest",
        "KAFKA_EOS_K2K_SCHEDULE": "none",
        "KAFKA_EOS_K2K_SPARK_JARS": ",".join(jars),
    })


def create_topics(client: dict[str, Any]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(client)
    wanted = [NewTopic(INPUT_TOPIC, PARTITIONS, 1), NewTopic(OUTPUT_TOPIC, 2, 1)]
    for future in admin.create_topics(wanted, operation_timeout=20).values():
        future.result(timeout=30)


def produce_round(client: dict[str, Any], tag: str) -> tuple[list[str], list[str]]:
    """Committed transactions, one aborted transaction, plain records; (keys expected, keys aborted)."""
    from confluent_kafka import Producer

    committed = [f"{tag}-txn-{i:04d}" for i in range(240)]
    aborted = [f"{tag}-aborted-{i:04d}" for i in range(60)]
    plain = [f"{tag}-plain-{i:04d}" for i in range(120)]
    txn = Producer({**client, "transactional.id": f"demo-upstream-{tag}"})
    txn.init_transactions(30)
    for batch in (committed[:120], committed[120:]):
        txn.begin_transaction()
        _send(txn, batch, b"event")
        txn.commit_transaction(30)
    txn.begin_transaction()
    _send(txn, aborted, b"never")
    txn.abort_transaction(30)
    _send(Producer({**client, "enable.idempotence": True}), plain, b"event")
    return committed + plain, aborted


def _send(producer: Any, keys: list[str], value: bytes) -> None:
    for i, key in enumerate(keys):
        producer.produce(INPUT_TOPIC, key=key.encode(), value=value + b" " + key.encode(),
                         partition=i % PARTITIONS)
    left = producer.flush(30)
    if left:
        raise RuntimeError(f"{left} input record(s) of the demo were not delivered within 30 s")


def run(root: Path, out: Path, client: dict[str, Any], say: Any) -> int:
    """Both rounds through the DAG, then the report; 0 when exactly once and the group followed."""
    import pendulum
    from airflow.dag_processing.dagbag import DagBag

    say(f"creating the input topic {INPUT_TOPIC} ({PARTITIONS} partitions) and the output {OUTPUT_TOPIC}")
    create_topics(client)
    bag = DagBag(dag_folder=str(root / "dags" / "eos_kafka_to_kafka.py"))
    if bag.import_errors:
        print(f"the Kafka-to-Kafka DAG does not import: {bag.import_errors}", file=sys.stderr)
        return 1
    dag = bag.get_dag("eos_kafka_to_kafka")
    expected: list[str] = []
    never: list[str] = []
    failed: list[str] = []
    for tag, date in ROUNDS:
        keys, aborted = produce_round(client, tag)
        expected += keys
        never += aborted
        say(f"{tag}: produced {len(keys)} committed and plain records and {len(aborted)} in an aborted "
            "transaction; running the DAG (submit: plan, read, prepare -> commit)")
        started = time.monotonic()
        dag_run = dag.test(logical_date=pendulum.parse(date, tz="UTC"))
        states = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}
        print(f"    run {date}: {states} ({time.monotonic() - started:.0f}s)", flush=True)
        failed += [f"{date}:{t}={s}" for t, s in states.items() if s != "success"]
    return report(out, client, expected, never, failed, say)


def report(out: Path, client: dict[str, Any], expected: list[str], never: list[str], failed: list[str],
           say: Any) -> int:
    """The closing checks: the output counted read_committed, the group's offsets against the last
    COMMITTED checkpoint's ``to``; 0 when both hold and every task succeeded."""
    from airflow_provider_kafka_eos.kafka.checkpoints.manifest import ManifestStatus, find_manifests
    from kafka_eos_testing.verify import count_keys, exactly_once_report

    say("manifests (each checkpoint's input range and its transactions)")
    last = None
    for _uri, manifest in find_manifests((out / "manifests").as_uri(), PIPELINE_ID):
        kafka = manifest.input.kafka if manifest.input is not None else None
        ranges = ", ".join(str(r) for r in kafka.ranges) if kafka else "no Kafka input"
        print(f"    {manifest.status.value:9} checkpoint {manifest.checkpoint_id}: "
              f"{len(manifest.committables)} transaction(s); read {ranges}")
        if manifest.status is ManifestStatus.COMMITTED and kafka is not None:
            last = manifest

    say(f"exactly-once report for topic {OUTPUT_TOPIC} (read_committed consumer)")
    counts = count_keys(client, OUTPUT_TOPIC)
    result = exactly_once_report(counts, expected)
    leaked = sorted(k for k in never if counts.get(k.encode(), 0))
    print(f"    records expected : {result.expected}")
    print(f"    records seen     : {result.seen}")
    print(f"    duplicates       : {len(result.duplicates)}")
    print(f"    missing          : {len(result.missing)}")
    print(f"    unexpected       : {len(result.unexpected)} (aborted input that leaked: {len(leaked)})")

    say(f"consumer group {GROUP}: committed offsets vs the last COMMITTED checkpoint's to")
    group_ok = check_group(client, last, failed)
    if failed:
        print(f"    not as expected: {'; '.join(failed)}")
    print()
    print(result.render())
    print(f"consumer group {GROUP}: {'at' if group_ok else 'NOT at'} the last COMMITTED checkpoint's to")
    return 0 if result.ok and group_ok and not failed else 1


def check_group(client: dict[str, Any], last: Any, failed: list[str]) -> bool:
    """The group's committed offsets equal the ``to`` of ``last`` (the last COMMITTED manifest).

    The commit task returns once Kafka logged each commit; the markers that make the offsets
    transaction's offsets visible to OffsetFetch follow (on a real Kafka node, asynchronously): the
    check first waits, with a deadline, until every transaction of that checkpoint is CompleteCommit.
    """
    from airflow_provider_kafka_eos.kafka.admin.input_offsets import group_offsets
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from kafka_eos_testing.transactions import wait_until_committed

    if last is None:
        failed.append("no COMMITTED checkpoint with a Kafka input")
        return False
    wanted = last.input.kafka.end_offsets()
    with TransactionAdmin(KafkaClientConfig.from_mapping(client)) as admin:
        wait_until_committed(admin, last.transactional_ids)
        group = group_offsets(admin, GROUP, [(INPUT_TOPIC, p) for p in range(PARTITIONS)])
    for (topic, partition), offset in sorted(wanted.items()):
        print(f"    {topic}-{partition}: group {group.get((topic, partition))}, checkpoint to {offset}")
    if group != wanted:
        failed.append(f"group offsets {group} != last COMMITTED checkpoint's to {wanted}")
        return False
    return True
