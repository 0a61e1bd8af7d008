"""TLS and SASL failures named: which broker, what was refused, what to do (one owner of the rule).

A refused handshake never heals by waiting, yet both client libraries retry it until their
connect timeout and then report "no broker answered". The client paths (``wire.py`` for
kafka-python, ``watch_librdkafka`` for confluent-kafka) stop at the first such failure and ask
:func:`explain` what it was. ``explain`` reads the failure the client saw and, where the client's
words are ambiguous (librdkafka says "certificate verify failed" for an untrusted CA, an expired
certificate and a wrong host name alike), asks the broker itself with a bounded probe (Python's
``ssl`` with the same CA file, or one plaintext ApiVersions request): under 1 s in all.

Messages name the address and the setting to change; never a password, a key or a token.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import (
    AuthenticationError,
    ConfigError,
    KafkaEosError,
    SecurityProtocolMismatchError,
    TlsCertificateError,
)

__all__ = [
    "PROBE_TIMEOUT_S",
    "check_client_files",
    "early_refusal",
    "explain",
    "explain_librdkafka",
    "init_transactions_watched",
    "is_handshake_refusal",
    "is_security_failure",
    "speaks_tls",
]

PROBE_TIMEOUT_S = 0.5
_HOSTNAME_MISMATCH = {62, 64}  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
_EXPIRED = {10}  # X509_V_ERR_CERT_HAS_EXPIRED
_NOT_YET_VALID = {9}
# What a TLS client sees when the other end does not speak TLS (Kafka closes, or answers bytes
# that are no TLS record).
_NOT_TLS_REASONS = {
    "WRONG_VERSION_NUMBER",
    "UNEXPECTED_EOF_WHILE_READING",
    "RECORD_LAYER_FAILURE",
    "PACKET_LENGTH_TOO_LONG",
    "UNKNOWN_PROTOCOL",
    "HTTP_REQUEST",
}


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.strip().rpartition(":")
    return host.strip("[]"), int(port)


def _setting(config: Mapping[str, Any], key: str, default: Any = None) -> Any:
    return config.get(key, default)


def _names(cert: Mapping[str, Any]) -> list[str]:
    names = [value for kind, value in cert.get("subjectAltName", ()) if kind in ("DNS", "IP Address")]
    if not names:
        names = [value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"]
    return names


def _tls_context(config: Mapping[str, Any], *, verify: bool) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if verify:
        cafile = _setting(config, "ssl.ca.location")
        if cafile:
            ctx.load_verify_locations(cafile)
        else:
            ctx.load_default_certs()
        ctx.check_hostname = (
            str(_setting(config, "ssl.endpoint.identification.algorithm", "https")).lower() != "none"
        )
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    cert, key = _setting(config, "ssl.certificate.location"), _setting(config, "ssl.key.location")
    if cert:  # an unusable key is the client's own error to report; the probe looks at the server
        with contextlib.suppress(OSError, ssl.SSLError):
            ctx.load_cert_chain(cert, key, _setting(config, "ssl.key.password"))
    return ctx


def _handshake(address: str, ctx: ssl.SSLContext, deadline: float) -> dict[str, Any]:
    """One TLS handshake; the peer certificate (decoded when verified) or the ssl error raised."""
    host, port = _split(address)
    timeout = max(0.05, deadline - time.monotonic())
    with (
        socket.create_connection((host, port), timeout=timeout) as raw,
        ctx.wrap_socket(raw, server_hostname=host) as tls,
    ):
        return tls.getpeercert() or {}


def _answers_plaintext(address: str, deadline: float) -> bool:
    """Whether ``address`` answers a plaintext ApiVersions v0 request (so it is no TLS port)."""
    host, port = _split(address)
    client_id = b"kafka-eos-probe"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=max(0.05, deadline - time.monotonic())) as sock:
            sock.sendall(struct.pack(">i", len(body)) + body)
            head = b""
            while len(head) < 8:
                chunk = sock.recv(8 - len(head))
                if not chunk:
                    return False
                head += chunk
    except OSError:
        return False
    size, correlation = struct.unpack(">ii", head)
    return correlation == 1 and 0 < size < 1 << 20


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _sasl_handshake(address: str, config: Mapping[str, Any], mechanism: str) -> tuple[int, list[str]] | None:
    """SaslHandshake v1 for ``mechanism``: ``(error code, enabled mechanisms)``, or None when the
    listener closed or sent no answer (bounded by :data:`PROBE_TIMEOUT_S`)."""
    host, port = _split(address)
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    client_id, mech = b"kafka-eos-probe", mechanism.encode()
    body = struct.pack(">hhih", 17, 1, 1, len(client_id)) + client_id + struct.pack(">h", len(mech)) + mech
    tls = str(_setting(config, "security.protocol", "")).upper().endswith("SSL")
    try:
        with contextlib.ExitStack() as stack:
            sock = stack.enter_context(
                socket.create_connection((host, port), timeout=max(0.05, deadline - time.monotonic()))
            )
            if tls:
                sock = stack.enter_context(
                    _tls_context(config, verify=False).wrap_socket(sock, server_hostname=host)
                )
            sock.sendall(struct.pack(">i", len(body)) + body)
            size, correlation = struct.unpack(">ii", _recv_exactly(sock, 8))
            if correlation != 1 or not 0 < size < 1 << 16:
                return None
            payload = _recv_exactly(sock, size - 4)
    except (OSError, ConnectionError, ValueError):
        return None
    error_code, count = struct.unpack(">hi", payload[:6])
    mechanisms, offset = [], 6
    for _ in range(max(0, count)):
        (length,) = struct.unpack(">h", payload[offset : offset + 2])
        mechanisms.append(payload[offset + 2 : offset + 2 + length].decode(errors="replace"))
        offset += 2 + length
    return error_code, mechanisms


def early_refusal(address: str, config: Mapping[str, Any]) -> KafkaEosError | None:
    """After a first unexplained close: the refusal the listener states when asked (a TLS port met by
    a plaintext client, a SASL mechanism it does not enable, no SASL at all, or an enabled mechanism
    and so refused credentials), else None (then it was no refusal: the client retries)."""
    protocol = str(_setting(config, "security.protocol", "PLAINTEXT")).upper()
    if protocol in ("PLAINTEXT", "SASL_PLAINTEXT") and speaks_tls(address, config):
        return _plaintext_at_tls_port(address, protocol)
    if protocol.startswith("SASL"):
        # The listener is up and enables the mechanism, yet closed during the SASL exchange: Kafka
        # does exactly that after refusing credentials (kafka-python may see the close first).
        return _sasl_probe(address, config)
    return None


def _plaintext_at_tls_port(address: str, protocol: str) -> KafkaEosError:
    return SecurityProtocolMismatchError(
        f"{address} is a TLS listener but security.protocol is {protocol}: set security.protocol "
        f"to {'SASL_SSL' if protocol.startswith('SASL') else 'SSL'} and ssl.ca.location to the CA "
        f"of the broker certificate (see it: openssl s_client -connect {address} -showcerts </dev/null)"
    )


def _sasl_probe(address: str, config: Mapping[str, Any]) -> KafkaEosError | None:
    """A SASL client refused without a reason it could read: ask the listener which refusal it was."""
    mechanism = str(_setting(config, "sasl.mechanisms") or _setting(config, "sasl.mechanism") or "GSSAPI")
    answer = _sasl_handshake(address, config, mechanism.upper())
    if answer is None:
        return None
    from airflow_provider_kafka_eos.kafka.protocol.error_codes import (
        ILLEGAL_SASL_STATE,
        NONE,
        UNSUPPORTED_SASL_MECHANISM,
    )

    code, enabled = answer
    if code == UNSUPPORTED_SASL_MECHANISM:
        return _mechanism_error(address, config, RuntimeError(f"the listener enables {', '.join(enabled)}"))
    if code == ILLEGAL_SASL_STATE:  # a listener without SASL
        return _no_sasl_error(address, config)
    if code == NONE:
        return _credentials_error(address, config, RuntimeError("authentication failed"))
    return None


def speaks_tls(address: str, config: Mapping[str, Any], deadline: float | None = None) -> bool:
    """Whether ``address`` completes a TLS handshake (unverified; bounded by :data:`PROBE_TIMEOUT_S`)."""
    deadline = deadline if deadline is not None else time.monotonic() + PROBE_TIMEOUT_S
    try:
        _handshake(address, _tls_context(config, verify=False), deadline)
    except (OSError, ValueError):
        return False
    return True


def _certificate_error(
    address: str, config: Mapping[str, Any], err: ssl.SSLCertVerificationError
) -> KafkaEosError:
    host, _ = _split(address)
    cafile = _setting(config, "ssl.ca.location") or "the system CA store"
    code = getattr(err, "verify_code", None)
    message = getattr(err, "verify_message", None) or "certificate verify failed"
    chain_cmd = f"openssl s_client -connect {address} -servername {host} -showcerts </dev/null"
    if code in _HOSTNAME_MISMATCH:
        names = "unknown"
        try:  # the chain is trusted (else the CA error comes first): read its names
            relaxed = _tls_context(config, verify=True)
            relaxed.check_hostname = False
            names = (
                ", ".join(_names(_handshake(address, relaxed, time.monotonic() + PROBE_TIMEOUT_S))) or "none"
            )
        except (OSError, ValueError):
            pass
        return TlsCertificateError(
            f"the TLS certificate of {address} does not name the host {host!r} (it names: {names}); "
            "connect with one of those names in bootstrap.servers, or have the broker certificate "
            f"re-issued with {host} among its subject alternative names (see them: {chain_cmd})"
        )
    if code in _EXPIRED or code in _NOT_YET_VALID:
        return TlsCertificateError(
            f"the TLS certificate of {address} is not valid now ({message}); the broker needs a "
            f"renewed certificate (check the dates: {chain_cmd} | openssl x509 -noout -dates)"
        )
    return TlsCertificateError(
        f"the TLS certificate of {address} is not trusted ({message}) by {cafile}; set "
        "ssl.ca.location to the CA that signed the broker certificate "
        f"(see the chain: {chain_cmd})"
    )


def _tls_probe(address: str, config: Mapping[str, Any]) -> KafkaEosError | None:
    """Ask the broker what is wrong with TLS to it (bounded by :data:`PROBE_TIMEOUT_S`)."""
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    try:
        _handshake(address, _tls_context(config, verify=True), deadline)
    except ssl.SSLCertVerificationError as err:
        return _certificate_error(address, config, err)
    except ssl.SSLError as err:
        return _tls_error(address, config, err, deadline)
    except OSError:
        return None
    return None


def _ssl_reason(exc: BaseException) -> str | None:
    """OpenSSL's reason of an ssl error, also when a client library kept only its text ("[SSL: X] ...")."""
    if isinstance(exc, ssl.SSLError):
        return getattr(exc, "reason", None) or type(exc).__name__
    text = str(exc)
    if "[SSL: " in text:
        return text.split("[SSL: ", 1)[1].split("]", 1)[0]
    return None


