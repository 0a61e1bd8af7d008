"""Bad bytes on the wire close only the offending connection; version negotiation is Kafka's."""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import struct

import pytest
from confluent_kafka import Producer
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

from kafka_eos_testing.broker.txn_testkit import wait_for
from kafka_eos_testing.pytest_plugin import kafka_kind
from kafka_eos_testing.verify import assert_exactly_once, count_keys

pytestmark = [pytest.mark.broker, pytest.mark.broker_double]

GARBAGE = [
    pytest.param(b"\x00\x00\x00\x05hello", id="unknown-api-key"),
    pytest.param(struct.pack(">i", 2_000_000_000), id="absurd-frame-size"),
    pytest.param(struct.pack(">i", -7), id="negative-frame-size"),
    pytest.param(struct.pack(">ihhi", 8, 3, 12, 1), id="metadata-body-missing"),
    pytest.param(struct.pack(">ihhi", 10, 0, 9, 1) + b"\xff\xff", id="produce-truncated"),
    pytest.param(struct.pack(">ihhi", 8, 0, 1, 1), id="produce-v1-removed-in-kafka-4"),
]


@pytest.mark.parametrize("garbage", GARBAGE)
def test_garbage_closes_that_connection_and_other_clients_carry_on(
    kafka_broker, raw_client, unique_name, garbage
):
    bystander = raw_client()
    victim = raw_client()
    victim.send_bytes(garbage)
    assert victim.is_closed_by_peer()

    # a connection opened before the garbage still works...
    response = bystander.request(
        MetadataRequest(topics=[], allow_auto_topic_creation=False), MetadataResponse, 12
    )
    assert response.brokers[0].port == int(kafka_broker.bootstrap.rsplit(":", 1)[1])
    # ...and so does a real client afterwards
    topic = unique_name("after-garbage")
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap})
    producer.produce(topic, key=b"survivor", value=b"v")
    assert producer.flush(30) == 0
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [b"survivor"])


def test_api_versions_newer_than_supported_gets_unsupported_version_with_a_v0_list(kafka_broker, raw_client):
    client = raw_client()
    request = ApiVersionsRequest(client_software_name="x", client_software_version="1")
    request.with_header(correlation_id=1, client_id="raw-test")
    payload = bytearray(request.encode(version=3, header=True))
    struct.pack_into(">h", payload, 2, 99)  # claim ApiVersions v99
    client.correlation_id = 1
    client.send_bytes(struct.pack(">i", len(payload)) + bytes(payload))
    response = client.read_response(ApiVersionsResponse, 0)
    assert response.error_code == 35  # UNSUPPORTED_VERSION
    versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    # KIP-511: only ApiVersions' own range (up to v4 here: v5 of Kafka 4.4 is beyond
    # kafka-python's schemas), so the client retries with a version both sides speak
    assert set(versions) == {18} and versions[18] == (0, 4 if kafka_broker.embedded else 5)


def test_api_versions_v3_reports_transaction_version_feature_and_caps_init_producer_id(
    kafka_broker_factory, raw_client
):
    for options, tv, init_pid_max in (
        ({}, 2, 5),
        ({"transaction_version": 1, "two_phase_commit": True}, 1, 6),
    ):
        broker = kafka_broker_factory(**options)
        request = ApiVersionsRequest(client_software_name="raw", client_software_version="1")
        response = raw_client(broker.bootstrap).request(request, ApiVersionsResponse, 3)
        assert response.error_code == 0
        finalized = {f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features}
        assert finalized["transaction.version"] == (tv, tv)
        assert {k.api_key: k.max_version for k in response.api_keys}[22] == init_pid_max
        broker.stop()


def test_random_bodies_for_every_api_never_take_the_broker_down(
    kafka_broker_factory, raw_client, unique_name
):
    """Seeded fuzzing: a valid header for every advertised API and version, then random bytes."""
    import random

    broker = kafka_broker_factory()
    versions = raw_client(broker.bootstrap).request(ApiVersionsRequest(), ApiVersionsResponse, 0).api_keys
    rng = random.Random(20261122)
    host, port = broker.bootstrap.rsplit(":", 1)
    for api in versions:
        for version in range(api.min_version, api.max_version + 1):
            for _ in range(2):
                body = rng.randbytes(rng.randrange(0, 120))
                header = struct.pack(">hhih", api.api_key, version, 7, 4) + b"fuzz" + b"\x00"  # + empty tags
                frame = header + body
                with socket.create_connection((host, int(port)), timeout=5) as sock:
                    sock.sendall(struct.pack(">i", len(frame)) + frame)
    assert broker.running()
    topic = unique_name("after-fuzz")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, key=b"still-here", value=b"v")
    assert producer.flush(30) == 0
    assert_exactly_once(count_keys(broker.bootstrap, topic), [b"still-here"])
    if broker.embedded:  # every bad body was refused, none crashed a handler
        assert "unexpected error" not in broker.log_tail(100_000)


