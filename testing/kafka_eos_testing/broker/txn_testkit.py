"""Test kit for the transaction coordinator: a raw one-connection client and real-client helpers.

``WireProbe`` exists because client libraries negotiate request versions themselves while the
coordinator's answers depend on the version (EndTxn v5 is TV2, PRODUCER_FENCED is rewritten
below InitProducerId v4 ...), so table tests send kafka-python protocol objects at a version
they pick, over a plain socket (SASL/PLAIN only, no retries, one request at a time). The other
helpers drive unmodified confluent-kafka and kafka-python clients. Test code only.
"""

from __future__ import annotations

import importlib
import itertools
import socket
import struct
import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from kafka_eos_testing.transactions import produce_transaction

_INT32 = struct.Struct(">i")


class WireProbe:
    """``probe.send(Request(...), version=v)`` -> the decoded response."""

    def __init__(
        self,
        bootstrap: str,
        *,
        timeout_s: float = 10.0,
        client_id: str = "txn-wire-probe",
        sasl_plain: tuple[str, str] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self._sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self._client_id = client_id
        self._correlation = itertools.count(1)
        if sasl_plain is not None:
            self._authenticate(*sasl_plain)

    def _authenticate(self, user: str, password: str) -> None:
        from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

        handshake = self.send(SaslHandshakeRequest(mechanism="PLAIN"), version=1)
        if handshake.error_code:
            raise ConnectionError(f"SASL handshake refused: error {handshake.error_code}")
        token = b"\x00" + user.encode() + b"\x00" + password.encode()
        answer = self.send(SaslAuthenticateRequest(auth_bytes=token), version=2)
        if answer.error_code:
            raise ConnectionError(f"SASL/PLAIN as {user} refused: error {answer.error_code}")

    def send(self, request: Any, *, version: int) -> Any:
        correlation_id = next(self._correlation)
        request.with_header(correlation_id=correlation_id, client_id=self._client_id)
        payload = bytes(request.encode(version=version, header=True))
        self._sock.sendall(_INT32.pack(len(payload)) + payload)
        size = _INT32.unpack(self._recv(4))[0]
        response_cls = _response_class(type(request))
        response = response_cls.decode(self._recv(size), version=version, header=True)
        if response.header.correlation_id != correlation_id:
            raise RuntimeError(f"correlation id {response.header.correlation_id} != {correlation_id}")
        return response

    def _recv(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self._sock.recv(n)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> WireProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _response_class(request_cls: type) -> type:
    module = importlib.import_module(request_cls.__module__)
    return getattr(module, request_cls.__name__.removesuffix("Request") + "Response")


def create_topic(bootstrap: str, topic: str, partitions: int = 1, **config: Any) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **config})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)


def transactional_producer(bootstrap: str, transactional_id: str, **config: Any) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **config})
    producer.init_transactions(30)
    return producer


def produce_in_transaction(
    producer: Producer, topic: str, keys: Iterable[bytes], partition: int | None = None
):
    producer.begin_transaction()
    for key in keys:
        if partition is None:
            producer.produce(topic, key=key, value=b"v-" + key)
        else:
            producer.produce(topic, key=key, value=b"v-" + key, partition=partition)
    assert producer.flush(30) == 0


def leave_open(bootstrap: str, transactional_id: str, topic: str, keys: list[bytes], **config: Any) -> None:
    """Write ``keys`` in a transaction and walk away without ending it.

    The producer is released by dropping the reference, never ``close()``d: confluent-kafka's
    close() aborts an open transaction (see prior-art.md), destroy does not.
    """
    produce_transaction(bootstrap, transactional_id, topic, keys, **config)


def admin(bootstrap: str, **config: Any) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, **config)


def describe(kafka_admin: KafkaAdminClient, transactional_id: str):
    return kafka_admin.describe_transactions([transactional_id])[transactional_id]


def wait_for(
    condition: Callable[[], Any], what: str, timeout_s: float = 20.0, interval_s: float = 0.05
) -> Any:
    """Poll ``condition`` until it returns something truthy; AssertionError naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what} (last: {value!r})")
        time.sleep(interval_s)


_PREPARE_STATES = ("PrepareCommit", "PrepareAbort", "PrepareEpochFence")
CONCURRENT_TRANSACTIONS = 51


def describe_settled(kafka_admin: KafkaAdminClient, transactional_id: str, timeout_s: float = 20.0):
    """DescribeTransactions once the id's markers have landed (not in a Prepare* state).

    Kafka answers EndTxn / InitProducerId before it writes the markers, so a describe right
    after them may still show PrepareCommit / PrepareAbort; the embedded broker (without
    ``marker_delay_ms``) is already Complete*.
    """

    def settled():
        d = describe(kafka_admin, transactional_id)
        return d if d.state.value not in _PREPARE_STATES else None

    return wait_for(settled, f"{transactional_id} to leave the Prepare* states", timeout_s)


def retry_concurrent(send: Callable[[], Any], timeout_s: float = 20.0) -> Any:
    """``send()`` again while it answers CONCURRENT_TRANSACTIONS (markers in flight), as clients do."""

    def answer():
        response = send()
        return response if response.error_code != CONCURRENT_TRANSACTIONS else None

    return wait_for(answer, "an answer other than CONCURRENT_TRANSACTIONS", timeout_s)


def end_offsets(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(LSO, high watermark) as consumers see them: ListOffsets LATEST per isolation level."""
    result = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "lso-probe", "isolation.level": isolation}
        )
        try:
            result.append(consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1])
        finally:
            consumer.close()
    return result[0], result[1]


def keys(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]
