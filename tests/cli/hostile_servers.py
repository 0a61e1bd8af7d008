"""Loopback servers that misbehave the ways a broken network or broker does, for deadline tests.

* :func:`silent_server`: accepts every connection and never sends a byte (a hung broker, a
  black-holing proxy). The client's bootstrap never completes.
* :func:`trickle_server`: answers every request with a frame header that announces a large
  response and then sends one byte every ``interval_s`` (a broker behind a saturated link):
  the connection is never idle, so idle timeouts never fire, yet no answer ever completes.

Both run on a daemon thread, on a free loopback port, and stop when the context exits.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
import time
from collections.abc import Iterator


@contextlib.contextmanager
def _serve(on_readable, on_tick=None, tick_s: float = 0.05) -> Iterator[str]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.setblocking(False)
    stop = threading.Event()
    conns: list[socket.socket] = []

    def loop() -> None:
        sel = selectors.DefaultSelector()
        sel.register(listener, selectors.EVENT_READ)
        while not stop.is_set():
            for key, _ in sel.select(tick_s):
                if key.fileobj is listener:
                    with contextlib.suppress(OSError):
                        conn, _ = listener.accept()
                        conn.setblocking(False)
                        conns.append(conn)
                        sel.register(conn, selectors.EVENT_READ)
                else:
                    conn = key.fileobj
                    try:
                        data = conn.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(conn)
                        conn.close()
                        conns.remove(conn)
                    else:
                        on_readable(conn, data)
            if on_tick is not None:
                on_tick(list(conns))
        sel.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in conns:
            conn.close()
        listener.close()


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """``host:port`` of a server that reads requests and never answers."""
    with _serve(lambda conn, data: None) as address:
        yield address


@contextlib.contextmanager
def trickle_server(interval_s: float = 0.2) -> Iterator[str]:
    """``host:port`` of a server whose answers arrive a byte at a time, forever."""
    started: dict[socket.socket, float] = {}

    def on_readable(conn: socket.socket, data: bytes) -> None:
        if conn not in started and len(data) >= 12:
            (correlation_id,) = struct.unpack_from(">i", data, 8)
            # A 1 MiB response is announced; its correlation id matches, so the client waits for it.
            with contextlib.suppress(OSError):
                conn.send(struct.pack(">ii", 1 << 20, correlation_id))
            started[conn] = time.monotonic()

    def on_tick(conns: list[socket.socket]) -> None:
        now = time.monotonic()
        for conn in conns:
            last = started.get(conn)
            if last is not None and now - last >= interval_s:
                with contextlib.suppress(OSError):
                    conn.send(b"\x00")
                started[conn] = now

    with _serve(on_readable, on_tick) as address:
        yield address