def _tls_error(
    address: str, config: Mapping[str, Any], err: BaseException, deadline: float
) -> KafkaEosError | None:
    reason = _ssl_reason(err) or ""
    if isinstance(err, ssl.SSLEOFError) or reason in _NOT_TLS_REASONS or "EOF" in str(err):
        if _answers_plaintext(address, deadline):
            return SecurityProtocolMismatchError(
                f"{address} is a plaintext listener (it answered a plaintext request) but "
                f"security.protocol is {_setting(config, 'security.protocol')}: set security.protocol to "
                "PLAINTEXT or SASL_PLAINTEXT, or use the broker's TLS listener port "
                "(the broker's listeners= and listener.security.protocol.map show which port is which)"
            )
        return SecurityProtocolMismatchError(
            f"{address} closed the connection during the TLS handshake: it is most likely not a TLS "
            f"listener (security.protocol is {_setting(config, 'security.protocol')}); check the port "
            f"against the broker's listener.security.protocol.map (try: openssl s_client -connect {address})"
        )
    if "CERTIFICATE_REQUIRED" in reason or "BAD_CERTIFICATE" in reason or "UNKNOWN_CA" in reason:
        return _client_certificate_error(address, config)
    return None


def _client_certificate_error(address: str, config: Mapping[str, Any]) -> KafkaEosError:
    has_cert = bool(_setting(config, "ssl.certificate.location"))
    return TlsCertificateError(
        f"{address} requires a client certificate (mutual TLS) and refused "
        + ("ours (not signed by a CA the broker trusts)" if has_cert else "the connection without one")
        + "; set ssl.certificate.location and ssl.key.location to a certificate signed by the "
        "broker's ssl.truststore CA"
    )


