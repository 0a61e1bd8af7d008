"""Private: raw Kafka requests over kafka-python's connection layer.

librdkafka does not expose InitProducerId / EndTxn for a transactional id it does not own,
and kafka-python's admin client has no call for them either, so we send the schema-driven
request classes (``kafka.protocol.*``) ourselves through the connection manager that
``KafkaAdminClient`` owns (``admin._manager``: ``send(request, node_id)`` returns a future the
manager's IO thread resolves; ``run(coro)`` blocks the calling thread on it). Every use of
kafka-python internals lives in this module, so a kafka-python upgrade that moves them breaks
exactly one file (``tests/kafka/protocol/test_wire.py`` pins the calls we rely on).

Every blocking wait is bounded (:meth:`Wire._run`): kafka-python's own ``run`` waits on its IO
thread with no timeout, so a request its IO thread cannot finish (a broker that accepts and
never answers, a request that fails to encode and kills the connection) used to block the caller
forever. Each wait here ends at the earlier of ``request_timeout_ms + connect_timeout_ms`` and
the Wire's overall ``deadline`` (the CLI's ``--timeout``), and then raises
:class:`BrokerUnreachableError`.

Request versions are negotiated from the broker's ApiVersions answer (kafka-python does it
per connection when a request has no explicit version); EndTxn is the exception, it is sent
with the version recorded in the committable. Every request sent is counted per API in
:attr:`Wire.requests`, which the benchmarks report.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import kafka.errors as kerr
from kafka.admin import KafkaAdminClient
from kafka.net.compat import KafkaNetClient
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest

from airflow_provider_kafka_eos.kafka.config import REDACTED, KafkaClientConfig, is_secret_key
from airflow_provider_kafka_eos.kafka.errors import AuthorizationError, BrokerUnreachableError, KafkaEosError
from airflow_provider_kafka_eos.kafka.protocol.connection_security import (
    check_client_files,
    early_refusal,
    explain,
    is_handshake_refusal,
    speaks_tls,
)
from airflow_provider_kafka_eos.kafka.protocol.error_codes import error_name  # kept importable from here

__all__ = ["COORDINATOR_TRANSACTION", "Wire", "WireOwner", "error_name"]

COORDINATOR_TRANSACTION = 1
_FIND_COORDINATOR_BATCH = 1000
# Failures where the request did not get an answer because no connection was there: worth re-sending.
_RESENDABLE = (kerr.KafkaConnectionError, kerr.NodeNotReadyError, ConnectionError)
_CONNECTION_ERRORS = (
    kerr.KafkaConnectionError,
    kerr.NodeNotReadyError,
    kerr.KafkaTimeoutError,
    kerr.RequestTimedOutError,
    kerr.MetadataEmptyBrokerList,
    kerr.UnknownBrokerIdError,
    ConnectionError,
    OSError,
)


class _RedactClientLogs(logging.Filter):
    """Keep secrets out of kafka-python's DEBUG output (the CLI's ``-v`` turns it on).

    kafka-python logs its whole configuration ("Starting KafkaAdminClient with configuration:
    {...}", SASL password included), every request object (SaslAuthenticateRequest carries
    ``user\0user\0password``) and raw wire bytes. Dict arguments get secret keys redacted,
    SASL request objects and raw bytes are replaced by a placeholder.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, dict):
            record.args = _redacted(record.args)
        elif isinstance(record.args, tuple) and record.args:
            record.args = tuple(_redact_arg(a) for a in record.args)
        return True


def _redact_arg(arg: Any) -> Any:
    if isinstance(arg, dict):
        return _redacted(arg)
    if isinstance(arg, (bytes, bytearray, memoryview)):
        return f"<{len(arg)} bytes>"
    name = type(arg).__name__
    if name.startswith("SaslAuthenticate") or name.startswith("SaslHandshake"):
        return f"{name}(...)"
    return arg


def _redacted(values: dict) -> dict:
    return {
        k: (REDACTED if isinstance(k, str) and is_secret_key(k) and v is not None else v)
        for k, v in values.items()
    }


_REDACTOR = _RedactClientLogs()
for _name in (
    "kafka.admin.client",
    "kafka.net.manager",
    "kafka.net.connection",
    "kafka.net.compat",
    "kafka.net.transport",
    "kafka.protocol.parser",
    "kafka.net.sasl.plain",
    "kafka.net.sasl.scram",
):
    logging.getLogger(_name).addFilter(_REDACTOR)

_AUTH_ERRORS = (kerr.SaslAuthenticationFailedError, kerr.AuthorizationError)


