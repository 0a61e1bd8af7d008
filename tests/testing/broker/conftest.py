"""Helpers for the broker core tests: raw protocol requests over a plain socket."""

from __future__ import annotations

import socket
import struct

import pytest

_INT32 = struct.Struct(">i")


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(data)} of {size} bytes")
        data += chunk
    return data


class RawClient:
    """One TCP connection speaking Kafka with kafka-python's schema classes, no client logic."""

    def __init__(self, bootstrap: str, timeout_s: float = 10.0) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.correlation_id = 0

    def send_bytes(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def read_bytes(self, size: int) -> bytes:
        return recv_exactly(self.sock, size)

    def request(self, request, response_class, version: int):
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="raw-test")
        payload = bytes(request.encode(version=version, header=True))
        self.sock.sendall(_INT32.pack(len(payload)) + payload)
        return self.read_response(response_class, version)

    def read_response(self, response_class, version: int):
        (size,) = _INT32.unpack(recv_exactly(self.sock, 4))
        frame = recv_exactly(self.sock, size)
        (correlation_id,) = _INT32.unpack_from(frame, 0)
        assert correlation_id == self.correlation_id
        return response_class.decode(frame, version=version, header=True)

    def is_closed_by_peer(self) -> bool:
        """True when the broker has closed this connection (EOF on read)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw_client(kafka_broker):
    clients: list[RawClient] = []

    def connect(bootstrap: str | None = None) -> RawClient:
        client = RawClient(bootstrap or kafka_broker.bootstrap)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.close()


def advertised_api_keys(bootstrap: str) -> set[int]:
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

    client = RawClient(bootstrap)
    try:
        response = client.request(ApiVersionsRequest(), ApiVersionsResponse, 0)
    finally:
        client.close()
    return {k.api_key for k in response.api_keys}


@pytest.fixture
def needs_transactions(kafka_broker):
    """Skip unless the broker runs a transaction coordinator (EndTxn and AddPartitionsToTxn advertised)."""
    if not {24, 26} <= advertised_api_keys(kafka_broker.bootstrap):
        pytest.skip(
            "needs the transaction coordinator (EndTxn/AddPartitionsToTxn): not advertised by the broker"
        )
