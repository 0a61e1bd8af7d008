"""The network layer: a buffered protocol and one asyncio task per connection, framing, dispatch.

Requests on one connection are answered strictly in order (Kafka mutes a channel while a
request is in flight, and clients rely on that ordering). Anything malformed closes only the
offending connection: the broker and other clients carry on.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import struct
from collections import deque
from typing import Any, Protocol

from kafka.protocol.metadata import ApiVersionsResponse

from . import codes
from .api import HANDLERS, RequestContext
from .connection import CloseConnection, Connection


class BrokerSide(Protocol):
    """What the server uses of the broker that hands itself in (a ``broker.Broker``): a Protocol,
    so this module does not import the broker that starts it."""

    config: Any
    connections: set[Any]
    waiting_connections: deque[Any]

    @property
    def sasl_enabled(self) -> bool: ...

    def api_max_versions(self) -> dict[int, int]: ...


log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
_INT32 = struct.Struct(">i")
_ZEROS = bytes(1024 * 1024)  # growth material for big frames (extend without a temporary)
_REQUEST_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id


def advertised_versions(broker: BrokerSide) -> list[tuple[int, int, int]]:
    """(api key, min, max) for every registered API, with the broker's own caps applied."""
    out = []
    for key, reg in sorted(HANDLERS.items()):
        top = reg.max_version
        if key == 22 and not broker.config.two_phase_commit:  # InitProducerId v6 is "unstable" (KIP-939)
            top = min(top, 5)
        out.append((key, reg.min_version, top))
    return out


def _unsigned_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def parse_request_header(frame: bytes, flexible: bool) -> tuple[str | None, int]:
    """(client id, offset of the body) for request header v1, or v2 when ``flexible``.

    Parsed here rather than by kafka-python, whose header decoder copies the whole frame
    (a megabyte of records on every produce request) just to read a few bytes.
    """
    pos = _REQUEST_PREFIX.size
    (length,) = struct.unpack_from(">h", frame, pos)
    pos += 2
    client_id = None
    if length >= 0:
        if pos + length > len(frame):
            raise ValueError("client id runs past the end of the request")
        client_id = frame[pos : pos + length].decode("utf-8")
        pos += length
    if flexible:
        count, pos = _unsigned_varint(frame, pos)
        for _ in range(count):
            _tag, pos = _unsigned_varint(frame, pos)
            size, pos = _unsigned_varint(frame, pos)
            pos += size
        if pos > len(frame):
            raise ValueError("tagged header fields run past the end of the request")
    return client_id, pos


_NULLABLE_TYPES = frozenset({"string", "bytes", "records"})


def null_in_non_nullable(message: object, fields: dict, version: int, path: str = "") -> str | None:
    """The first field that is null although the schema says it may not be, in this version.

    kafka-python decodes a -1 length as None whatever the schema says; Kafka's own reader
    throws ("non-nullable field ... was serialized as null") and the request never reaches a
    handler. Without this check a mutated request crashed handlers that trust the schema
    (found by scripts/fuzz_broker.py: AddPartitionsToTxn with null topics, AddOffsetsToTxn with
    a null group id).
    """
    for name, field in fields.items():
        if not field.for_version_q(version) or field.tagged_field_q(version):
            continue
        value = getattr(message, name, None)
        where = f"{path}{field.name}"
        if value is None:
            # Only strings, bytes, records, arrays and structs can be null on the wire (a zero
            # uuid also decodes as None and is legal).
            can_be_null = field.is_array() or field.is_struct() or field.type_str in _NULLABLE_TYPES
            if can_be_null and not field.nullable_for_version_q(version):
                return where
            continue
        if field.is_struct_array():
            for item in value:
                found = null_in_non_nullable(item, field.fields, version, f"{where}[].")
                if found is not None:
                    return found
        elif field.is_struct():
            found = null_in_non_nullable(value, field.fields, version, f"{where}.")
            if found is not None:
                return found
        elif field.is_array() and any(item is None for item in value):
            return f"{where}[]"
    return None


