"""Avro in, Avro out, exactly once, under spark-submit with the schema registry: a Kafka-input
pipeline whose input values were written by confluent-kafka's own AvroSerializer, one of them a
poison record (plain bytes), handled by each policy in turn on the same checkpoint.

``fail`` first: the job stops naming the record's topic, partition and offset, and writes no
manifest. Then the runbook's way past a record that can never decode (poison-record.md): the same
checkpoint again with ``dead-letter``. Its retry reads the stored plan (the same range), writes the
decoded orders as Avro and the poison record, raw, to the dead-letter topic in transactions of the
same checkpoint, and the commit makes both visible together. A read_committed consumer then counts
every key once, and confluent-kafka's own AvroDeserializer reads every value back; the group's
offsets move past the poison record.

Not ``provider_logic``: what is proven is Spark's Kafka source reading real Kafka 4.4 into the
decoder and the registry, end to end, so the apache pass runs it (two spark-submits). The decoding
rules themselves are proven without Spark (tests/kafka/registry/test_decoder*.py).
"""

from __future__ import annotations

import json

import pytest
from kafka_input_job_helpers import Job, create_topic
from kafka_input_support import APPLICATION, PARTITIONS, commit_and_wait, connector_jars, topic_group_offsets

from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import find_manifests
from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.spark.handoff import EXIT_KAFKA
from kafka_eos_testing.verify import committed_messages, count_keys

pytest.importorskip("confluent_kafka.schema_registry.avro")
pytestmark = [pytest.mark.faults, pytest.mark.spark, pytest.mark.broker]

ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"}]}
# the pipeline reads with a newer schema: a field the writers lack, resolved to its default
READER = {**ORDER, "fields": [*ORDER["fields"],
                              {"name": "note", "type": ["null", "string"], "default": None}]}
ORDERS_APPLICATION = APPLICATION.replace(":build_dataframe", ":build_orders")
N = 30


def _produce_orders(bootstrap: str, registry_url: str, topic: str) -> tuple[int, int]:
    """``N`` orders framed by Kafka's AvroSerializer (keys ``o-<i>``) over the topic's partitions, and
    the poison record ``o-poison`` (plain bytes) among them; (its partition, its offset)."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serialize = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(ORDER))
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    poison: list[tuple[int, int]] = []
    for i in range(N):
        value = serialize({"id": i, "customer": f"c{i}"}, context)
        producer.produce(topic, key=f"o-{i}".encode(), value=value, partition=i % PARTITIONS)
        if i == N // 2:
            producer.produce(topic, key=b"o-poison", value=b"not avro", partition=1,
                             on_delivery=lambda err, msg: poison.append((msg.partition(), msg.offset())))
    assert producer.flush(30) == 0
    return poison[0]


def test_avro_input_to_avro_output_exactly_once_with_a_poison_record_under_each_policy(
        kafka_broker, schema_registry, tmp_path, unique_name):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    jars = connector_jars()  # fetched (Maven, once) only where the test runs
    bootstrap = kafka_broker.bootstrap
    topic_in = create_topic(bootstrap, unique_name("avro-in"), PARTITIONS)
    topic_out = create_topic(bootstrap, unique_name("avro-out"), 2)
    dead = create_topic(bootstrap, unique_name("avro-dead"), 1)
    partition, offset = _produce_orders(bootstrap, schema_registry.url, topic_in)
    job = Job(kafka_broker, tmp_path, unique_name("avro"), topic_in, topic_out, unique_name("avro-group"),
              jars, application=ORDERS_APPLICATION)

    def formats(policy: dict) -> tuple[str, ...]:
        return ("--record-formats", json.dumps({
            "value": {"format": "avro", "schema": json.dumps(ORDER), "auto_register": True},
            "input": {"value": {"format": "avro", "schema": json.dumps(READER)}, **policy},
            "registry": {"url": schema_registry.url}}))

    failed = job.run(1, extra_args=formats({"on_poison": "fail"}))
    assert failed.returncode == EXIT_KAFKA, failed.stderr[-3000:]
    output = failed.stdout + failed.stderr  # spark-submit relays the Python driver's stderr on stdout
    error = output[output.rfind("kafka-eos job: "):].splitlines()[0]
    assert (f"input record at topic '{topic_in}' partition {partition} offset {offset}: its value cannot be "
            "decoded: it is not in the Confluent wire format") in error, output[-3000:]
    assert find_manifests(str(tmp_path / "manifests"), job.prefix) == []  # no vote: nothing can commit

    uri = job.prepared(1, extra_args=formats({"on_poison": "dead-letter", "dead_letter_topic": dead}))
    with TransactionAdmin(KafkaClientConfig.from_mapping(kafka_broker.client_config())) as admin:
        manifest = commit_and_wait(admin, uri)
        assert {p.topic for c in manifest.output_committables for p in c.partitions} == {topic_out, dead}
        assert topic_group_offsets(admin, job.group, topic_in) == manifest.input.kafka.end_offsets()
    assert count_keys(bootstrap, topic_out) == {f"o-{i}".encode(): 1 for i in range(N)}  # each once
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": schema_registry.url}))
    context = SerializationContext(topic_out, MessageField.VALUE)
    values = [deserialize(m.value(), context) for m in committed_messages(bootstrap, topic_out)]
    assert sorted(values, key=lambda v: v["id"]) == [{"id": i * 10, "customer": f"c{i}"} for i in range(N)]
    [letter] = committed_messages(bootstrap, dead)
    assert (letter.key(), letter.value()) == (b"o-poison", b"not avro")  # raw, as it was read
    named = {k: v.decode() for k, v in letter.headers()}
    assert (named["kafka_eos.topic"], named["kafka_eos.partition"], named["kafka_eos.offset"]) == (
        topic_in, str(partition), str(offset))
