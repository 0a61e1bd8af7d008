"""Airflow discovers the provider the way a user's installation does (entry point, real Airflow)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

from airflow_provider_kafka_eos import CONNECTION_TYPE, get_provider_info


def test_package_name_is_the_distribution_name():
    """Airflow matches providers by distribution name; a mismatch hides the provider."""
    info = get_provider_info()
    assert importlib.metadata.distribution(info["package-name"]).metadata["Name"] == info["package-name"]
    assert info["versions"][0] == importlib.metadata.version(info["package-name"])


def test_airflow_providers_list_shows_the_provider():
    listing = subprocess.run(
        [sys.executable, "-m", "airflow", "providers", "list", "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
        check=True,
    )
    providers = {p["package_name"]: p for p in json.loads(listing.stdout)}
    assert "airflow-provider-kafka-eos" in providers, sorted(providers)
    assert providers["airflow-provider-kafka-eos"]["version"] == importlib.metadata.version(
        "airflow-provider-kafka-eos"
    )


def test_the_kafka_eos_connection_type_resolves_to_the_hook():
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    hook = ProvidersManagerTaskRuntime().hooks[CONNECTION_TYPE]
    assert hook is not None
    assert hook.hook_class_name == "airflow_provider_kafka_eos.hooks.kafka_eos.KafkaEosHook"
    assert hook.connection_id_attribute_name == "kafka_eos_conn_id"
    assert hook.package_name == "airflow-provider-kafka-eos"