def is_handshake_refusal(failure: BaseException) -> bool:
    """Whether a kafka-python connection failure is a TLS or SASL refusal (retrying cannot help)."""
    return any(
        _ssl_reason(exc) is not None
        or isinstance(exc, KafkaEosError)  # e.g. the OAUTHBEARER token provider's named refusal
        or type(exc).__name__
        in ("UnsupportedSaslMechanismError", "IllegalSaslStateError", "KafkaConfigurationError")
        for exc in _chain(failure)
    )


def explain(
    address: str, config: Mapping[str, Any], failure: BaseException | None = None
) -> KafkaEosError | None:
    """The named error for a connection to ``address`` that failed with ``failure`` (librdkafka-style
    ``config``), or None when the failure is not a TLS / SASL refusal (then it is reachability)."""
    protocol = str(_setting(config, "security.protocol", "PLAINTEXT")).upper()
    for exc in _chain(failure):
        name = type(exc).__name__
        if isinstance(exc, KafkaEosError):
            return exc.with_traceback(None)
        if name == "KafkaConfigurationError":
            return ConfigError(f"kafka-python refused the connection settings for {address}: {exc}")
        if isinstance(exc, ssl.SSLCertVerificationError):
            return _certificate_error(address, config, exc)
        if _ssl_reason(exc) is not None:
            return _tls_error(address, config, exc, time.monotonic() + PROBE_TIMEOUT_S) or _tls_probe(
                address, config
            )
        if name in ("SaslAuthenticationFailedError",):
            return _credentials_error(address, config, exc)
        if name == "UnsupportedSaslMechanismError":
            return _mechanism_error(address, config, exc)
        if name == "IllegalSaslStateError":
            return _no_sasl_error(address, config)
    if protocol in ("SSL", "SASL_SSL"):
        # kafka-python says "socket disconnected" only after its TLS handshake succeeded.
        handshake_done = any("socket disconnected" in str(exc) for exc in _chain(failure))
        named = None if handshake_done else _tls_probe(address, config)
        if named is None and protocol == "SASL_SSL":
            named = _sasl_probe(address, config)
        return named
    if speaks_tls(address, config):
        return _plaintext_at_tls_port(address, protocol)
    return _sasl_probe(address, config) if protocol == "SASL_PLAINTEXT" else None


