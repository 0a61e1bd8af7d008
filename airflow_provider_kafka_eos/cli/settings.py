"""Where ``kafka-eos-txn`` gets its client settings and manifest store, and the request it builds.

Three sources, combined one way: a ``client.properties`` file (``--command-config``, as Kafka's
tools take it), an Airflow connection (``--conn-id``, through the provider's hook: the same
settings a task would use), and the environment; ``--bootstrap-server`` wins over each. Secrets
never come from the command line, where ``ps`` would show them.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable
from typing import Any

from airflow_provider_kafka_eos.cli.options import (
    ENV_BOOTSTRAP,
    ENV_COMMAND_CONFIG,
    ENV_MANIFEST_BASE,
    MANIFEST_BASE_KEY,
)


class _Airflow:
    """The Airflow connection named by ``--conn-id``: its client config and its manifest store."""

    def __init__(self, conn_id: str):
        from airflow_provider_kafka_eos.kafka.errors import UsageError

        try:
            import airflow  # noqa: F401 (only to tell "not installed" from a broken connection)
        except ImportError:
            raise UsageError(
                f"--conn-id {conn_id!r} needs Apache Airflow, which is not installed in this Python "
                "environment; install the provider where Airflow is, or give --bootstrap-server / "
                "--command-config instead"
            ) from None
        from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook

        self.conn_id = conn_id
        self.hook = KafkaEosHook(conn_id)


    def client_config(self) -> Any:
        return self._ask(self.hook.client_config)

    def manifest_base_uri(self) -> str | None:
        return self._ask(self.hook.manifest_base_uri)

    def store_access(self, uri: str | None) -> Any:
        """How to reach the store of ``uri``: the connection's store credentials, as a task would."""
        return self._ask(lambda: self.hook.store_access(uri))

    def _ask(self, call: Callable[[], Any]) -> Any:
        """``call()``; Airflow's own failures (no such connection, no database) named as ours."""
        from airflow_provider_kafka_eos.kafka.errors import ConfigError, KafkaEosError

        try:
            with contextlib.redirect_stdout(sys.stderr):  # Airflow's log lines are not our output
                return call()
        except KafkaEosError:
            raise
        except Exception as exc:  # Airflow's AirflowNotFoundException, a database that is not set up
            detail = str(exc).splitlines()[0] if str(exc) else "no detail"
            raise ConfigError(
                f"Airflow connection {self.conn_id!r} could not be read ({type(exc).__name__}: {detail}); "
                f"check `airflow connections get {self.conn_id}` on this machine"
            ) from None


def airflow_connection(args: argparse.Namespace) -> _Airflow | None:
    """The ``--conn-id`` connection, or None without one (UsageError when Airflow is missing)."""
    return _Airflow(args.conn_id) if args.conn_id else None


def command_properties(args: argparse.Namespace, env: Any) -> tuple[str | None, dict[str, str]]:
    """The --command-config file (or env) parsed, and its path."""
    from airflow_provider_kafka_eos.kafka.config import read_properties_file

    path = args.command_config or env.get(ENV_COMMAND_CONFIG)
    return path, (read_properties_file(path) if path else {})


