"""OAUTHBEARER tokens for the Python clients: the OAuth 2 client-credentials grant, and the clock check.

librdkafka fetches its own tokens (``sasl.oauthbearer.method=oidc``); kafka-python (the admin
and wire paths) asks a token provider. :class:`ClientCredentialsTokenProvider` is that provider:
it posts the client-credentials grant to the identity provider's token endpoint, and refuses a
token issued in the future (beyond :data:`CLOCK_SKEW_S`) by naming the clocks to fix, instead of
the broker's bare authentication failure. The client secret is never logged or shown.
"""

from __future__ import annotations

from airflow_provider_kafka_eos.kafka.errors import AuthenticationError, ConfigError


class ClientCredentialsTokenProvider:
    """OAuth 2 client-credentials tokens for kafka-python's OAUTHBEARER (librdkafka's ``oidc`` method).

    A kafka-python ``AbstractTokenProvider`` (registered as one where the provider is built).

    Caches the token until shortly before it expires. The secret lives only in this object
    (its repr hides it).
    """

    def __init__(
        self, *, token_endpoint_url: str, client_id: str, client_secret: str, scope: str | None = None
    ):
        self._url = token_endpoint_url
        self._client_id = client_id
        self._secret = client_secret
        self._scope = scope
        self._token: str | None = None
        self._expires_at = 0.0

    def token(self) -> str:
        import json
        import time
        import urllib.error
        import urllib.parse
        import urllib.request

        if self._token and time.time() < self._expires_at - 30:
            return self._token
        form = {
            "grant_type": "client_credentials",
            "client_id": self._client_id,
            "client_secret": self._secret,
        }
        if self._scope:
            form["scope"] = str(self._scope)
        if urllib.parse.urlparse(self._url).scheme not in ("https", "http"):
            # urllib would also open file: and ftp: URLs; a token endpoint is HTTP(S) only.
            raise ConfigError("key 'sasl.oauthbearer.token.endpoint.url' must be an http(s) URL")
        request = urllib.request.Request(  # noqa: S310 (scheme checked just above)
            self._url, data=urllib.parse.urlencode(form).encode(), method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (scheme checked)
                payload = json.loads(response.read())
            token = payload["access_token"]
        except urllib.error.HTTPError as exc:
            raise AuthenticationError(
                f"the token endpoint {self._url} refused client id {self._client_id!r} "
                f"(HTTP {exc.code} {exc.reason}); check sasl.oauthbearer.client.id / .client.secret"
            ) from None
        except (OSError, ValueError, KeyError) as exc:
            reason = getattr(exc, "reason", None) or type(exc).__name__
            raise AuthenticationError(
                f"no token from the token endpoint {self._url} ({reason}); check "
                "sasl.oauthbearer.token.endpoint.url and that the identity provider is up"
            ) from None
        _check_token_clock(token, self._url, self._client_id)
        self._token = token
        self._expires_at = time.time() + float(payload.get("expires_in", 300))
        return self._token

    def extensions(self) -> dict:
        return {}

    def __repr__(self) -> str:
        return f"ClientCredentialsTokenProvider(url={self._url!r}, client_id={self._client_id!r}, secret=***)"


# Kafka's broker accepts tokens whose iat/nbf lie this far ahead of its clock
# (sasl.oauthbearer.clock.skew.seconds, default 30).
CLOCK_SKEW_S = 30


def _check_token_clock(token: str, url: str, client_id: str) -> None:
    """A JWT whose ``nbf``/``iat`` lie in the future, or whose ``exp`` is past, is refused here,
    naming the clocks, instead of being sent for the broker's bare "invalid_token" (or a hang while
    the client retries). Opaque (non-JWT) tokens are not inspected."""
    import base64
    import json
    import time

    try:
        body = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (IndexError, ValueError):
        return
    if not isinstance(claims, dict):
        return
    now = time.time()
    for claim in ("nbf", "iat"):
        value = claims.get(claim)
        if isinstance(value, (int, float)) and value > now + CLOCK_SKEW_S:
            raise AuthenticationError(
                f"the token endpoint {url} issued client id {client_id!r} a token whose {claim} is "
                f"{value - now:.0f} s ahead of this machine's clock (more than the broker's "
                f"{CLOCK_SKEW_S} s skew allowance): the clocks of this machine, the identity provider or "
                "the brokers disagree; sync them (NTP), see kafka-eos-txn runbook sasl-authentication"
            )
    exp = claims.get("exp")
    if isinstance(exp, (int, float)) and exp <= now:
        raise AuthenticationError(
            f"the token endpoint {url} issued client id {client_id!r} a token that expired "
            f"{now - exp:.0f} s ago by this machine's clock: the identity provider's clock or its token "
            "lifetime is wrong, see kafka-eos-txn runbook sasl-authentication"
        )
