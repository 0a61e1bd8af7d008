"""The embedded single-node Kafka broker: configuration, lifecycle, shared state.

See docs/embedded-broker.md for what it implements and what it deliberately does less than
Kafka. Handler modules register themselves with ``api.handles`` when imported; this module
imports them all (the coordinator developer's ones guarded, so the core runs without them).
"""

from __future__ import annotations

import asyncio
import fcntl
import importlib
import json
import logging
import os
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

from .api import HANDLERS
from .groups import GroupCoordinator
from .topics import TopicManager, _write_json_atomically

log = logging.getLogger(__name__)

# Ours first, theirs after: a later registration of the same API key wins, so the transaction
# coordinator's InitProducerId replaces the idempotent-only fallback in ``produce_ids``.
CORE_HANDLER_MODULES = (
    "api_versions",
    "metadata",
    "topic_admin",
    "produce",
    "fetch",
    "offsets",
    "group_handlers",
    "produce_ids",
    "sasl",
    "configs",
)
_OPTIONAL_HANDLER_MODULES = ("coordinator", "txn_admin", "acl")

_PRODUCER_ID_BLOCK = 1000


def load_handler_modules() -> list[str]:
    """Import every handler module so it registers; returns the optional ones that are missing."""
    missing = []
    for name in CORE_HANDLER_MODULES:
        importlib.import_module(f"{__package__}.{name}")
    for name in _OPTIONAL_HANDLER_MODULES:
        try:
            importlib.import_module(f"{__package__}.{name}")
        except ImportError as exc:
            log.debug("optional broker module %s not available: %s", name, exc)
            missing.append(name)
    return missing


class BrokerStartupError(RuntimeError):
    """The broker cannot start with this configuration (the message says why and what to do)."""


def _load_acl_file(path: str):
    """(users, authorizer) from the ACL file; the authorizer is None without the acl module."""
    try:
        with open(path) as fh:
            users = dict(json.load(fh).get("users", {}))
    except (OSError, ValueError, AttributeError) as exc:
        raise BrokerStartupError(f"cannot read the ACL file {path}: {exc}") from exc
    try:
        from .acl import Authorizer
    except ImportError:
        log.warning("acl_file given but the authorizer module is missing: no ACLs are enforced")
        return users, None
    try:
        return users, Authorizer.from_file(path)
    except ValueError as exc:
        raise BrokerStartupError(str(exc)) from exc


def lock_data_dir(data_dir: str):
    """An exclusive lock on the data directory: two brokers appending to one log would corrupt it.

    Taken by the CLI (one broker per process); in-process tests may build several Broker objects
    over one directory on purpose (a simulated crash and restart), so Broker itself does not lock.
    The lock is released when the returned file is closed or the process exits.
    """
    os.makedirs(data_dir, exist_ok=True)
    lock = open(os.path.join(data_dir, ".lock"), "w")  # noqa: SIM115 - held for the broker's lifetime
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        lock.close()
        raise BrokerStartupError(
            f"data dir {data_dir} is in use by another running broker; stop it or use another --data-dir"
        ) from exc
    return lock


@dataclass
class BrokerConfig:
    host: str = "127.0.0.1"
    port: int = 0
    node_id: int = 1
    default_partitions: int = 1
    data_dir: str | None = None
    transaction_max_timeout_ms: int = 900000
    abort_check_interval_ms: int = 10000
    transaction_version: int = 2
    two_phase_commit: bool = False
    acl_file: str | None = None
    transactional_id_expiration_ms: int = 604800000
    auto_create_topics: bool = True
    group_initial_rebalance_delay_ms: int = 0  # Kafka's default is 3000; tests want joins to be quick
    marker_delay_ms: int = 0  # > 0: markers written that much after EndTxn, as Kafka's async ones
    # transaction.partition.verification.enable (KIP-890): False lets a Produce below v12 append a
    # transactional batch its coordinator never heard of, which is how a test makes a hanging
    # transaction (KIP-664); TV2 Produce (v12+) is always checked, as in Kafka.
    transaction_partition_verification: bool = True
    # Kafka's limits (server.py enforces them): socket.request.max.bytes, the SASL authenticator's
    # sasl.server.max.receive.size for frames before authentication, and max.connections
    # (Kafka's default is unlimited; ours bounds a test process that shares a small machine).
    socket_request_max_bytes: int = 100 * 1024 * 1024
    sasl_server_max_receive_size: int = 524288
    max_connections: int = 1000

    def __post_init__(self) -> None:
        if self.transaction_version not in (1, 2):
            raise ValueError(f"transaction_version must be 1 or 2, not {self.transaction_version}")


