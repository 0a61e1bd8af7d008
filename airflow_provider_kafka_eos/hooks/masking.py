"""Airflow's secrets masker learns the Kafka secret key names as soon as the provider loads.

Airflow masks an extra's values by key name whenever a connection is read (``extra_dejson`` ->
``mask_secret(extra)``: each value whose key matches one of the masker's sensitive names), also in
tasks that never build our hook, e.g. a template reading
``{{ conn.kafka.extra_dejson['ssl.key.pem'] }}``. Its default names catch ``sasl.password`` or
``...client.secret`` but not ``sasl.jaas.config`` (the SCRAM password inside the JAAS line),
``ssl.key.pem`` / ``ssl.keystore.key`` (an inline private key) or ``sasl.oauthbearer.config``.
:func:`register_secret_names` adds those names to the masker of this process. It runs when the
provider loads: the entry-point plugin below (Airflow loads plugins in every task process before
it renders templates and at task start), the hook's import and ``get_provider_info``. A process
that loads no plugin (a task's supervisor) learns them from ``[core] sensitive_var_conn_names``
(docs/security.md has the line).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from airflow.sdk.plugins_manager import AirflowPlugin

__all__ = ["SECRET_KEYS", "SecretNamesPlugin", "register_secret_names", "unmasked_names"]

# Every extra key holding a secret (Java and librdkafka spellings; kafka/config.is_secret_key agrees).
SECRET_KEYS = (
    "sasl.jaas.config",
    "sasl.password",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.config",
    "ssl.key.pem",
    "ssl.keystore.key",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.password",
)


def _normalized(key: str) -> str:
    return re.sub(r"\W+", "_", key.strip().lower())  # how the masker compares names


def _maskers() -> Iterable[object]:
    from airflow.sdk._shared.secrets_masker import _secrets_masker as sdk_masker

    yield sdk_masker()
    try:  # the core masker (API server, scheduler); a task-only install may lack it
        from airflow._shared.secrets_masker import _secrets_masker as core_masker
    except ImportError:  # pragma: no cover - task-sdk-only installs
        return
    yield core_masker()


def unmasked_names(masker: object) -> list[str]:
    """The secret keys ``masker`` would not hide by name."""
    return [key for key in SECRET_KEYS if not masker.should_hide_value_for_key(key)]  # type: ignore[attr-defined]


def register_secret_names() -> None:
    """Add every secret key's normalized name the masker misses (idempotent, cheap)."""
    for masker in _maskers():
        fields = masker.sensitive_variables_fields  # type: ignore[attr-defined]
        for key in SECRET_KEYS:
            name = _normalized(key)
            if name not in fields and not masker.should_hide_value_for_key(key):  # type: ignore[attr-defined]
                fields.append(name)


class SecretNamesPlugin(AirflowPlugin):
    """Loaded by Airflow in every task process (entry point ``airflow.plugins``): registers the names."""

    name = "kafka_eos_secret_names"

    @classmethod
    def on_load(cls, *args, **kwargs) -> None:
        register_secret_names()


register_secret_names()