def _credentials_error(address: str, config: Mapping[str, Any], exc: BaseException) -> KafkaEosError:
    user = _setting(config, "sasl.username") or "(none)"
    mechanism = _setting(config, "sasl.mechanisms") or _setting(config, "sasl.mechanism") or "PLAIN"
    if str(mechanism).upper() == "OAUTHBEARER":
        detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else "no reason given"
        return AuthenticationError(
            f"{address} refused the OAUTHBEARER token of client id "
            f"{_setting(config, 'sasl.oauthbearer.client.id')!r} ({detail}): it is expired, for another "
            "audience or issuer, or not signed by a key of the broker's JWKS "
            "(sasl.oauthbearer.jwks.endpoint.url, .expected.audience, .expected.issuer); check the token "
            "endpoint and the clocks of the client, the identity provider and the broker"
        )
    return AuthenticationError(
        f"{address} refused the credentials of SASL user {user!r} ({mechanism}): the password is "
        "wrong or the user does not exist for this mechanism; check sasl.username / sasl.password "
        "(or $KAFKA_EOS_SASL_PASSWORD), and for SCRAM that the user has credentials "
        "(kafka-configs.sh --describe --entity-type users)"
    )


def _mechanism_error(address: str, config: Mapping[str, Any], exc: BaseException) -> KafkaEosError:
    mechanism = _setting(config, "sasl.mechanisms") or _setting(config, "sasl.mechanism") or "PLAIN"
    detail = str(exc).strip()
    return AuthenticationError(
        f"SASL mechanism {mechanism} is not enabled on the listener at {address} ({detail[:200]}); set "
        "sasl.mechanism to one the listener enables (its sasl.enabled.mechanisms)",
        runbook="sasl-authentication",
    )


