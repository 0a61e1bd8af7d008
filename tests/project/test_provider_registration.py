"""Airflow discovers the provider the way a user's installation does (entry point, real Airflow)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import pathlib
import re
import subprocess
import sys

from airflow_provider_kafka_eos import CONNECTION_TYPE
from airflow_provider_kafka_eos.get_provider_info import get_provider_info


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


def test_the_ui_shows_a_readable_connection_type_and_a_documentation_url():
    """Before: the connection form listed the raw id ``kafka_eos`` and the provider's doc link was empty."""
    from airflow.providers_manager import ProvidersManager

    from airflow_provider_kafka_eos import PROJECT_URL

    manager = ProvidersManager()
    manager.initialize_providers_hooks()
    assert manager._hook_name_dict[CONNECTION_TYPE] == "Kafka (exactly-once)"
    provider = manager.providers["airflow-provider-kafka-eos"]
    assert provider.data["documentation-url"].startswith(PROJECT_URL)


def test_package_metadata_points_at_the_project_and_carries_the_license():
    from airflow_provider_kafka_eos import PROJECT_URL

    meta = importlib.metadata.metadata("airflow-provider-kafka-eos")
    urls = dict(entry.split(", ", 1) for entry in meta.get_all("Project-URL") or [])
    assert set(urls) >= {"Documentation", "Source", "Runbook"}
    assert all(url.startswith(PROJECT_URL) for url in urls.values()), urls
    repo = pathlib.Path(__file__).resolve().parents[2]
    assert "Apache License" in (repo / "LICENSE").read_text() and "END OF TERMS AND CONDITIONS" in (
        repo / "LICENSE"
    ).read_text()


def test_the_readme_reads_on_the_package_index_every_link_is_absolute():
    """The package index renders README.md without the repository: a relative link is a dead link there."""
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    targets = re.findall(r"\]\(([^)]+)\)", readme)
    assert targets
    assert [t for t in targets if not t.startswith("https://")] == []


def test_the_pytest_plugin_is_not_loaded_into_every_pytest_run():
    """Before: a ``pytest11`` entry point loaded the plugin (and the 5,000-line broker) for any user."""
    eps = importlib.metadata.distribution("airflow-provider-kafka-eos").entry_points
    assert [ep for ep in eps if ep.group == "pytest11"] == []
    extras = importlib.metadata.metadata("airflow-provider-kafka-eos").get_all("Provides-Extra")
    assert "testing" in extras
