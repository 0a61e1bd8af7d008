"""SASL/PLAIN on the listener when the broker has an ACL file (SASL_PLAINTEXT, as Kafka would).

Users and passwords come from the ACL file's ``users`` object. A wrong password gets
SASL_AUTHENTICATION_FAILED and the connection is closed, as Kafka does. Passwords are never
logged.
"""

from __future__ import annotations

import hmac
import logging

from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from . import codes
from .api import RequestContext, handles
from .connection import CloseConnection, Connection

log = logging.getLogger(__name__)

MECHANISMS = ["PLAIN"]


def check_plain(users: dict[str, str], token: bytes) -> str | None:
    """The authenticated user name for a PLAIN token (authzid NUL user NUL password), or None."""
    parts = bytes(token).split(b"\x00")
    if len(parts) != 3:
        return None
    authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
    expected = users.get(user)
    if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
        return None
    if authzid and authzid != user:
        return None
    return user


def _authenticate(broker, conn: Connection, token: bytes) -> str | None:
    user = check_plain(broker.users, token)
    if user is None:
        log.info("%s: SASL/PLAIN authentication failed", conn.peer)
        return f"Authentication failed: invalid credentials with SASL mechanism {conn.sasl_mechanism}"
    conn.authenticated = True
    conn.principal = f"User:{user}"
    return None


def authenticate_raw_token(broker, conn: Connection, token: bytes) -> bytes:
    """SaslHandshake v0 clients send the PLAIN token as a bare frame and expect an empty one back."""
    conn.sasl_raw = False
    failure = _authenticate(broker, conn, token)
    if failure:
        raise CloseConnection(failure)
    return b""


@handles(SaslHandshakeRequest, SaslHandshakeResponse, max_version=1)
def sasl_handshake(ctx: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
    conn: Connection = ctx.connection
    if not ctx.broker.sasl_enabled or conn.authenticated:
        return SaslHandshakeResponse(error_code=codes.ILLEGAL_SASL_STATE, mechanisms=MECHANISMS)
    if request.mechanism not in MECHANISMS:
        return SaslHandshakeResponse(error_code=codes.UNSUPPORTED_SASL_MECHANISM, mechanisms=MECHANISMS)
    conn.sasl_mechanism = request.mechanism
    conn.sasl_raw = ctx.api_version == 0
    return SaslHandshakeResponse(error_code=codes.NONE, mechanisms=MECHANISMS)


@handles(SaslAuthenticateRequest, SaslAuthenticateResponse, max_version=2)
def sasl_authenticate(ctx: RequestContext, request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    conn: Connection = ctx.connection
    if conn.sasl_mechanism is None or conn.authenticated:
        raise CloseConnection(
            "SaslAuthenticate without a handshake",
            SaslAuthenticateResponse(
                error_code=codes.ILLEGAL_SASL_STATE,
                error_message="Unexpected SaslAuthenticate request",
                auth_bytes=b"",
            ),
        )
    failure = _authenticate(ctx.broker, conn, request.auth_bytes)
    if failure:
        raise CloseConnection(
            "authentication failed",
            SaslAuthenticateResponse(
                error_code=codes.SASL_AUTHENTICATION_FAILED, error_message=failure, auth_bytes=b""
            ),
        )
    return SaslAuthenticateResponse(
        error_code=codes.NONE, error_message=None, auth_bytes=b"", session_lifetime_ms=0
    )
