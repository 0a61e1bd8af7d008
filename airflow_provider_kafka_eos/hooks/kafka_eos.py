"""KafkaEosHook: an Airflow ``kafka_eos`` connection -> Kafka clients, capabilities, preflight.

The connection has the shape of Airflow's ``kafka`` connection: the whole librdkafka client
configuration is the JSON ``extra``, so an existing ``kafka`` connection's extra can be pasted
unchanged. Host/port are a fallback for ``bootstrap.servers`` (connection URIs such as
``kafka-eos://broker:9092?...`` put the broker there), login/password a fallback for SASL
credentials. Every secret value of the extra is registered with Airflow's secrets masker the
moment it is read, because the masker only recognises some key names on its own
(``sasl.password`` yes, ``ssl.key.pem`` or an OAuth client secret not necessarily).

Three keys of the extra are ours, not librdkafka's (``hooks/connection_form.py`` owns them and
the connection form's fields): ``manifest_base_uri``, the deployment's checkpoint manifest store,
configured once, here, and the default of every operator, sensor and example DAG;
``two_phase_commit`` and ``transaction_timeout_ms``, what the pipelines on this connection expect
of the cluster, checked by the Test button (see docs/configuration/connection.md). The form
stores ``null`` for a blank field: blank values are "not set" for every key.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_provider_kafka_eos import CONNECTION_TYPE
from airflow_provider_kafka_eos.hooks import connection_form as form
from airflow_provider_kafka_eos.hooks import masking  # noqa: F401 (registers the secret key names)

if TYPE_CHECKING:
    from airflow_provider_kafka_eos.kafka.admin.capabilities import ClusterCapabilities
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin
    from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
    from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import StoreAccess
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
    from airflow_provider_kafka_eos.kafka.operations.preflight import PreflightReport, RetrySchedule
    from airflow_provider_kafka_eos.kafka.registry.config import RecordFormats

DEFAULT_PORT = 9092
MANIFEST_BASE_URI_KEY = form.MANIFEST_BASE_URI_KEY  # our key in the extra; never passed to the Kafka client


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
        from airflow_provider_kafka_eos.kafka.errors import ConfigError
        from airflow_provider_kafka_eos.kafka.log_levels import quiet_client_loggers

        # Every Kafka client of a task is built from this config: kafka-python's chatter goes to
        # WARNING here (KAFKA_EOS_CLIENT_LOG_LEVEL turns it up; kafka/log_levels.py).
        quiet_client_loggers()

        conn = self.get_connection(self.kafka_eos_conn_id)
        source = f"connection {self.kafka_eos_conn_id!r} extra"
        settings = {k: v for k, v in self._extra_settings(conn, source).items() if not form.blank(v)}
        for key in form.PROVIDER_KEYS:
            settings.pop(key, None)
        java, librdkafka = settings.get("sasl.mechanism"), settings.get("sasl.mechanisms")
        if java is not None and librdkafka is not None and str(java).strip() != str(librdkafka).strip():
            # The form writes sasl.mechanisms; a pasted extra may hold the Java spelling too.
            raise ConfigError(
                f"{source}: sasl.mechanism {java!r} and sasl.mechanisms {librdkafka!r} disagree: keep one"
            )
        settings.pop("sasl.mechanism" if librdkafka is not None else "", None)
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

    def _provider_setting(self, key: str) -> tuple[Any, str]:
        source = f"connection {self.kafka_eos_conn_id!r} extra"
        return self._extra_settings(self.get_connection(self.kafka_eos_conn_id), source).get(key), source

    def manifest_base_uri(self) -> str | None:
        """The connection's manifest store (extra key ``manifest_base_uri``), or None if unset.

        A malformed URI (relative path, unknown scheme) is a ConfigError naming the key.
        """
        value, source = self._provider_setting(MANIFEST_BASE_URI_KEY)
        return form.validate_manifest_base_uri(value, source=source)

    def two_phase_commit(self) -> bool:
        """Whether pipelines on this connection expect KIP-939 2PC (extra ``two_phase_commit``)."""
        value, source = self._provider_setting(form.TWO_PHASE_COMMIT_KEY)
        return form.read_two_phase_commit(value, source=source)

    def transaction_timeout_ms(self) -> int | None:
        """The pipelines' ``transaction.timeout.ms`` as the connection states it (None: not stated)."""
        value, source = self._provider_setting(form.TRANSACTION_TIMEOUT_MS_KEY)
        return form.read_transaction_timeout_ms(value, source=source)

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

    def store_access(self, uri: str | None) -> StoreAccess:
        """How a task reaches the store holding ``uri`` (a base or an object under it): the
        credentials and endpoint of the Airflow connection ``hooks/store_credentials.py`` names,
        else the store client's standard chain. Returned, never remembered: each caller hands it
        to the store functions it calls (``manifest_store()`` puts it in the store). Secrets
        masked, never logged."""
        from airflow_provider_kafka_eos.hooks import store_credentials
        from airflow_provider_kafka_eos.kafka.checkpoints import store_objects
        from airflow_provider_kafka_eos.kafka.errors import ConfigError

        if not uri or store_objects.is_local_uri(uri):
            return store_objects.STANDARD_CHAIN
        source = f"connection {self.kafka_eos_conn_id!r} extra"
        extra = self._extra_settings(self.get_connection(self.kafka_eos_conn_id), source)
        conn_id, named = store_credentials.store_connection_id(extra, uri, source=source)
        if conn_id is None:
            return store_objects.STANDARD_CHAIN
        try:
            conn = self.get_connection(conn_id)
        except Exception as exc:
            if type(exc).__name__ != "AirflowNotFoundException":
                raise
            if named:
                raise ConfigError(
                    f"{source}: {form.MANIFEST_STORE_CONN_ID_KEY} names connection {conn_id!r}, which does "
                    "not exist: create it (type aws: access key id as login, secret as password, "
                    "endpoint_url and region_name in the extra) or remove the key",
                    runbook="configuration",
                ) from None
            return store_objects.STANDARD_CHAIN
        options = store_credentials.storage_options_from_connection(
            conn, source=f"connection {conn_id!r} (credentials of manifest store {uri})", mask=_mask)
        self.log.info("manifest store %s: credentials and endpoint from connection %r", uri, conn_id)
        return store_objects.StoreAccess(options, source=f"connection {conn_id!r}")

    def manifest_store(self, base_uri: str | None = None) -> ManifestStore:
        """The store :meth:`manifest_store_setting` names (ManifestStoreError naming it when unset),
        carrying how this task reaches it (:meth:`store_access`): the one way a task gets a store."""
        from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore

        base, source = self.manifest_store_setting(base_uri)
        return ManifestStore.configured(base, source=source, access=self.store_access(base))

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
        record_formats: RecordFormats | None = None,
    ) -> PreflightReport:
        """Run :func:`~.kafka.operations.preflight.run_preflight` with this connection.

        A pipeline that contradicts what its connection states (``two_phase_commit``,
        ``transaction_timeout_ms``) is refused first, with a ConfigError naming both values: the
        connection's fields are what the Test button checked against the cluster.
        """
        from airflow_provider_kafka_eos.kafka.operations.preflight import run_preflight

        self._check_stated_expectations(int(transaction_timeout_ms), two_phase_commit)

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
            record_formats=record_formats,
        )

    def _check_stated_expectations(self, transaction_timeout_ms: int, two_phase_commit: bool) -> None:
        from airflow_provider_kafka_eos.kafka.errors import ConfigError

        stated_timeout, stated_2pc = self.transaction_timeout_ms(), self.two_phase_commit()
        source = f"connection {self.kafka_eos_conn_id!r}"
        if stated_timeout is not None and stated_timeout != transaction_timeout_ms:
            raise ConfigError(
                f"the pipeline's transaction_timeout_ms {transaction_timeout_ms} differs from the "
                f"transaction_timeout_ms {stated_timeout} stated on {source}: make them equal (or clear "
                "the connection's field)"
            )
        if stated_2pc and not two_phase_commit:
            raise ConfigError(
                f"{source} states two_phase_commit, but this pipeline runs without it: pass "
                "two_phase_commit=True (producer='arrow') or switch the connection's field off"
            )

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """Airflow 3.1's connection form (3.2+ reads provider info's ``conn-fields`` instead)."""
        return form.form_widgets()

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Airflow 3.1's standard-field behaviour (3.2+ reads provider info's ``ui-field-behaviour``)."""
        return form.ui_field_behaviour()

    def test_connection(self) -> tuple[bool, str]:
        """Airflow's "Test" button: every setting of the form, then the cluster and the manifest store.

        Checks, in order, stopping at the first failure (which the message names): the client
        configuration and our keys are valid; the cluster answers (capability summary); 2PC, when
        the connection asks for it, is advertised and enabled; the transaction timeout fits
        ``transaction.max.timeout.ms``; the manifest store can be listed. Never leaks secrets.
        """
        from airflow_provider_kafka_eos.kafka.errors import KafkaEosError

        try:
            config = self.client_config()
            store_uri = self.manifest_base_uri()
            access = self.store_access(store_uri)
            wants_2pc = self.two_phase_commit()
            timeout_ms = self.transaction_timeout_ms()
            caps = self.capabilities()
            problems = _expectation_problems(caps, wants_2pc=wants_2pc, timeout_ms=timeout_ms)
            store = _store_status(store_uri, access)
        except KafkaEosError as err:
            return False, str(err)
        except Exception as err:
            return (
                False,
                f"{type(err).__name__} while connecting (details withheld: they may contain settings)",
            )
        tv = caps.transaction_version
        summary = (
            f"Connected to {config.bootstrap_servers}: transaction.version {tv}, "
            f"EndTxn v{caps.end_txn_version}, "
            f"ListTransactions {'yes' if caps.can_list_transactions else 'no'}, "
            f"2PC advertised {'yes' if caps.two_phase_commit_advertised else 'no'}; {store}"
        )
        if problems:
            return False, f"{summary}. But: {'; '.join(problems)}"
        return True, summary


def _expectation_problems(
    caps: ClusterCapabilities, *, wants_2pc: bool, timeout_ms: int | None
) -> list[str]:
    """What the connection's ``two_phase_commit`` / ``transaction_timeout_ms`` ask and the cluster refuses."""
    problems = []
    if wants_2pc and not caps.two_phase_commit_advertised:
        problems.append(
            "two_phase_commit is on but the brokers do not advertise KIP-939 (InitProducerId v6); "
            "see docs/runbook/two-phase-commit.md"
        )
    elif wants_2pc and caps.two_phase_commit_enabled is False:
        problems.append(
            "two_phase_commit is on but the brokers' transaction.two.phase.commit.enable is false; "
            "see docs/runbook/two-phase-commit.md"
        )
    if timeout_ms is not None:
        limit, is_default = caps.effective_max_timeout_ms()
        if timeout_ms > limit:
            problems.append(
                f"transaction_timeout_ms {timeout_ms} exceeds the brokers' transaction.max.timeout.ms {limit}"
                f"{' (Kafka default; the broker config could not be read)' if is_default else ''}: "
                "producers would be refused; lower it or raise the broker limit"
            )
    return problems


def _store_status(store_uri: str | None, access: StoreAccess) -> str:
    """One phrase on the manifest store; ManifestStoreError when it exists but cannot be listed."""
    if store_uri is None:
        return "manifest store: not configured (pipelines and eos_cleanup need Manifest store URI)"
    from airflow_provider_kafka_eos.kafka.checkpoints.manifest import store_exists
    from airflow_provider_kafka_eos.kafka.errors import ManifestStoreError

    try:
        exists = store_exists(store_uri, access=access)
    except Exception as err:  # the text may echo storage credentials: name the type only
        raise ManifestStoreError(
            f"manifest store {store_uri} ({MANIFEST_BASE_URI_KEY}) cannot be listed: {type(err).__name__}; "
            "check the URI and the storage credentials of the Airflow workers"
        ) from None
    if not exists:
        return f"manifest store {store_uri}: does not exist yet (the first pipeline run creates it)"
    return f"manifest store {store_uri}: readable"
