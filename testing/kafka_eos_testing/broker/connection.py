"""A client connection's state as the handlers and the SASL gate see it, and how they close it.

Apart from ``server.py`` (which owns the sockets and imports these) so that the SASL handlers
can use them without importing the server that calls them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .api import ANONYMOUS


class CloseConnection(Exception):
    """Raised by a handler (or the SASL gate) to answer, if a response is given, then close."""

    def __init__(self, reason: str, response=None) -> None:
        super().__init__(reason)
        self.response = response


@dataclass
class Connection:
    """Per-connection state the handlers may look at (via ``RequestContext.connection``)."""

    peer: str
    sasl_required: bool
    authenticated: bool = False
    sasl_mechanism: str | None = None
    sasl_raw: bool = False  # SaslHandshake v0: the next frame is a raw PLAIN token
    principal: str = ANONYMOUS

    @property
    def open_for_requests(self) -> bool:
        return not self.sasl_required or self.authenticated