class Wire:
    """One kafka-python connection pool plus request counting and coordinator lookup.

    Thread-safe: several threads may call :meth:`send` / :meth:`send_all` at once (the IO runs
    on kafka-python's single network thread).
    """

    def __init__(
        self,
        config: KafkaClientConfig,
        *,
        connect_timeout_ms: int = 5000,
        request_timeout_ms: int = 15000,
        max_in_flight: int = 128,
        client_id: str = "kafka-eos-txn-admin",
        deadline: float | None = None,
    ):
        """``deadline`` (a ``time.monotonic()`` value) bounds everything this Wire does, the
        bootstrap included: no call returns later than it (plus the time to notice)."""
        self.deadline = deadline
        if deadline is not None:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                raise BrokerUnreachableError(f"no time left to contact {config.bootstrap_servers}")
            connect_timeout_ms = max(1, min(connect_timeout_ms, left_ms))
            request_timeout_ms = max(1, min(request_timeout_ms, left_ms))
        check_client_files(config.confluent())
        kwargs = config.kafka_python()
        kwargs.setdefault("client_id", client_id)
        kwargs["request_timeout_ms"] = request_timeout_ms
        kwargs["bootstrap_timeout_ms"] = connect_timeout_ms
        kwargs["max_in_flight_requests_per_connection"] = max_in_flight
        kwargs["reconnect_backoff_max_ms"] = min(1000, connect_timeout_ms)
        self.bootstrap_servers = config.bootstrap_servers
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.window = max(1, max_in_flight - 8)  # leave room for metadata refreshes on the same connection
        self.requests: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._coordinators: dict[str, int] = {}
        watch = _BootstrapWatch(config, str(kwargs.get("security_protocol", "")))
        kwargs["kafka_client"] = watch.net_client
        started = time.monotonic()
        try:
            self._admin = _bounded_bootstrap(kwargs, watch.created, connect_timeout_ms + request_timeout_ms)
        except (*_CONNECTION_ERRORS, kerr.KafkaError) as exc:
            raise watch.failure(exc, started, connect_timeout_ms) from None
        self._manager = self._admin._manager
        self._net = self._admin._net

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        self._admin.close()

    @property
    def admin(self) -> KafkaAdminClient:
        """The kafka-python admin client (KIP-664 calls we use unchanged)."""
        return self._admin

    # -- versions ---------------------------------------------------------------------------

    def api_version(self, request_cls: type) -> int | None:
        """Highest version of ``request_cls`` both sides support, or None when the broker lacks the API."""
        data = self._manager.broker_version_data
        if data is None or data.api_versions is None or request_cls.API_KEY not in data.api_versions:
            return None
        lo, hi = data.api_versions[request_cls.API_KEY]
        top = min(hi, request_cls.max_version)
        return top if top >= max(lo, request_cls.min_version) else None

    def broker_api_range(self, api_key: int) -> tuple[int, int] | None:
        data = self._manager.broker_version_data
        if data is None or data.api_versions is None:
            return None
        return data.api_versions.get(api_key)

    def finalized_features(self) -> dict[str, int]:
        """Finalized feature levels (``transaction.version``...) from a fresh ApiVersions (v3+)."""
        version = self.api_version(ApiVersionsRequest)
        if version is None or version < 3:
            return {}
        request = ApiVersionsRequest(
            client_software_name="kafka-eos", client_software_version="1", version=version
        )
        response = self.send(request)
        return {f.name: f.max_version_level for f in (getattr(response, "finalized_features", None) or [])}

    # -- sending ----------------------------------------------------------------------------

    def time_left_s(self) -> float | None:
        """Seconds until the overall deadline (None without one)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def _run(self, coro: Any, *args: Any) -> Any:
        """``manager.run`` with a timeout: schedule on the IO thread, wait at most the call budget.

        The budget is ``request_timeout_ms + connect_timeout_ms`` (a request may first need a
        connection), cut to the overall deadline. On timeout the work is left to the IO thread
        (it ends with the request timeout or at ``close()``) and KafkaTimeoutError is raised,
        which callers turn into BrokerUnreachableError.
        """
        budget = (self.request_timeout_ms + self.connect_timeout_ms) / 1000
        left = self.time_left_s()
        if left is not None:
            budget = min(budget, left)
        if budget <= 0:
            raise kerr.KafkaTimeoutError("the deadline passed before the request was sent")
        done = threading.Event()
        future = self._net.call_soon_with_future(coro, *args)
        future.add_both(lambda _result: done.set())
        if not done.wait(budget):
            raise kerr.KafkaTimeoutError(f"no answer within {budget:.1f} s")
        if future.exception is not None:
            raise future.exception
        return future.value

    def _count(self, request: Any, n: int = 1) -> None:
        with self._lock:
            self.requests[type(request).__name__.removesuffix("Request")] += n

    def send(self, request: Any, node_id: int | None = None) -> Any:
        """Send one request (to ``node_id`` or the least loaded broker) and return its response."""
        return self.send_all([(request, node_id)], raise_errors=True)[0]

    def send_all(self, batch: Sequence[tuple[Any, int | None]], *, raise_errors: bool = True) -> list[Any]:
        """Pipeline many requests: up to :attr:`window` in flight at a time, responses in order.

        A request that could not reach its broker (connection refused or reset, node in
        reconnect backoff: a broker restarting) is re-sent until ``connect_timeout_ms`` has passed
        since the first such failure; a request that timed out is not re-sent. What still fails
        becomes a BrokerUnreachableError: raised, or with ``raise_errors=False`` returned in place
        of its response. Every request we send is idempotent at the protocol level or handled by
        its caller (EndTxn commit/abort repeats are answered NONE).
        """
        results: list[Any] = [None] * len(batch)
        pending = list(range(len(batch)))
        deadline: float | None = None
        backoff = 0.05
        while pending:
            answers: list[Any] = []
            # One wait per window: the budget of _run is a request's (request + connect timeout),
            # so 10,000 pipelined requests to a busy real cluster are not one request timing out.
            for start in range(0, len(pending), self.window):
                part = [batch[i] for i in pending[start : start + self.window]]
                try:
                    answers += self._run(self._send_window, part)
                except _CONNECTION_ERRORS as exc:
                    answers += [exc] * len(part)
            retry = []
            for index, answer in zip(pending, answers, strict=True):
                if isinstance(answer, _RESENDABLE):
                    retry.append(index)
                    results[index] = answer
                elif isinstance(answer, BaseException):
                    results[index] = self._unreachable(answer)
                else:
                    results[index] = answer
            pending = retry
            if not pending:
                break
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.connect_timeout_ms / 1000
                if self.deadline is not None:
                    deadline = min(deadline, self.deadline)
            if now + backoff > deadline:
                for index in pending:
                    results[index] = self._unreachable(results[index])
                break
            time.sleep(backoff)  # reconnect backoff before re-sending, bounded by the deadline
            backoff = min(backoff * 2, 0.5)
        if raise_errors:
            for item in results:
                if isinstance(item, BrokerUnreachableError):
                    raise item
        return results

    async def _send_window(self, batch: Sequence[tuple[Any, int | None]]) -> list[Any]:
        results: list[Any] = []
        for start in range(0, len(batch), self.window):
            futures = []
            for request, node in batch[start : start + self.window]:
                self._count(request)
                futures.append(
                    self._manager.send(request, node_id=node, request_timeout_ms=self.request_timeout_ms)
                )
            for future in futures:
                try:
                    results.append(await future)
                except _CONNECTION_ERRORS as exc:
                    results.append(exc)
        return results

    def _unreachable(self, exc: BaseException) -> BrokerUnreachableError:
        return BrokerUnreachableError(
            f"the Kafka cluster at {self.bootstrap_servers} stopped answering ({_short(exc)}; reconnects "
            f"retried for {self.connect_timeout_ms} ms, request timeout {self.request_timeout_ms} ms)"
        )

    # -- topology ---------------------------------------------------------------------------

    def brokers(self) -> list[int]:
        return sorted(b.node_id for b in self._manager.cluster.brokers())

    def coordinators(self, transactional_ids: Iterable[str]) -> dict[str, Any]:
        """Transaction coordinator per id (FindCoordinator key type 1), cached; batched on v4+.

        The value is the node id, or a kafka-python error class instance when the lookup
        failed for that id (the caller maps it).
        """
        ids = list(dict.fromkeys(transactional_ids))
        with self._lock:
            known = {t: self._coordinators[t] for t in ids if t in self._coordinators}
        unknown = [t for t in ids if t not in known]
        if not unknown:
            return known
        version = self.api_version(FindCoordinatorRequest)
        found: dict[str, Any] = {}
        if version is not None and version >= 4:
            batch = [
                (
                    FindCoordinatorRequest(
                        key_type=COORDINATOR_TRANSACTION,
                        coordinator_keys=unknown[i : i + _FIND_COORDINATOR_BATCH],
                        min_version=4,
                    ),
                    None,
                )
                for i in range(0, len(unknown), _FIND_COORDINATOR_BATCH)
            ]
            for response in self.send_all(batch):
                for row in response.coordinators:
                    found[row.key] = self._register(row, row.key)
        else:
            batch = [
                (FindCoordinatorRequest(key=t, key_type=COORDINATOR_TRANSACTION, max_version=3), None)
                for t in unknown
            ]
            for t, response in zip(unknown, self.send_all(batch), strict=True):
                found[t] = self._register(response, t)
        with self._lock:
            self._coordinators.update({t: n for t, n in found.items() if isinstance(n, int)})
        return {**known, **found}

    def _register(self, row: Any, key: str) -> Any:
        if row.error_code:
            return kerr.for_code(row.error_code)(getattr(row, "error_message", None) or "")
        cluster = self._manager.cluster
        if cluster.broker_metadata(row.node_id) is None:
            # A coordinator we have no metadata for yet: let kafka-python record its address.
            return cluster.add_coordinator(row, COORDINATOR_TRANSACTION, key, synthesize_node_id=False)
        return row.node_id

    def forget_coordinator(self, transactional_id: str) -> None:
        """Drop a cached coordinator after NOT_COORDINATOR so the next lookup asks again."""
        with self._lock:
            self._coordinators.pop(transactional_id, None)

    def leaders(self, partitions: Iterable[Any]) -> dict[Any, int]:
        """Leader node per kafka ``TopicPartition`` (metadata request via the admin client)."""
        parts = list(partitions)
        self.requests["Metadata"] += 1
        try:
            by_leader = self._run(self._admin._async_get_leader_for_partitions, parts)
        except _CONNECTION_ERRORS as exc:
            raise self._unreachable(exc) from None
        return {tp: leader for leader, tps in by_leader.items() for tp in tps}

    def abort_transaction(
        self, topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int = -1
    ) -> None:
        """KIP-664 admin abort of one partition's open transaction: kafka-python's
        ``KafkaAdminClient.abort_transaction`` (WriteTxnMarkers with an ABORT marker, sent to the
        partition leader), bounded by this Wire's call budget and deadline. The leader checks the
        producer id / epoch against its state and refuses a coordinator epoch older than the one of
        the producer's last marker (DescribeProducers reports it; Kafka's tool sends it too); a
        refusal raises kafka-python's error for the code (the caller names it)."""
        from kafka.admin import AbortTransactionSpec
        from kafka.structs import TopicPartition as KafkaTopicPartition

        spec = AbortTransactionSpec(
            KafkaTopicPartition(topic, partition), producer_id, producer_epoch, coordinator_epoch
        )
        with self._lock:
            self.requests["WriteTxnMarkers"] += 1
        try:
            self._run(self._admin._async_abort_transaction, spec)
        except _CONNECTION_ERRORS as exc:
            raise self._unreachable(exc) from None


