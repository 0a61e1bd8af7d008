"""KafkaEosHook: an Airflow ``kafka_eos`` connection -> Kafka clients, capabilities, preflight.

The connection has the shape of Airflow's ``kafka`` connection: the whole librdkafka client
configuration is the JSON ``extra``, so an existing ``kafka`` connection's extra can be pasted
unchanged. Host/port are a fallback for ``bootstrap.servers`` (connection URIs such as
``kafka-eos://broker:9092?...`` put the broker there), login/password a fallback for SASL
credentials. Every secret value of the extra is registered with Airflow's secrets masker the
moment it is read, because the masker only recognises some key names on its own
(``sasl.password`` yes, ``ssl.key.pem`` or an OAuth client secret not necessarily).

One key of the extra is ours, not librdkafka's: ``manifest_base_uri``, the deployment's
checkpoint manifest store. It is configured once, here, and is the default of every operator,
sensor and example DAG (see docs/configuration/connection.md).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_provider_kafka_eos import CONNECTION_TYPE

if TYPE_CHECKING:
    from airflow_provider_kafka_eos.kafka.admin.capabilities import ClusterCapabilities
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import ManifestStore
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from airflow_provider_kafka_eos.kafka.operations.preflight import PreflightReport, RetrySchedule

DEFAULT_PORT = 9092
MANIFEST_BASE_URI_KEY = "manifest_base_uri"  # our key in the extra; never passed to the Kafka client


def _mask(value: Any) -> None:
    """Register ``value`` with the secrets masker unconditionally.

    ``mask_secret(value, name)`` masks only when ``name`` is one of Airflow's sensitive names
    (``ssl.key.pem`` is not), so the name is deliberately not passed.
    """
    try:
        from airflow.sdk.log import mask_secret
    except ImportError:  # pragma: no cover - older SDK layout
        from airflow.sdk.execution_time.secrets_masker import mask_secret  # type: ignore[no-redef]
    mask_secret(value)


class KafkaEosHook(BaseHook):
    """Builds Kafka clients from a ``kafka_eos`` connection; never logs or returns a secret."""

    conn_name_attr = "kafka_eos_conn_id"
    default_conn_name = "kafka_eos_default"
    conn_type = CONNECTION_TYPE
    hook_name = "Kafka (exactly-once)"

    def __init__(
        self, kafka_eos_conn_id: str = default_conn_name, *, connect_timeout_ms: int = 5000, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.kafka_eos_conn_id = kafka_eos_conn_id
        self.connect_timeout_ms = connect_timeout_ms
        self._config: KafkaClientConfig | None = None

    # -- configuration ----------------------------------------------------------------------

    def client_config(self) -> KafkaClientConfig:
        """The connection's librdkafka configuration, validated (ConfigError names the bad key)."""
        if self._config is not None:
            return self._config
        from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig, is_secret_key

        conn = self.get_connection(self.kafka_eos_conn_id)
        source = f"connection {self.kafka_eos_conn_id!r} extra"
        settings = self._extra_settings(conn, source)
        settings.pop(MANIFEST_BASE_URI_KEY, None)
        if conn.password:
            _mask(conn.password)
        for key, value in settings.items():
            # File locations are not secrets (and masking a path would blank it in every log).
            if value not in (None, "") and is_secret_key(str(key)) and not str(key).endswith(".location"):
                _mask(value)
        if not settings.get("bootstrap.servers") and conn.host:
            hosts = [h.strip() for h in str(conn.host).split(",") if h.strip()]
            settings["bootstrap.servers"] = ",".join(
                h if ":" in h else f"{h}:{conn.port or DEFAULT_PORT}" for h in hosts
            )
        if conn.login and "sasl.username" not in settings:
            settings["sasl.username"] = conn.login
        if conn.password and "sasl.password" not in settings:
            settings["sasl.password"] = conn.password
        self._config = KafkaClientConfig.from_mapping(settings, source=source)
        self.log.info(
            "Kafka client configuration from %s: %s", self.kafka_eos_conn_id, self._config.redacted()
        )
        return self._config

    def _extra_settings(self, conn: Any, source: str) -> dict[str, Any]:
        from airflow_provider_kafka_eos.kafka.errors import ConfigError

        try:
            extra = conn.extra_dejson
        except Exception:
            raise ConfigError(f"{source}: extra is not valid JSON", runbook="configuration") from None
        if not isinstance(extra, dict):
            raise ConfigError(f"{source}: extra must be a JSON object of librdkafka keys")
        return dict(extra)

    def manifest_base_uri(self) -> str | None:
        """The connection's manifest store (extra key ``manifest_base_uri``), or None if unset."""
        conn = self.get_connection(self.kafka_eos_conn_id)
        value = self._extra_settings(conn, f"connection {self.kafka_eos_conn_id!r} extra").get(
            MANIFEST_BASE_URI_KEY
        )
        return (str(value).strip() or None) if value is not None else None

    def manifest_store_source(self) -> str:
        """How errors name the setting a user fixes."""
        return f"{MANIFEST_BASE_URI_KEY} in the extra of connection {self.kafka_eos_conn_id!r}"

    def manifest_store_setting(self, base_uri: str | None = None) -> tuple[str | None, str]:
        """The one rule for which manifest store a task uses: its own ``base_uri`` (an operator
        argument) when set, else the connection's; with the words an error names the setting by.
        The base URI may be None (neither set): a caller that needs a store uses
        :meth:`manifest_store`, which refuses that."""
        if base_uri:
            return base_uri, MANIFEST_BASE_URI_KEY
        return self.manifest_base_uri(), self.manifest_store_source()

    def manifest_store(self, base_uri: str | None = None) -> ManifestStore:
        """The store :meth:`manifest_store_setting` names (ManifestStoreError naming it when unset)."""
        from airflow_provider_kafka_eos.kafka.checkpoints.lifecycle import ManifestStore

        base, source = self.manifest_store_setting(base_uri)
        return ManifestStore.configured(base, source=source)

    def get_conn(self) -> KafkaClientConfig:
        return self.client_config()

    # -- clients ----------------------------------------------------------------------------

    def transaction_admin(self, **kwargs: Any) -> TransactionAdmin:
        """A ``TransactionAdmin`` (context manager) on this connection."""
        from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin

        kwargs.setdefault("connect_timeout_ms", self.connect_timeout_ms)
        return TransactionAdmin(self.client_config(), **kwargs)

    def capabilities(self) -> ClusterCapabilities:
        from airflow_provider_kafka_eos.kafka.admin.capabilities import ClusterCapabilities

        return ClusterCapabilities.probe(self.client_config(), timeout_ms=self.connect_timeout_ms)

    def preflight(
        self,
        *,
        transactional_id_prefix: str,
        topics: list[str] | tuple[str, ...],
        transaction_timeout_ms: int,
        job_duration_budget: timedelta | float | None,
        commit_schedule: RetrySchedule,
        two_phase_commit: bool = False,
        raise_on_failure: bool = True,
    ) -> PreflightReport:
        """Run :func:`~.kafka.operations.preflight.run_preflight` with this connection."""
        from airflow_provider_kafka_eos.kafka.operations.preflight import run_preflight

        budget = (
            job_duration_budget.total_seconds()
            if isinstance(job_duration_budget, timedelta)
            else (None if job_duration_budget is None else float(job_duration_budget))
        )
        return run_preflight(
            self.client_config(),
            transactional_id_prefix=transactional_id_prefix,
            topics=list(topics),
            transaction_timeout_ms=int(transaction_timeout_ms),
            job_duration_budget_s=budget,
            commit_schedule=commit_schedule,
            two_phase_commit=two_phase_commit,
            raise_on_failure=raise_on_failure,
            timeout_ms=self.connect_timeout_ms,
        )

    def test_connection(self) -> tuple[bool, str]:
        """Airflow's "Test" button: reach the cluster and read its capabilities. Never leaks secrets."""
        from airflow_provider_kafka_eos.kafka.errors import KafkaEosError

        try:
            config = self.client_config()
            caps = self.capabilities()
        except KafkaEosError as err:
            return False, str(err)
        except Exception as err:
            return (
                False,
                f"{type(err).__name__} while connecting (details withheld: they may contain settings)",
            )
        tv = caps.transaction_version
        return True, (
            f"Connected to {config.bootstrap_servers}: transaction.version {tv}, "
            f"EndTxn v{caps.end_txn_version}, "
            f"ListTransactions {'yes' if caps.can_list_transactions else 'no'}, "
            f"2PC advertised {'yes' if caps.two_phase_commit_advertised else 'no'}"
        )