def test_pipelined_requests_are_answered_in_order(raw_client):
    """200 requests sent before reading any answer (more than the broker queues before pausing reads)."""
    client = raw_client()
    payloads = []
    for correlation_id in range(1, 201):
        request = MetadataRequest(topics=[], allow_auto_topic_creation=False)
        request.with_header(correlation_id=correlation_id, client_id="pipelined")
        payload = bytes(request.encode(version=12, header=True))
        payloads.append(struct.pack(">i", len(payload)) + payload)
    client.send_bytes(b"".join(payloads))
    for correlation_id in range(1, 201):
        client.correlation_id = correlation_id
        assert client.read_response(MetadataResponse, 12).brokers  # read_response checks the order


def test_frames_split_at_awkward_points_are_reassembled(kafka_broker, raw_client, unique_name):
    """A 300 KB produce request (bigger than the 64 KB receive buffer) sent in ragged pieces.

    With TCP_NODELAY each piece leaves as its own segment; the kernel may still merge some on the
    receiving side, so the splits exercised vary, but the frame is always bigger than the buffer.
    """
    import os

    from kafka.protocol.producer import ProduceRequest, ProduceResponse
    from kafka.record.default_records import DefaultRecordBatchBuilder

    topic = unique_name("ragged")
    client = raw_client()

    def topic_led() -> bool:  # Kafka creates an auto-created topic asynchronously (fidelity row 2)
        metadata = client.request(
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=True
            ),
            MetadataResponse,
            12,
        )
        (entry,) = metadata.topics
        return entry.error_code == 0 and bool(entry.partitions) and entry.partitions[0].leader_id >= 0

    wait_for(topic_led, f"topic {topic} to have a leader")
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(30):
        builder.append(
            i, timestamp=1_700_000_000_000, key=f"k{i}".encode(), value=os.urandom(10_000), headers=[]
        )
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            data(
                name=topic,
                partition_data=[data.PartitionProduceData(index=0, records=bytes(builder.build()))],
            )
        ],
    )
    client.correlation_id += 1
    request.with_header(correlation_id=client.correlation_id, client_id="ragged")
    payload = bytes(request.encode(version=9, header=True))
    frame = struct.pack(">i", len(payload)) + payload
    assert len(frame) > 300_000
    cuts = [0, 2, 5, 11, 4099, 70_000, 70_001, len(frame)]  # inside the size, the header, the body
    for start, end in itertools.pairwise(cuts):
        client.send_bytes(frame[start:end])
    response = client.read_response(ProduceResponse, 9)
    assert response.responses[0].partition_responses[0].error_code == 0
    assert_exactly_once(count_keys(kafka_broker.bootstrap, topic), [f"k{i}".encode() for i in range(30)])


# -- limits as Kafka has them (issue #13) --------------------------------------------------------

MIB = 1024 * 1024


def _rss_bytes(pid: int) -> int:
    """Resident set size of a process, from /proc (Linux)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


def _settle(raw_client, bootstrap: str, rounds: int = 5) -> None:
    """Round trips on another connection: the broker's single event loop has read what was sent."""
    bystander = raw_client(bootstrap)
    for _ in range(rounds):
        bystander.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), MetadataResponse, 12)


@pytest.fixture
def sasl_broker(kafka_broker_factory, tmp_path):
    import json

    path = tmp_path / "acls.json"
    path.write_text(json.dumps({"users": {"u": "u-pw"}, "super_users": ["User:u"], "acls": []}))
    return kafka_broker_factory(acl_file=str(path))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc (VmRSS)")