class _BootstrapWatch:
    """What a Wire's bootstrap saw, so a failed one is explained (authentication, a refused TLS or
    SASL handshake, no answer) and its IO threads stopped instead of leaked.

    kafka-python's bootstrap loop swallows SASL failures and retries until its timeout, so each
    connection's init future is watched for them (``net_client`` is the ``kafka_client`` factory
    handed to ``KafkaAdminClient``).
    """

    def __init__(self, config: KafkaClientConfig, security_protocol: str):
        self.bootstrap_servers = config.bootstrap_servers
        self.created: list[Any] = []
        self.auth_errors: list[BaseException] = []
        self.refusals: list[BaseException] = []  # TLS / SASL handshake refusals: named by explain()
        self.dropped: list[BaseException] = []
        self.sasl = security_protocol.startswith("SASL")
        self.tls = security_protocol.endswith("SSL")
        self.settings = config.confluent()
        self.first_address = config.bootstrap_servers.split(",")[0].strip()

    def net_client(self, **configs: Any) -> Any:
        # Keep a handle on the client KafkaAdminClient builds (see the class docstring).
        client = KafkaNetClient(**configs)
        self.created.append(client)
        manager = client._manager
        get_connection = manager.get_connection

        def watched(node_id: Any, *args: Any, **kw: Any) -> Any:
            conn = get_connection(node_id, *args, **kw)
            conn.init_future.add_errback(lambda exc: self._on_init_failure(manager, exc))
            return conn

        manager.get_connection = watched
        return client

    def _on_init_failure(self, manager: Any, exc: BaseException) -> None:
        if self.auth_errors or self.refusals:
            return
        if isinstance(exc, _AUTH_ERRORS):
            self.auth_errors.append(exc)
        elif is_handshake_refusal(exc):
            # A refused TLS or SASL handshake does not heal: stop at the first one.
            self.refusals.append(exc)
        elif (self.sasl or not self.tls) and _disconnected(exc):
            # Kafka closes the connection right after refusing credentials; kafka-python may
            # see the close before the SaslAuthenticate answer. Twice in a row is no accident.
            # A plaintext client at a TLS port sees the same (closed before ApiVersions is
            # answered). The first time, one bounded probe asks the listener whether it is a
            # TLS port or refuses the SASL mechanism (a refusal needs no second attempt).
            self.dropped.append(exc)
            early = early_refusal(self.first_address, self.settings) if len(self.dropped) == 1 else None
            if early is not None:
                self.refusals.append(early)
            elif len(self.dropped) >= 2 and (self.sasl or speaks_tls(self.first_address, self.settings)):
                self.refusals.append(exc)
            else:
                return
        else:
            return
        manager.close()  # wrong credentials do not heal: end the bootstrap loop now

    def failure(self, exc: BaseException, started: float, connect_timeout_ms: int) -> BaseException:
        """The error a failed bootstrap raises (the clients it made are closed first)."""
        auth_failure = self.auth_errors[0] if self.auth_errors else _auth_failure(self.created)
        _discard(self.created)
        refusals = self.refusals
        if refusals and isinstance(refusals[0], KafkaEosError):
            return refusals[0]
        if auth_failure is not None or refusals:
            named = explain(self.first_address, self.settings, auth_failure or refusals[0])
            if named is not None:
                return named
        if refusals and self.sasl:
            auth_failure = kerr.SaslAuthenticationFailedError(
                "the broker closed the connection during the SASL handshake"
            )
        if auth_failure is not None or isinstance(exc, _AUTH_ERRORS):
            return AuthorizationError(
                f"authentication to {self.bootstrap_servers} failed ({_short(auth_failure or exc)}); "
                "check the SASL/SSL settings and credentials of the connection",
                runbook="missing-acl",
            )
        return BrokerUnreachableError(
            f"no Kafka broker at {self.bootstrap_servers} answered within "
            f"{(time.monotonic() - started):.1f} s (connect timeout {connect_timeout_ms} ms)"
        )


