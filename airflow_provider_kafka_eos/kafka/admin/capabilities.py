"""What this Kafka cluster can do for exactly-once pipelines, learnt from the broker itself.

Two requests answer it: ApiVersions (the API version ranges, and from v3 the finalized
features, among them ``transaction.version``) and DescribeConfigs on one broker (the
transaction limits). Everything downstream (preflight, the commit path's choice of EndTxn
version, the CLI's ``list`` filters) reads this one object instead of guessing from a
release number, because managed Kafka services patch and cap versions independently.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

# API keys (Kafka protocol) this project cares about.
API_INIT_PRODUCER_ID = 22
API_END_TXN = 26
API_DESCRIBE_ACLS = 29
API_DESCRIBE_CONFIGS = 32
API_DESCRIBE_PRODUCERS = 61
API_DESCRIBE_TRANSACTIONS = 65
API_LIST_TRANSACTIONS = 66

API_NAMES = {
    API_INIT_PRODUCER_ID: "InitProducerId",
    API_END_TXN: "EndTxn",
    API_DESCRIBE_ACLS: "DescribeAcls",
    API_DESCRIBE_CONFIGS: "DescribeConfigs",
    API_DESCRIBE_PRODUCERS: "DescribeProducers",
    API_DESCRIBE_TRANSACTIONS: "DescribeTransactions",
    API_LIST_TRANSACTIONS: "ListTransactions",
}

TRANSACTION_MAX_TIMEOUT_MS = "transaction.max.timeout.ms"
TRANSACTIONAL_ID_EXPIRATION_MS = "transactional.id.expiration.ms"
TWO_PHASE_COMMIT_ENABLE = "transaction.two.phase.commit.enable"
BROKER_CONFIG_KEYS = (TRANSACTION_MAX_TIMEOUT_MS, TRANSACTIONAL_ID_EXPIRATION_MS, TWO_PHASE_COMMIT_ENABLE)

# Kafka's defaults, used only where the broker would not tell us (never silently: the
# report marks such values as defaults).
KAFKA_DEFAULTS = {
    TRANSACTION_MAX_TIMEOUT_MS: "900000",
    TRANSACTIONAL_ID_EXPIRATION_MS: "604800000",
    TWO_PHASE_COMMIT_ENABLE: "false",
}

TRANSACTION_VERSION_FEATURE = "transaction.version"
# EndTxn v5 is the KIP-890 (TV2) path; clients may send it only when the finalized
# transaction.version is >= 2, otherwise the newest TV1 version is v4.
END_TXN_TV2_VERSION = 5
END_TXN_TV1_MAX_VERSION = 4
INIT_PRODUCER_ID_2PC_VERSION = 6
BROKER_RESOURCE_TYPE = 4  # ConfigResource type BROKER in DescribeConfigs


@dataclass(frozen=True)
class ClusterCapabilities:
    """The cluster's transaction-related abilities, from one broker's point of view.

    ``broker_configs`` holds the raw string values the broker returned; a key is missing
    when DescribeConfigs was refused (no DESCRIBE_CONFIGS on the cluster) or the broker
    does not know it, and ``config_error`` then says why.
    """

    api_versions: Mapping[int, tuple[int, int]]
    finalized_features: Mapping[str, int] = field(default_factory=dict)
    broker_configs: Mapping[str, str | None] = field(default_factory=dict)
    broker_id: int | None = None
    config_error: str | None = None

    # -- construction --------------------------------------------------------------

    @classmethod
    def from_responses(
        cls,
        api_versions_response: Any,
        describe_configs_response: Any | None = None,
        *,
        broker_id: int | None = None,
    ) -> ClusterCapabilities:
        """Build from kafka-python ApiVersions / DescribeConfigs response objects."""
        versions = {k.api_key: (k.min_version, k.max_version) for k in api_versions_response.api_keys}
        features: dict[str, int] = {}
        for feature in getattr(api_versions_response, "finalized_features", None) or []:
            features[feature.name] = feature.max_version_level
        configs: dict[str, str | None] = {}
        config_error = None
        if describe_configs_response is not None:
            for result in describe_configs_response.results:
                if result.error_code:
                    config_error = _error_name(result.error_code, result.error_message)
                    continue
                for entry in result.configs:
                    if entry.name in BROKER_CONFIG_KEYS:
                        configs[entry.name] = entry.value
        return cls(versions, features, configs, broker_id, config_error)

    @classmethod
    def probe(cls, config: Any, *, timeout_ms: int = 10_000) -> ClusterCapabilities:
        """Ask the cluster (ApiVersions + DescribeConfigs on one broker).

        ``config`` is a :class:`~airflow_provider_kafka_eos.kafka.config.KafkaClientConfig`.
        An unreachable cluster raises ``BrokerUnreachableError``.
        """
        with open_wire(config, timeout_ms=timeout_ms) as client:
            return cls.probe_with(client)

    @classmethod
    def probe_with(cls, client: Any) -> ClusterCapabilities:
        """Probe through an open :class:`~airflow_provider_kafka_eos.kafka.protocol.wire.Wire`."""
        from kafka.protocol.admin import DescribeConfigsRequest
        from kafka.protocol.metadata import ApiVersionsRequest

        node_id = client.brokers()[0]
        api_versions = client.send(
            ApiVersionsRequest(version=3, client_software_name="kafka-eos", client_software_version="1"),
            node_id=node_id,
        )
        resource = DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=BROKER_RESOURCE_TYPE,
            resource_name=str(node_id),
            configuration_keys=list(BROKER_CONFIG_KEYS),
        )
        describe_configs = None
        config_error = None
        try:
            describe_configs = client.send(
                DescribeConfigsRequest(resources=[resource], include_synonyms=False), node_id=node_id
            )
        except Exception as exc:  # a refused or unsupported DescribeConfigs is reported, not fatal
            config_error = f"DescribeConfigs failed: {exc}"
        caps = cls.from_responses(api_versions, describe_configs, broker_id=node_id)
        if config_error:
            caps = cls(caps.api_versions, caps.finalized_features, caps.broker_configs, node_id, config_error)
        return caps

    # -- derived abilities ---------------------------------------------------------

    def max_version(self, api_key: int) -> int | None:
        """The broker's newest version of ``api_key``; ``None`` when it does not serve it."""
        span = self.api_versions.get(api_key)
        return None if span is None else span[1]

    def supports(self, api_key: int, version: int = 0) -> bool:
        span = self.api_versions.get(api_key)
        return span is not None and span[0] <= version <= span[1]

    @property
    def can_list_transactions(self) -> bool:
        return self.supports(API_LIST_TRANSACTIONS)

    @property
    def list_duration_filter(self) -> bool:
        """ListTransactions v1 (KIP-994): the broker filters by age."""
        return self.supports(API_LIST_TRANSACTIONS, 1)

    @property
    def list_pattern_filter(self) -> bool:
        """ListTransactions v2 (KIP-1152): the broker filters by transactional-id regex."""
        return self.supports(API_LIST_TRANSACTIONS, 2)

    @property
    def can_describe_transactions(self) -> bool:
        return self.supports(API_DESCRIBE_TRANSACTIONS)

    @property
    def can_describe_producers(self) -> bool:
        return self.supports(API_DESCRIBE_PRODUCERS)

    @property
    def two_phase_commit_advertised(self) -> bool:
        """InitProducerId v6 (KIP-939) is advertised (brokers do so only with unstable APIs on)."""
        return self.supports(API_INIT_PRODUCER_ID, INIT_PRODUCER_ID_2PC_VERSION)

    @property
    def transaction_version(self) -> int:
        """Finalized ``transaction.version``: 0 when the broker reports no such feature."""
        return int(self.finalized_features.get(TRANSACTION_VERSION_FEATURE, 0))

    @property
    def tv2(self) -> bool:
        return self.transaction_version >= 2 and self.supports(API_END_TXN, END_TXN_TV2_VERSION)

    @property
    def end_txn_version(self) -> int | None:
        """The EndTxn version a commit must use on this cluster (v5 only under TV2)."""
        top = self.max_version(API_END_TXN)
        if top is None:
            return None
        return END_TXN_TV2_VERSION if self.tv2 else min(top, END_TXN_TV1_MAX_VERSION)

    def _config_int(self, key: str) -> int | None:
        value = self.broker_configs.get(key)
        try:
            return None if value is None else int(value)
        except ValueError:
            return None

    @property
    def transaction_max_timeout_ms(self) -> int | None:
        return self._config_int(TRANSACTION_MAX_TIMEOUT_MS)

    @property
    def transactional_id_expiration_ms(self) -> int | None:
        return self._config_int(TRANSACTIONAL_ID_EXPIRATION_MS)

    @property
    def two_phase_commit_enabled(self) -> bool | None:
        """Broker config ``transaction.two.phase.commit.enable``; ``None`` when unknown."""
        value = self.broker_configs.get(TWO_PHASE_COMMIT_ENABLE)
        return None if value is None else str(value).strip().lower() == "true"

    def effective_max_timeout_ms(self) -> tuple[int, bool]:
        """``(value, is_kafka_default)``: the broker's limit or Kafka's default when unknown."""
        known = self.transaction_max_timeout_ms
        if known is not None:
            return known, False
        return int(KAFKA_DEFAULTS[TRANSACTION_MAX_TIMEOUT_MS]), True

    # -- output --------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "broker_id": self.broker_id,
            "api_versions": {
                API_NAMES.get(key, str(key)): list(span)
                for key, span in sorted(self.api_versions.items())
                if key in API_NAMES
            },
            "finalized_features": dict(self.finalized_features),
            "broker_configs": dict(self.broker_configs),
            "config_error": self.config_error,
            "list_transactions": self.can_list_transactions,
            "list_transactions_duration_filter": self.list_duration_filter,
            "list_transactions_pattern_filter": self.list_pattern_filter,
            "describe_transactions": self.can_describe_transactions,
            "describe_producers": self.can_describe_producers,
            "two_phase_commit_advertised": self.two_phase_commit_advertised,
            "two_phase_commit_enabled": self.two_phase_commit_enabled,
            "transaction_version": self.transaction_version,
            "end_txn_version": self.end_txn_version,
            "transaction_max_timeout_ms": self.transaction_max_timeout_ms,
            "transactional_id_expiration_ms": self.transactional_id_expiration_ms,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def render(self) -> str:
        """A readable report, one ability a line, unknowns said out loud."""

        def yes(flag: bool | None) -> str:
            return "unknown" if flag is None else ("yes" if flag else "no")

        def span(key: int) -> str:
            versions = self.api_versions.get(key)
            return "not served" if versions is None else f"v{versions[0]}-v{versions[1]}"

        def ms(value: int | None) -> str:
            return "unknown" if value is None else f"{value} ms ({value / 60000:g} min)"

        rows = [
            (
                "ListTransactions",
                f"{span(API_LIST_TRANSACTIONS)} (duration filter: {yes(self.list_duration_filter)}, "
                f"pattern filter: {yes(self.list_pattern_filter)})",
            ),
            ("DescribeTransactions", span(API_DESCRIBE_TRANSACTIONS)),
            ("DescribeProducers", span(API_DESCRIBE_PRODUCERS)),
            (
                "InitProducerId",
                f"{span(API_INIT_PRODUCER_ID)} (2PC / KIP-939 advertised: "
                f"{yes(self.two_phase_commit_advertised)})",
            ),
            ("EndTxn", f"{span(API_END_TXN)} (commit uses v{self.end_txn_version})"),
            ("transaction.version", f"{self.transaction_version} ({'TV2, KIP-890' if self.tv2 else 'TV1'})"),
            (TRANSACTION_MAX_TIMEOUT_MS, ms(self.transaction_max_timeout_ms)),
            (TRANSACTIONAL_ID_EXPIRATION_MS, ms(self.transactional_id_expiration_ms)),
            (TWO_PHASE_COMMIT_ENABLE, yes(self.two_phase_commit_enabled)),
        ]
        width = max(len(label) for label, _ in rows) + 2
        lines = [f"Kafka cluster capabilities (broker {self.broker_id})"]
        lines += [f"  {label} {'.' * (width - len(label))} {value}" for label, value in rows]
        if self.config_error:
            lines.append(f"  broker configs unavailable: {self.config_error}")
        return "\n".join(lines)


def _error_name(code: int, message: str | None) -> str:
    from airflow_provider_kafka_eos.kafka.protocol.error_codes import error_name

    name = error_name(code)
    return f"{name}: {message}" if message else name


@contextmanager
def open_wire(config: Any, *, timeout_ms: int = 10_000) -> Iterator[Any]:
    """A :class:`~..protocol.wire.Wire` (part A's raw-request layer), closed after use.

    Capabilities and ACL checks need requests kafka-python's admin client does not offer
    (ApiVersions v3 with finalized features, DescribeAcls with TWO_PHASE_COMMIT = 15).
    An unreachable cluster raises ``BrokerUnreachableError`` from ``Wire``.
    """
    from airflow_provider_kafka_eos.kafka.protocol.wire import Wire

    wire = Wire(
        config, connect_timeout_ms=timeout_ms, request_timeout_ms=timeout_ms, client_id="kafka-eos-preflight"
    )
    try:
        yield wire
    finally:
        wire.close()