def _no_sasl_error(address: str, config: Mapping[str, Any]) -> KafkaEosError:
    protocol = str(_setting(config, "security.protocol", "")).upper()
    return SecurityProtocolMismatchError(
        f"{address} is a listener without SASL but security.protocol is {protocol}: set "
        f"security.protocol to {'SSL' if protocol == 'SASL_SSL' else 'PLAINTEXT'} (and drop the sasl.* "
        "settings), or use the broker's SASL listener port"
    )


# -- librdkafka -------------------------------------------------------------------------------

_LIBRDKAFKA_SSL = -181  # RD_KAFKA_RESP_ERR__SSL
_LIBRDKAFKA_AUTH = -169  # RD_KAFKA_RESP_ERR__AUTHENTICATION
_LIBRDKAFKA_TRANSPORT = -195  # RD_KAFKA_RESP_ERR__TRANSPORT
_LIBRDKAFKA_ALL_DOWN = -187  # RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN


def is_security_failure(code: int, text: str) -> bool:
    """Whether a librdkafka error callback reports a TLS / SASL refusal (never healed by retrying)."""
    upper = text.upper()
    if code in (_LIBRDKAFKA_SSL, _LIBRDKAFKA_AUTH):
        return True
    return code == _LIBRDKAFKA_TRANSPORT and any(
        marker in upper
        for marker in (
            "SECURITY.PROTOCOL",
            "PLAINTEXT BROKER LISTENER",
            "SSL LISTENER",
            "SSL ROUTINES",
            "SSL HANDSHAKE",
            "CERTIFICATE VERIFY",
        )
    )


def explain_librdkafka(config: Mapping[str, Any], code: int, text: str) -> KafkaEosError:
    """The named error for a librdkafka security failure (``code``/``text`` from ``error_cb``)."""
    address = _address_of(text) or str(_setting(config, "bootstrap.servers", "")).split(",")[0].strip()
    upper = text.upper()
    if code == _LIBRDKAFKA_AUTH and "OAUTHBEARER" in upper and "TOKEN" in upper:
        return AuthenticationError(
            f"no OAUTHBEARER token for client id {_setting(config, 'sasl.oauthbearer.client.id')!r} from "
            f"{_setting(config, 'sasl.oauthbearer.token.endpoint.url')} ({text.strip()[:300]}); check "
            "sasl.oauthbearer.client.id / .client.secret / .token.endpoint.url and the identity provider"
        )
    if code == _LIBRDKAFKA_AUTH:
        if any(
            m in upper
            for m in ("ILLEGAL_SASL_STATE", "ILLEGAL SASL STATE", "NOT VALID IN CURRENT SASL STATE")
        ):
            return _no_sasl_error(address, config)
        if "MECHANISM" in upper and (
            "UNSUPPORTED" in upper or "NOT ENABLED" in upper or "NOT SUPPORTED" in upper
        ):
            return _mechanism_error(address, config, RuntimeError(text))
        if "INVALID CREDENTIALS" in upper or "AUTHENTICATION FAILED" in upper:
            return _credentials_error(address, config, RuntimeError(text))
    if any(m in upper for m in ("ALERT BAD CERTIFICATE", "CERTIFICATE REQUIRED", "ALERT UNKNOWN CA")):
        return _client_certificate_error(address, config)
    named = explain(address, config, None)
    if named is not None:
        return named
    return (AuthenticationError if code == _LIBRDKAFKA_AUTH else SecurityProtocolMismatchError)(
        f"the connection to {address} was refused during the {'SASL' if code == _LIBRDKAFKA_AUTH else 'TLS'} "
        f"handshake ({text.strip()[:300]}); check security.protocol, the ssl.* and sasl.* settings"
    )


def _address_of(text: str) -> str | None:
    """``host:port`` out of librdkafka's ``sasl_ssl://host:port/1: ...`` prefix."""
    head = text.split("://", 1)
    if len(head) != 2:
        return None
    hostport = head[1].split("/", 1)[0]
    return hostport if ":" in hostport else None


