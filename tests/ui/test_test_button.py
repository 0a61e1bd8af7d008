"""``HostlessConnectionTestMiddleware`` as a plain ASGI app: what it rewrites and what it leaves alone.

The end-to-end case (a real API server answering 400 without it) is
tests/system/airflow_scheduler/test_connection_test_button.py; this pins the narrow scope.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from airflow_provider_kafka_eos.ui.test_button import HostlessConnectionTestMiddleware

PATH = "/api/v2/connections/test"


def _through(body: bytes, *, path: str = PATH, method: str = "POST", chunks: int = 1) -> tuple[bytes, dict]:
    """Send ``body`` through the middleware; return what the app behind it received."""
    seen: dict = {}

    async def app(scope, receive, send):
        parts = []
        while True:
            message = await receive()
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        seen["body"], seen["headers"] = b"".join(parts), dict(scope["headers"])

    size = max(1, -(-len(body) // chunks))
    pieces = [body[i:i + size] for i in range(0, len(body), size)] or [b""]
    messages = [{"type": "http.request", "body": p, "more_body": i < len(pieces) - 1}
                for i, p in enumerate(pieces)]

    async def receive():
        return messages.pop(0)

    async def send(message):  # the app sends nothing here
        raise AssertionError(message)

    scope = {"type": "http", "method": method, "path": path,
             "headers": [(b"content-length", str(len(body)).encode())]}
    asyncio.run(HostlessConnectionTestMiddleware(app)(scope, receive, send))
    return seen["body"], seen["headers"]


def _body(**fields) -> bytes:
    return json.dumps({"connection_id": "c", "conn_type": "kafka_eos", "host": "", "port": 0,
                       "extra": "{}", **fields}).encode()


def test_the_schema_registry_type_s_placeholder_host_and_port_are_dropped():
    received, _ = _through(_body(conn_type="kafka_eos_schema_registry"))
    assert "host" not in json.loads(received) and "port" not in json.loads(received)


@pytest.mark.parametrize("chunks", [1, 3])
def test_kafka_eos_placeholder_host_and_port_are_dropped(chunks):
    received, headers = _through(_body(password="***"), chunks=chunks)
    data = json.loads(received)
    assert "host" not in data and "port" not in data
    assert data["password"] == "***" and data["extra"] == "{}"
    assert headers[b"content-length"] == str(len(received)).encode()


@pytest.mark.parametrize(
    "body, path, method",
    [
        (_body(conn_type="generic"), PATH, "POST"),  # another type: Airflow's behaviour, untouched
        (_body(port=9092), PATH, "POST"),  # a real port is a real destination
        (_body(host="broker"), PATH, "POST"),
        (_body(port=False), PATH, "POST"),
        (_body(), "/api/v2/connections", "POST"),  # saving is not testing
        (_body(), PATH, "GET"),
        (b"{not json", PATH, "POST"),  # Airflow answers a malformed body itself
    ],
)
def test_everything_else_passes_unchanged(body, path, method):
    received, _ = _through(body, path=path, method=method)
    assert received == body