def response_header(correlation_id: int, api_key: int, flexible: bool) -> bytes:
    # ApiVersions responses always use header v0 so that any client can read them.
    if flexible and api_key != API_VERSIONS_KEY:
        return _INT32.pack(correlation_id) + b"\x00"
    return _INT32.pack(correlation_id)


class FrameProtocol(asyncio.BufferedProtocol):
    """Receives Kafka frames with as few copies as asyncio allows, and queues them whole.

    Small frames land in a 64 KiB scratch buffer and are copied out once; a frame larger than
    that (a produce request of a megabyte) gets its own buffer, and the kernel writes the rest of
    it straight there (``recv_into``), so big payloads are never copied on the way in. Reading
    pauses while more than a few frames wait, so a slow handler pushes back on the client.

    Limits, as Kafka has them: a declared frame size above ``socket.request.max.bytes`` (or,
    before SASL authentication, above ``sasl.server.max.receive.size``, 512 KiB) closes the
    connection; and a big frame's buffer **grows as its bytes arrive** (doubling from 256 KiB),
    never to the declared size up front, so a client that announces 100 MiB and sends nothing
    costs 256 KiB, not 100 MiB (ten such unauthenticated connections took the broker to 1 GB).
    """

    SCRATCH_BYTES = 64 * 1024
    BIG_START_BYTES = 256 * 1024
    _PAUSE_AT, _RESUME_AT = 16, 4

    def __init__(self, broker: BrokerSide) -> None:
        self.broker = broker
        self.handler: ConnectionHandler | None = None
        self._big_size = 0  # the declared size of the frame being received into _big
        self.transport: asyncio.Transport | None = None
        self.frames: deque[bytes | bytearray] = deque()
        self.bad_frame_size: int | None = None
        self.closed = False
        self._scratch = bytearray(self.SCRATCH_BYTES)
        self._filled = 0
        self._big: bytearray | None = None
        self._big_filled = 0
        self._reading_paused = False
        self._writing_paused = False
        self._frame_waiter: asyncio.Future | None = None
        self._write_waiter: asyncio.Future | None = None

    # ------------------------------------------------------------------ asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        limit = self.broker.config.max_connections
        if len(self.broker.connections) >= limit:
            # Kafka's acceptor waits for a free slot (ConnectionQuotas.waitForConnectionSlot):
            # the connection stays open, unread, and is served once another one closes.
            log.warning("holding a connection: %d connections open (max.connections=%d)",
                        len(self.broker.connections), limit)
            transport.pause_reading()
            self.broker.waiting_connections.append(self)
            return
        self._serve()

    def _serve(self) -> None:
        handler = ConnectionHandler(self.broker, self)
        self.handler = handler
        self.broker.connections.add(handler)  # counted now, before its task first runs
        handler.task = asyncio.get_running_loop().create_task(handler.serve())

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            if self._big_filled == len(self._big):  # full but the frame is not: grow (x2, capped)
                grow = min(len(self._big), self._big_size - len(self._big))
                while grow > 0:
                    step = min(grow, len(_ZEROS))
                    self._big.extend(memoryview(_ZEROS)[:step])
                    grow -= step
            return memoryview(self._big)[self._big_filled :]
        return memoryview(self._scratch)[self._filled :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled == self._big_size:
                big, self._big = self._big, None
                self._push(big)
            return
        self._filled += nbytes
        self._split_scratch()

    def frame_limit(self) -> int:
        """The largest frame accepted now: Kafka's SASL pre-authentication limit until the
        connection has authenticated, ``socket.request.max.bytes`` after."""
        config = self.broker.config
        handler = self.handler
        if handler is not None and not handler.conn.open_for_requests:
            return min(config.sasl_server_max_receive_size, config.socket_request_max_bytes)
        return config.socket_request_max_bytes

    def eof_received(self) -> bool:
        return False  # close the transport: a half-closed client sends no more requests

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wake("_frame_waiter")
        self._wake("_write_waiter")

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake("_write_waiter")

    # ------------------------------------------------------------------ framing

    def _split_scratch(self) -> None:
        data, pos, end = self._scratch, 0, self._filled
        while end - pos >= 4 and self.bad_frame_size is None:
            (size,) = _INT32.unpack_from(data, pos)
            if size < 0 or size > self.frame_limit():
                self.bad_frame_size = size
                self._wake("_frame_waiter")
                if self.transport is not None:
                    self.transport.pause_reading()  # read nothing more from a connection we close
                    self._reading_paused = True
                break
            if end - pos - 4 >= size:
                self._push(bytes(memoryview(data)[pos + 4 : pos + 4 + size]))
                pos += 4 + size
                continue
            if 4 + size > len(data):  # too big for the scratch buffer: receive the rest in place
                have = end - pos - 4
                # Start small and grow as bytes arrive (get_buffer): a declared size costs nothing.
                self._big = bytearray(min(size, max(self.BIG_START_BYTES, 2 * have)))
                self._big[:have] = memoryview(data)[pos + 4 : end]
                self._big_filled = have
                self._big_size = size
                pos = end
            break
        if pos:
            rest = end - pos
            data[:rest] = data[pos:end]
            self._filled = rest

    def _push(self, frame: bytes | bytearray) -> None:
        self.frames.append(frame)
        self._wake("_frame_waiter")
        if len(self.frames) >= self._PAUSE_AT and not self._reading_paused and self.transport is not None:
            self.transport.pause_reading()
            self._reading_paused = True

    def _wake(self, attribute: str) -> None:
        waiter = getattr(self, attribute)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        setattr(self, attribute, None)

    # ------------------------------------------------------------------ for the handler

    async def next_frame(self) -> bytes | bytearray | None:
        """The next whole frame, or None when the connection is over (closed or a bad frame size)."""
        while not self.frames:
            if self.closed or self.bad_frame_size is not None:
                return None
            self._frame_waiter = asyncio.get_running_loop().create_future()
            await self._frame_waiter
        frame = self.frames.popleft()
        if (
            self._reading_paused
            and len(self.frames) <= self._RESUME_AT
            and not self.closed
            and self.bad_frame_size is None
        ):
            self.transport.resume_reading()
            self._reading_paused = False
        return frame

    async def drain(self) -> None:
        """Wait while the transport's write buffer is over its high-water mark."""
        while self._writing_paused and not self.closed:
            self._write_waiter = asyncio.get_running_loop().create_future()
            await self._write_waiter


class ConnectionHandler:
    """Answers one client's frames, one at a time, in order."""

    def __init__(self, broker: BrokerSide, protocol: FrameProtocol) -> None:
        self.broker = broker
        self.protocol = protocol
        self.transport = protocol.transport
        peer = self.transport.get_extra_info("peername")
        self.task: asyncio.Task | None = None
        self.conn = Connection(
            peer=f"{peer[0]}:{peer[1]}" if peer else "?", sasl_required=broker.sasl_enabled
        )

    async def serve(self) -> None:
        self.broker.connections.add(self)
        try:
            await self.run()
        except asyncio.CancelledError:
            pass  # the broker is stopping
        finally:
            self.broker.connections.discard(self)
            self.transport.close()
            waiting = self.broker.waiting_connections
            while waiting and len(self.broker.connections) < self.broker.config.max_connections:
                held = waiting.popleft()
                if not held.closed:
                    held.transport.resume_reading()
                    held._serve()

    async def run(self) -> None:
        protocol = self.protocol
        try:
            while (frame := await protocol.next_frame()) is not None:
                try:
                    await self.handle_frame(frame)
                except CloseConnection as close:
                    log.info("%s: closing connection: %s", self.conn.peer, close)
                    return
                await protocol.drain()
            if protocol.bad_frame_size is not None:
                log.info(
                    "%s: frame size %d out of range (limit %d%s); closing",
                    self.conn.peer,
                    protocol.bad_frame_size,
                    protocol.frame_limit(),
                    "" if self.conn.open_for_requests else ", before SASL authentication",
                )
        except ConnectionError:
            return  # the client went away while we were answering
        except Exception:
            log.exception("%s: unexpected error; closing the connection", self.conn.peer)

    def send(self, payload: bytes | bytearray, header: bytes) -> None:
        if self.transport.is_closing():
            return
        self.transport.write(_INT32.pack(len(header) + len(payload)) + header)
        self.transport.write(payload)

    async def handle_frame(self, frame: bytes) -> None:
        if self.conn.sasl_raw:
            from .sasl import authenticate_raw_token

            self.send(authenticate_raw_token(self.broker, self.conn, frame), b"")
            return
        if len(frame) < _REQUEST_PREFIX.size:
            raise CloseConnection(f"request of {len(frame)} bytes is too short for a header")
        api_key, api_version, correlation_id = _REQUEST_PREFIX.unpack_from(frame, 0)
        reg = HANDLERS.get(api_key)
        top = self.broker.api_max_versions().get(api_key)
        if api_key == API_VERSIONS_KEY and (reg is None or top is None or api_version > top):
            self.send(self.unsupported_api_versions_body(), response_header(correlation_id, api_key, False))
            return
        if reg is None or top is None or not reg.min_version <= api_version <= top:
            raise CloseConnection(f"unsupported API key {api_key} version {api_version}")
        if not self.conn.open_for_requests and api_key not in (
            API_VERSIONS_KEY,
            SASL_HANDSHAKE_KEY,
            SASL_AUTHENTICATE_KEY,
        ):
            raise CloseConnection(f"API key {api_key} before SASL authentication")
        try:
            client_id, body_start = parse_request_header(
                frame, reg.request_class.flexible_version_q(api_version)
            )
            request = reg.request_class.decode(memoryview(frame)[body_start:], version=api_version)
            null_field = null_in_non_nullable(request, reg.request_class.fields, api_version)
        except Exception as exc:
            raise CloseConnection(f"cannot decode API key {api_key} v{api_version}: {exc}") from exc
        if null_field is not None:  # Kafka's schema reader refuses these before any handler runs
            raise CloseConnection(
                f"API key {api_key} v{api_version}: non-nullable field {null_field} was serialized as null"
            )
        ctx = RequestContext(
            broker=self.broker,
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
            client_id=client_id,
            principal=self.conn.principal,
            connection=self.conn,
        )
        try:
            response = reg.handler(ctx, request)
            if inspect.isawaitable(response):
                response = await response
        except CloseConnection as close:
            if close.response is not None:
                self._send_response(close.response, api_key, api_version, correlation_id, reg)
                await self.protocol.drain()
            raise
        if response is None:
            return
        self._send_response(response, api_key, api_version, correlation_id, reg)

    def _send_response(self, response, api_key: int, api_version: int, correlation_id: int, reg) -> None:
        body = response.encode(version=api_version)
        flexible = reg.response_class.flexible_version_q(api_version)
        self.send(body, response_header(correlation_id, api_key, flexible))

    def unsupported_api_versions_body(self) -> bytes:
        """KIP-511, as Kafka's ``ApiVersionsRequest.getErrorResponse``: only ApiVersions' own
        range, so the client retries with a version both sides speak; the full list follows."""
        keys = [
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=mn, max_version=mx)
            for k, mn, mx in advertised_versions(self.broker)
            if k == 18
        ]
        return ApiVersionsResponse(error_code=codes.UNSUPPORTED_VERSION, api_keys=keys).encode(version=0)