class Broker:
    """One node: the listener, topics, groups, and (when present) transactions and ACLs."""

    def __init__(self, config: BrokerConfig | None = None) -> None:
        self.config = config or BrokerConfig()
        self.node_id = self.config.node_id
        self.host = self.config.host
        self.port = self.config.port
        self.connections: set[Any] = set()
        # accepted beyond max.connections: held unread until a slot frees, as Kafka's acceptor does
        self.waiting_connections: deque[Any] = deque()
        self._server: asyncio.base_events.Server | None = None
        self._api_max_versions: dict[int, int] | None = None
        self.missing_modules = load_handler_modules()
        self.users: dict[str, str] = {}
        self.authorizer = None
        if self.config.acl_file:  # read first: a bad file must fail before anything is opened
            self.users, self.authorizer = _load_acl_file(self.config.acl_file)
        self._meta = self._load_meta()
        self.cluster_id: str = self._meta["cluster_id"]
        self.topics = TopicManager(self.config.data_dir)
        self.groups = GroupCoordinator(self)
        try:
            from .coordinator import TransactionCoordinator
        except ImportError:
            self.coordinator = None
        else:
            self.coordinator = TransactionCoordinator(self)

    # ------------------------------------------------------------------ identity and ids

    @property
    def sasl_enabled(self) -> bool:
        """With an ACL file the listener is SASL_PLAINTEXT (PLAIN), as a secured Kafka would be."""
        return bool(self.config.acl_file)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def _meta_path(self) -> str | None:
        return os.path.join(self.config.data_dir, "broker.json") if self.config.data_dir else None

    def _load_meta(self) -> dict:
        path = self._meta_path()
        if path and os.path.exists(path):
            with open(path) as fh:
                meta = json.load(fh)
        else:
            meta = {"cluster_id": uuid.uuid4().hex[:22], "producer_id_block_end": 0}
        meta["next_producer_id"] = meta["producer_id_block_end"]  # never reuse ids from a past run
        if path:
            _write_json_atomically(path, meta)
        return meta

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before (also across restarts with a data directory)."""
        meta = self._meta
        pid = meta["next_producer_id"]
        meta["next_producer_id"] = pid + 1
        if pid >= meta["producer_id_block_end"]:
            meta["producer_id_block_end"] = pid + _PRODUCER_ID_BLOCK
            path = self._meta_path()
            if path:
                _write_json_atomically(path, {k: v for k, v in meta.items() if k != "next_producer_id"})
        return pid

    def api_max_versions(self) -> dict[int, int]:
        if self._api_max_versions is None:
            from .server import advertised_versions

            self._api_max_versions = {key: top for key, _low, top in advertised_versions(self)}
        return self._api_max_versions

    def ensure_topic(self, name: str) -> bool:
        """Auto-create ``name`` (Kafka's auto.create.topics.enable); True when it exists afterwards."""
        if self.topics.exists(name):
            return True
        if not self.config.auto_create_topics:
            return False
        return self.topics.create(name, self.config.default_partitions) == 0

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        from .server import FrameProtocol

        self._api_max_versions = None
        try:
            self._server = await asyncio.get_running_loop().create_server(
                lambda: FrameProtocol(self), self.config.host, self.config.port, reuse_address=True
            )
        except OSError as exc:
            raise BrokerStartupError(
                f"cannot listen on {self.config.host}:{self.config.port}: {exc.strerror or exc}; "
                "pick another --listen address (port 0 = any free port)"
            ) from exc
        self.port = self._server.sockets[0].getsockname()[1]
        if self.coordinator is not None:
            await self.coordinator.start()
        self.groups.start()
        log.info("broker %d listening on %s (APIs: %s)", self.node_id, self.bootstrap, sorted(HANDLERS))

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            while self.waiting_connections:  # first, so no closing handler starts one
                self.waiting_connections.popleft().transport.close()
            handlers = list(self.connections)
            tasks = [h.task for h in handlers if h.task is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for handler in handlers:
                handler.transport.close()
            try:
                await asyncio.wait_for(self._server.wait_closed(), timeout=5)
            except asyncio.TimeoutError:
                log.warning("connections did not close within 5 s")
            self._server = None
        if self.coordinator is not None:
            await self.coordinator.stop()
        self.groups.stop()
        self.topics.close()
