"""A loopback TLS server (Python's ssl) for the certificate failure cases: no Kafka needed."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def tls_server(cert: Path, key: Path) -> Iterator[str]:
    """Accept connections on 127.0.0.1 and run each TLS handshake (then close); yields HOST:PORT."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            conn.settimeout(2)
            with contextlib.suppress(OSError), ctx.wrap_socket(conn, server_side=True) as tls:
                tls.recv(1)
            conn.close()

    thread = threading.Thread(target=serve, name="loopback-tls", daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()
