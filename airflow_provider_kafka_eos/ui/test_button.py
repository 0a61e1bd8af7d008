"""ASGI middleware: Airflow 3.3's Test button on a stored ``kafka_eos`` connection.

Why: the connection list and edit form post the connection with ``host: ""`` and ``port: 0``
(``Number(null)``) for a connection type whose host and port fields are hidden. Airflow treats a
blank host as "unchanged" but not port 0, so for a *stored* connection it answers 400 "The host or
port to test differs from the stored connection" before the hook is ever called: the button turns
red with no message. ``kafka_eos`` has no port field (``bootstrap.servers`` is in the extra), and 0
is never a Kafka port, so for this type only (and the ``kafka_eos_schema_registry`` type, whose URL is
in its extra too), a request body with ``port == 0`` and a blank host
has both keys removed: Airflow then tests the stored connection with the form's extra, as it
does for a blank host. Nothing else is touched (other connection types, other paths, a real
host or port), so Airflow's guard against testing stored credentials on another host still holds
for every request that names one.

Kept free of Airflow imports so it can be unit-tested as a plain ASGI app.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from airflow_provider_kafka_eos import CONNECTION_TYPE
from airflow_provider_kafka_eos.hooks.registry_form import REGISTRY_CONNECTION_TYPE

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

TEST_PATH_SUFFIX = "/api/v2/connections/test"
MAX_BODY = 1 << 20  # a connection is small; a bigger body is passed on untouched
# The provider's connection types whose form hides host and port (the schema registry's URL is in
# its extra too, so its form posts the same placeholders).
HOSTLESS_TYPES = (CONNECTION_TYPE, REGISTRY_CONNECTION_TYPE)


def rewrite_test_body(body: dict[str, Any]) -> dict[str, Any] | None:
    """The body without the form's placeholder host/port, or None when it needs no change."""
    port = body.get("port")
    if body.get("conn_type") not in HOSTLESS_TYPES or isinstance(port, bool) or port != 0:
        return None
    if body.get("host") not in (None, ""):
        return None
    return {k: v for k, v in body.items() if k not in ("host", "port")}


class HostlessConnectionTestMiddleware:
    """Drops ``host: ""`` / ``port: 0`` from a ``kafka_eos`` connection test request (see module doc)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope.get("type") != "http"
            or scope.get("method") != "POST"
            or not str(scope.get("path", "")).endswith(TEST_PATH_SUFFIX)
        ):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # client went away: let the app see it
                await self.app(scope, _replay([message]), send)
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if not message.get("more_body") or size > MAX_BODY:
                more = bool(message.get("more_body"))
                break
        raw = b"".join(chunks)
        new_body = None if more else _rewritten(raw)
        if new_body is None:
            first = {"type": "http.request", "body": raw, "more_body": more}
            await self.app(scope, _replay([first], receive), send)
            return
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(new_body)).encode()))
        await self.app({**scope, "headers": headers},
                       _replay([{"type": "http.request", "body": new_body, "more_body": False}]), send)


def _rewritten(raw: bytes) -> bytes | None:
    try:
        body = json.loads(raw)
    except ValueError:
        return None  # Airflow answers a malformed body itself
    if not isinstance(body, dict):
        return None
    changed = rewrite_test_body(body)
    return None if changed is None else json.dumps(changed).encode()


def _replay(messages: list[Message], then: Receive | None = None) -> Receive:
    """A ``receive`` that yields ``messages`` first, then defers to ``then`` (the real one)."""
    pending = list(messages)

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        if then is not None:
            return await then()
        return {"type": "http.disconnect"}

    return receive