_CONNECT_SLICE_S = 0.2


def init_transactions_watched(
    producer: Any,
    timeout_s: float,
    seen: list[tuple[int, str]],
    config: Mapping[str, Any],
    topic: str | None = None,
) -> None:
    """``producer.init_transactions(timeout_s)``, ending at the first TLS / SASL refusal.

    librdkafka serves ``error_cb`` only from ``poll()``, never during ``init_transactions``, so a
    refused handshake would be seen only after the whole timeout. So first the connection is
    awaited in short Metadata slices (``list_topics``, no transaction state touched; ``topic``
    keeps it to one topic), polling in between: ``seen`` is what the producer's ``error_cb``
    appended, as ``(code, text)``. Once a broker answers, ``init_transactions`` gets the time left.
    """
    deadline = time.monotonic() + timeout_s
    checked, probed = 0, False
    while True:
        left = deadline - time.monotonic()
        try:
            producer.list_topics(topic, timeout=max(0.01, min(_CONNECT_SLICE_S, left)))
            break
        except Exception:
            if time.monotonic() >= deadline:
                break  # init_transactions reports the timeout in its own words
        producer.poll(0)
        fresh, checked = seen[checked:], len(seen)
        for code, text in fresh:
            if is_security_failure(code, text):
                raise explain_librdkafka(config, code, text)
        if not probed and any(code in (_LIBRDKAFKA_TRANSPORT, _LIBRDKAFKA_ALL_DOWN) for code, _ in fresh):
            # librdkafka logs why (e.g. a plaintext client at a TLS port) but reports only
            # "brokers are down": ask the listener once.
            probed = True
            address = str(_setting(config, "bootstrap.servers", "")).split(",")[0].strip()
            named = explain(address, config, None)
            if named is not None:
                raise named
    producer.init_transactions(max(0.01, deadline - time.monotonic()))


_CLIENT_FILES = {
    "ssl.ca.location": "the CA file",
    "ssl.certificate.location": "the client certificate",
    "ssl.key.location": "the client key",
}


def check_client_files(config: Mapping[str, Any]) -> None:
    """The TLS files a client is about to use: present, readable, and the key opens with its password.

    Both client libraries report a missing file or a wrong key password in their own words (or,
    kafka-python, by retrying the connection until its timeout); this names the setting and the
    file before any connection, without the password. Runs where the client runs (a Spark
    executor's files are checked on the executor).
    """
    for key, what in _CLIENT_FILES.items():
        path = _setting(config, key)
        if not path or (key == "ssl.ca.location" and str(path) == "probe"):
            continue
        try:
            with open(path, "rb") as fh:
                fh.read(1)
        except IsADirectoryError:
            if key == "ssl.ca.location":
                continue  # a directory of CA certificates (librdkafka and OpenSSL accept it)
            raise ConfigError(f"{key}: {what} {path} is a directory, not a PEM file") from None
        except OSError as exc:
            raise ConfigError(
                f"{key}: {what} {path} cannot be read ({exc.strerror or type(exc).__name__}); "
                "fix the path or the file's permissions for the user the client runs as",
                runbook="tls-certificate",
            ) from None
    cert, key = _setting(config, "ssl.certificate.location"), _setting(config, "ssl.key.location")
    if cert and key:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        password = _setting(config, "ssl.key.password")
        try:
            ctx.load_cert_chain(cert, key, password=(lambda: str(password)) if password else (lambda: ""))
        except (ssl.SSLError, ValueError, OSError) as exc:
            reason = getattr(exc, "reason", None) or type(exc).__name__
            try:
                encrypted = b"ENCRYPTED" in Path(key).read_bytes()[:4096]
            except OSError:
                encrypted = False
            hint = (
                "ssl.key.password is wrong or missing for this encrypted key"
                if encrypted
                else "the key does not match the certificate, or one of them is not PEM"
            )
            raise ConfigError(
                f"ssl.key.location: the client key {key} cannot be loaded with the certificate {cert} "
                f"({reason}): {hint}",
                runbook="tls-certificate",
            ) from None
