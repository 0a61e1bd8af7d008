"""The manifest store's credentials on Airflow workers: from an Airflow AWS connection.

Why a connection: a Celery worker shares nothing with the Spark submit's worker but Kafka, the
metadata database and the store, so the store's credentials come from where Airflow keeps
secrets (the connection, resolved through the secrets backend or the API server), not from each
worker's environment. Which connection, for an ``s3://`` / ``s3a://`` store:

- ``manifest_store_conn_id`` in the kafka_eos connection's extra: that connection, which must
  exist (a named connection that is missing is a ConfigError naming the key, never a silent
  fallback to other credentials);
- else ``aws_default`` when it exists;
- else none: s3fs's standard chain (``AWS_*`` environment variables, profile, instance role).

From the connection (Airflow's ``aws`` connection fields, read without the Amazon provider):
login = access key id, password = secret access key, extra ``aws_session_token``,
``region_name``, and ``endpoint_url`` (or ``service_config.s3.endpoint_url``). Other extra keys
(``role_arn``, ``profile_name``, ...) need the Amazon provider's session logic: refused, naming
the key, rather than silently ignored. The secret values are registered with the secrets masker
and go into the ``StoreAccess`` the hook returns (``kafka/checkpoints/store_objects.py``: handed to
every store call, never kept process-wide) and, for the Spark driver, into the submit operator's
0600 private file; never argv, logs or XCom.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from airflow_provider_kafka_eos.hooks import connection_form as form

__all__ = ["DEFAULT_AWS_CONN_ID", "S3_PROTOCOLS", "storage_options_from_connection", "store_connection_id"]

DEFAULT_AWS_CONN_ID = "aws_default"
S3_PROTOCOLS = frozenset({"s3", "s3a"})
_USED_EXTRA = frozenset({"aws_session_token", "region_name", "endpoint_url", "service_config",
                         "aws_access_key_id", "aws_secret_access_key"})


def store_connection_id(extra: dict[str, Any], base_uri: str, *, source: str) -> tuple[str | None, bool]:
    """The connection to take store credentials from, and whether it was named explicitly.

    ``(None, False)``: a local store, or none named for a scheme without connection support.
    """
    from airflow_provider_kafka_eos.kafka.errors import ConfigError

    named = extra.get(form.MANIFEST_STORE_CONN_ID_KEY)
    scheme = urlparse(base_uri).scheme
    if form.blank(named):
        return (DEFAULT_AWS_CONN_ID, False) if scheme in S3_PROTOCOLS else (None, False)
    if not isinstance(named, str):
        raise ConfigError(f"{source}: {form.MANIFEST_STORE_CONN_ID_KEY} must be a connection id (a string), "
                          f"got {type(named).__name__}")
    if scheme not in S3_PROTOCOLS:
        raise ConfigError(
            f"{source}: {form.MANIFEST_STORE_CONN_ID_KEY} {named!r} is set but the manifest store "
            f"{base_uri} is not on S3; credentials from a connection are supported for s3:// stores in "
            "this release (GCS/Azure: the client library's own credential chain). Remove the key")
    return named.strip(), True


def storage_options_from_connection(conn: Any, *, source: str, mask: Callable[[Any], None]) -> dict[str, Any]:
    """s3fs options from an AWS connection (see the module doc); ``mask`` registers each secret
    value with the secrets masker as it is read (the hook's, so one module owns masking)."""
    from airflow_provider_kafka_eos.kafka.errors import ConfigError

    try:
        extra = conn.extra_dejson or {}
    except Exception:
        raise ConfigError(f"{source}: extra is not valid JSON") from None
    unknown = sorted(k for k, v in extra.items() if k not in _USED_EXTRA and not form.blank(v))
    if unknown:
        raise ConfigError(
            f"{source}: extra key(s) {', '.join(unknown)} are not read by the manifest store (it uses "
            "login/password, aws_session_token, region_name, endpoint_url); use the access key fields, "
            "or leave the connection unset for the standard AWS credential chain")
    key = conn.login or extra.get("aws_access_key_id")
    secret = conn.password or extra.get("aws_secret_access_key")
    if bool(key) != bool(secret):
        raise ConfigError(f"{source}: an access key id needs its secret access key (and the other way round)")
    options: dict[str, Any] = {}
    if key:
        mask(secret)
        options.update(key=key, secret=secret)
    token = extra.get("aws_session_token")
    if not form.blank(token):
        mask(token)
        options["token"] = token
    endpoint = extra.get("endpoint_url") or ((extra.get("service_config") or {}).get("s3") or {}).get(
        "endpoint_url")
    if not form.blank(endpoint):
        options["endpoint_url"] = str(endpoint)
    region = extra.get("region_name")
    if not form.blank(region):
        options["client_kwargs"] = {"region_name": str(region)}
    return options