def _bounded_bootstrap(kwargs: dict[str, Any], created: list[Any], budget_ms: int) -> KafkaAdminClient:
    """``KafkaAdminClient(**kwargs)`` that returns within ``budget_ms`` whatever the broker does.

    kafka-python bounds its bootstrap loop by ``bootstrap_timeout_ms``, but the waits inside it
    (ApiVersions / Metadata on a connection that accepted and never answers) are only bounded by
    the request timeout; the constructor runs on a helper thread so that the caller's wait is
    bounded here. A constructor still running at the deadline has its clients closed (which
    fails its waits) and BrokerUnreachableError-worthy KafkaTimeoutError is raised.
    """
    box: dict[str, Any] = {}

    def build() -> None:
        try:
            box["admin"] = KafkaAdminClient(**kwargs)
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc

    thread = threading.Thread(target=build, name="kafka-eos-bootstrap", daemon=True)
    thread.start()
    thread.join(budget_ms / 1000)
    if thread.is_alive():
        _discard(created)
        thread.join(1.0)
        if "admin" in box:  # finished while we were giving up: do not leak it
            with contextlib.suppress(Exception):
                box["admin"].close()
        raise kerr.KafkaTimeoutError(f"bootstrap did not finish within {budget_ms} ms")
    if "error" in box:
        raise box["error"]
    return box["admin"]


def _auth_failure(created: list[Any]) -> BaseException | None:
    for client in created:
        failures = getattr(client._manager, "_auth_failures", {})
        if failures:
            return next(iter(failures.values()))
    return None


def _discard(created: list[Any]) -> None:
    for client in created:
        try:
            client._manager.close()
            client._net.stop()
            client.close()
        except Exception as exc:  # best effort: the client never finished starting
            logging.getLogger(__name__).debug("discarding a half-started client: %s", _short(exc))


def _disconnected(exc: BaseException) -> bool:
    return isinstance(exc, kerr.KafkaConnectionError) and "disconnected" in str(exc)


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]


class WireOwner(Protocol):
    """Anything handed in that carries a :class:`Wire` (a ``TransactionAdmin``): what a module needs
    that sends its own requests on the admin's connections and nothing else of it."""

    wire: Wire