@pytest.mark.parametrize("listener", ["plaintext", "sasl"])
def test_ten_connections_declaring_100_mib_do_not_exhaust_the_broker(
    kafka_broker_factory, raw_client, request, listener
):
    """Each declares a 100 MiB frame (the limit) and sends 1 MiB of it: RSS stays < 200 MB.

    Before the fix the broker allocated every declared size up front, before authentication:
    ten such connections took it to 1.06 GB. A correctness bound, not a speed goal.
    """
    # Asked before any broker starts: on Apache Kafka this skipped only after starting two nodes.
    if kafka_kind() != "embedded":
        pytest.skip(f"needs the embedded broker's process RSS (its frame buffer regression) "
                    f"(not available on {kafka_kind()} Kafka)")
    broker = request.getfixturevalue("sasl_broker") if listener == "sasl" else kafka_broker_factory()
    before = _rss_bytes(broker.process.pid)
    chunk = struct.pack(">ihhi", 100 * MIB, 0, 9, 1) + bytes(MIB)  # Produce v9 header, then zeros
    clients = [raw_client(broker.bootstrap) for _ in range(10)]
    for client in clients:
        with contextlib.suppress(OSError):  # the SASL listener may close at once
            client.send_bytes(chunk)
    if listener == "plaintext":
        _settle(raw_client, broker.bootstrap)
    peak = _rss_bytes(broker.process.pid)
    assert peak < 200 * 1000 * 1000, f"RSS {peak / MIB:.0f} MiB (was {before / MIB:.0f} MiB before)"
    if listener == "sasl":  # 100 MiB > the 512 KiB pre-authentication limit: closed at once
        assert all(c.is_closed_by_peer() for c in clients)
    else:
        _settle(raw_client, broker.bootstrap)
        assert broker.process.poll() is None


def test_sasl_listener_applies_kafkas_pre_authentication_frame_limit(sasl_broker, raw_client):
    """sasl.server.max.receive.size (524288): a bigger frame before authentication closes the
    connection before its body arrives; one within the limit is read (the connection waits)."""
    over = raw_client(sasl_broker.bootstrap)
    over.send_bytes(struct.pack(">i", 524288 + 1) + b"\x00\x11")
    assert over.is_closed_by_peer()
    within = raw_client(sasl_broker.bootstrap)
    within.send_bytes(struct.pack(">i", 524288) + b"\x00\x11")
    within.sock.settimeout(1.0)
    with pytest.raises(TimeoutError):
        within.sock.recv(1)  # still open: the broker waits for the rest of the frame


def test_request_above_socket_request_max_bytes_closes_the_connection(kafka_broker_factory, raw_client):
    broker = kafka_broker_factory(socket_request_max_bytes=1 * MIB)
    client = raw_client(broker.bootstrap)
    client.send_bytes(struct.pack(">i", MIB + 1))
    assert client.is_closed_by_peer()
    ok = raw_client(broker.bootstrap)
    assert ok.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), MetadataResponse, 12)


def test_connections_beyond_max_connections_wait_for_a_free_slot(kafka_broker_factory, raw_client):
    """Kafka's acceptor waits for a slot (``ConnectionQuotas.waitForConnectionSlot``): a
    connection beyond ``max.connections`` stays open but unserved, and is served once one closes."""
    broker = kafka_broker_factory(max_connections=3)
    kept = [raw_client(broker.bootstrap) for _ in range(3)]
    for client in kept:  # each is served (and counted) before the next one connects
        client.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), MetadataResponse, 12)
    extra = raw_client(broker.bootstrap)
    request = MetadataRequest(topics=[], allow_auto_topic_creation=False)
    request.with_header(correlation_id=1, client_id="raw-test")
    payload = bytes(request.encode(version=12, header=True))
    extra.correlation_id = 1
    extra.send_bytes(struct.pack(">i", len(payload)) + payload)
    extra.sock.settimeout(2.0)
    with pytest.raises(TimeoutError):
        extra.sock.recv(1)  # held, not answered, while three connections are open
    extra.sock.settimeout(10.0)
    kept[0].close()
    # the freed slot goes to the waiting connection, which is then answered
    assert extra.read_response(MetadataResponse, 12).brokers


# Frames scripts/fuzz_broker.py found (seed 1): a null where the schema forbids one reached a
# handler and crashed it ("unexpected error" in the log). Kafka's reader refuses them first.
FUZZ_FINDINGS = [
    pytest.param("001800030000200000000000000000001800030000200000000000000000",
                 id="add-partitions-to-txn-v3-null-transactional-id"),
    pytest.param("0019000100004001000466757a7a0000000000000faf3e426dbef27e15a9114a0000000000000001",
                 id="add-offsets-to-txn-v1-null-group-id"),
]


@pytest.mark.parametrize("frame_hex", FUZZ_FINDINGS)
def test_fuzzer_findings_are_refused_not_crashed_on(kafka_broker_factory, raw_client, frame_hex):
    broker = kafka_broker_factory()
    frame = bytes.fromhex(frame_hex)
    client = raw_client(broker.bootstrap)
    client.send_bytes(struct.pack(">i", len(frame)) + frame)
    assert client.is_closed_by_peer()
    _settle(raw_client, broker.bootstrap, rounds=1)
    log = broker.log_tail(200)
    assert "serialized as null" in log and "unexpected error" not in log, log
