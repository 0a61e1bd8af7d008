"""A loopback OAuth 2 / OIDC identity provider for OAUTHBEARER test clusters (never for production).

Kafka 4.4's broker validates JWTs against a JWKS endpoint (``OAuthBearerValidatorCallbackHandler``);
clients fetch tokens from a token endpoint by the client-credentials grant (librdkafka's
``sasl.oauthbearer.method=oidc`` sends HTTP Basic auth, the provider's kafka-python token
provider sends the credentials in the form). This serves both on 127.0.0.1: ``/jwks`` (the
public key of an RSA key made per run) and ``/token`` (an RS256 JWT whose ``sub`` is the client
id, so the Kafka principal is ``User:<client id>``). Clients are registered with :meth:`add_client`.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

__all__ = ["AUDIENCE", "OidcServer"]

AUDIENCE = "kafka"
TOKEN_LIFETIME_S = 300


def _b64(number: int) -> str:
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class OidcServer:
    """``with OidcServer() as idp:`` -> ``idp.jwks_url``, ``idp.token_url``, ``idp.add_client(id)``."""

    def __init__(self) -> None:
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._kid = secrets.token_hex(8)
        self._clients: dict[str, str] = {}
        self._lifetimes: dict[str, int] = {}
        self._skews: dict[str, int] = {}
        self.issued = 0
        self.issued_to: dict[str, int] = {}  # tokens issued per client id
        # (client id, how it authenticated: "basic" is librdkafka's oidc, "form" the provider's own)
        self.fetches: list[tuple[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet: tests read results, not access logs
                return

            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/jwks":
                    self.send_error(404)
                    return
                self._json(200, server.jwks())

            def do_POST(self) -> None:
                if self.path.split("?")[0] != "/token":
                    self.send_error(404)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                client_id, secret = form.get("client_id"), form.get("client_secret")
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Basic "):
                    decoded = base64.b64decode(auth[6:]).decode()
                    client_id, _, secret = decoded.partition(":")
                    client_id, secret = urllib.parse.unquote(client_id), urllib.parse.unquote(secret)
                if form.get("grant_type") != "client_credentials" or not client_id:
                    self._json(400, {"error": "unsupported_grant_type"})
                    return
                if server._clients.get(client_id) != secret:
                    self._json(401, {"error": "invalid_client"})
                    return
                server.fetches.append((client_id, "basic" if auth.startswith("Basic ") else "form"))
                lifetime = server._lifetimes.get(client_id, TOKEN_LIFETIME_S)
                skew = server._skews.get(client_id, 0)
                self._json(
                    200, server.token_response(client_id, form.get("scope"), lifetime_s=lifetime, skew_s=skew)
                )

            def _json(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        port = self._httpd.server_address[1]
        self.issuer = f"http://127.0.0.1:{port}"
        self.jwks_url = f"{self.issuer}/jwks"
        self.token_url = f"{self.issuer}/token"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="oidc-idp", daemon=True)
        self._thread.start()

    def add_client(
        self,
        client_id: str,
        secret: str | None = None,
        *,
        lifetime_s: int = TOKEN_LIFETIME_S,
        skew_s: int = 0,
    ) -> str:
        """Register a client (``lifetime_s`` < 0 issues expired tokens; ``skew_s`` dates ``iat`` and
        ``nbf`` that far ahead, as an identity provider with a fast clock does); returns its secret."""
        self._lifetimes[client_id] = lifetime_s
        self._skews[client_id] = skew_s
        self._clients[client_id] = secret or secrets.token_urlsafe(18)
        return self._clients[client_id]

    def jwks(self) -> dict[str, Any]:
        numbers = self._key.public_key().public_numbers()
        return {
            "keys": [
                {
                    "kty": "RSA",
                    "use": "sig",
                    "alg": "RS256",
                    "kid": self._kid,
                    "n": _b64(numbers.n),
                    "e": _b64(numbers.e),
                }
            ]
        }

    def token_response(
        self, subject: str, scope: str | None = None, *, lifetime_s: int = TOKEN_LIFETIME_S, skew_s: int = 0
    ) -> dict:
        now = int(time.time()) + skew_s
        claims = {
            "sub": subject,
            "iss": self.issuer,
            "aud": AUDIENCE,
            "iat": now,
            "nbf": now,
            "exp": now + lifetime_s,
            "scope": scope or "kafka",
        }
        token = jwt.encode(claims, self._key, algorithm="RS256", headers={"kid": self._kid})
        self.issued += 1
        self.issued_to[subject] = self.issued_to.get(subject, 0) + 1
        return {"access_token": token, "token_type": "Bearer", "expires_in": max(lifetime_s, 1)}

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def __enter__(self) -> OidcServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