def client_config_of(
    args: argparse.Namespace,
    env: Any,
    path: str | None = None,
    props: dict[str, str] | None = None,
    connection: _Airflow | None = None,
) -> Any:
    """--command-config (or its env var) or --conn-id + --bootstrap-server + secrets from the environment.

    The parts combine: ``--bootstrap-server`` wins over the file's ``bootstrap.servers``,
    ``$KAFKA_BOOTSTRAP_SERVERS`` fills in when neither has one, and every secret the
    environment supplies (``KAFKA_EOS_SASL_PASSWORD``...; ``config.SECRET_ENV_VARS``) wins over
    the file, so a file may leave the password out. The file's ``manifest_base_uri`` is ours
    (the manifest store), not a client property. ``--conn-id`` and ``--command-config`` are two
    answers to one question: both together is refused.
    """
    from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig, settings_from_env
    from airflow_provider_kafka_eos.kafka.errors import UsageError

    if props is None:
        path, props = command_properties(args, env)
    overrides: dict[str, Any] = settings_from_env(env)
    if args.bootstrap_servers:
        overrides["bootstrap.servers"] = args.bootstrap_servers
    if connection is not None:
        if args.command_config:
            raise UsageError("--conn-id and --command-config both name the client settings: give one")
        base = connection.client_config()
        return base.with_overrides(overrides) if overrides else base
    defaults = {"bootstrap.servers": env[ENV_BOOTSTRAP]} if env.get(ENV_BOOTSTRAP) else {}
    if path:
        client = {k: v for k, v in props.items() if k != MANIFEST_BASE_KEY}
        return KafkaClientConfig.from_properties(
            client, source=str(path), overrides=overrides, defaults=defaults
        )
    settings = {**defaults, **overrides}
    if "bootstrap.servers" not in settings:
        raise UsageError(
            "--bootstrap-server is required (or bootstrap.servers in --command-config, or --conn-id)")
    return KafkaClientConfig.from_mapping(settings, source="command line")


def manifest_base_of(
    args: argparse.Namespace, env: Any, props: dict[str, str], connection: _Airflow | None = None
) -> str | None:
    """--manifest-base, else the key in --command-config or the connection, else the environment."""
    if args.manifest_base:
        return args.manifest_base
    if props.get(MANIFEST_BASE_KEY):
        return props[MANIFEST_BASE_KEY]
    if connection is not None and connection.manifest_base_uri():
        return connection.manifest_base_uri()
    return env.get(ENV_MANIFEST_BASE) or None


def store_access_for(connection: _Airflow | None, uri: str | None) -> Any:
    """The store credentials for ``uri``: ``--conn-id``'s (the task's rule), else the store client's
    standard chain (``AWS_*`` variables, profile, instance role)."""
    from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import STANDARD_CHAIN

    return connection.store_access(uri) if connection is not None and uri else STANDARD_CHAIN


def resolution_request_of(args: argparse.Namespace, manifest_base: str | None = None) -> Any:
    """The parsed command line as a validated ``ResolutionRequest`` (UsageError names the option)."""
    from airflow_provider_kafka_eos.kafka.errors import UsageError
    from airflow_provider_kafka_eos.kafka.operations.resolution_request import ResolutionRequest
    from airflow_provider_kafka_eos.kafka.validation import parse_duration_ms

    if getattr(args, "record_formats", None) and not args.topic:
        raise UsageError("preflight --record-formats checks the --topic(s) it is given: name at least one")
    return ResolutionRequest(  # which options a command takes is the parser's rule (options.COMMANDS)
        action=args.command,
        transactional_id=args.transactional_id,
        producer_id=args.producer_id,
        epoch=args.epoch,
        prefixes=tuple(args.prefix),
        states=tuple(args.state),
        min_age_ms=parse_duration_ms(args.min_age),
        manifest_uri=args.manifest,
        dry_run=args.dry_run,
        manifest_base_uri=manifest_base,
        protect=not args.unprotected,
        topics=tuple(args.topic),
        transaction_timeout_ms=args.transaction_timeout_ms,
        two_phase_commit=args.two_phase_commit,
        partition=args.partition,
        force=args.force,
    ).validate()


def record_formats_of(args: Any) -> Any:
    """``--record-formats FILE`` as ``RecordFormats`` (None without it); the file's errors are named."""
    import json

    from airflow_provider_kafka_eos.kafka.errors import UsageError
    from airflow_provider_kafka_eos.kafka.registry.config import RecordFormats

    path = getattr(args, "record_formats", None)
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise UsageError(f"--record-formats {path}: cannot be read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"--record-formats {path}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict) or set(data) - {"key", "value", "registry"}:
        raise UsageError(f"--record-formats {path}: a JSON object of key, value and registry")
    return RecordFormats(**data)
