"""Provider metadata Airflow reads through the ``apache_airflow_provider`` entry point.

Its own module, as in Airflow's own providers (``airflow.providers.*.get_provider_info``): it reads
the connection form's fields (``hooks/connection_form.py``), so in the package ``__init__`` it would
lift the package's identity above the hooks, and every import of the version or the project URL
from below (the runbook, the Spark side) would run back up. Plain data: no Airflow import, cheap
while Airflow discovers providers.
"""

from __future__ import annotations

from airflow_provider_kafka_eos import CONNECTION_TYPE, PROJECT_URL, __version__
from airflow_provider_kafka_eos.hooks import connection_form, registry_form  # plain data, no Airflow import

PACKAGE = "airflow_provider_kafka_eos"

# What `airflow providers` and the UI's provider pages list, as the Kafka and Spark providers do:
# module paths only (Airflow imports them when asked), one integration for every section.
_INTEGRATION = "Kafka exactly-once (EOS)"
_MODULES = {
    "operators": ["submit", "connect_submit", "commit", "abort", "resolve", "approval", "preflight"],
    "hooks": ["kafka_eos", "schema_registry", "spark_submit"],
    "sensors": ["lingering"],
    "triggers": ["lingering", "committed_input"],
}


def get_provider_info() -> dict:
    """Provider metadata Airflow reads through the ``apache_airflow_provider`` entry point."""
    return {
        "package-name": "airflow-provider-kafka-eos",
        "name": "Kafka exactly-once (EOS) for PySpark",
        "documentation-url": f"{PROJECT_URL}#readme",
        "description": (
            "Two-phase commit of Kafka transactions prepared by PySpark jobs, with Airflow as "
            "the transaction manager: submit, commit, abort, lingering-transaction sensor."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": _INTEGRATION,
                "external-doc-url": f"{PROJECT_URL}#readme",
                "tags": ["apache", "software"],
            }
        ],
        **{
            section: [
                {
                    "integration-name": _INTEGRATION,
                    "python-modules": [f"{PACKAGE}.{section}.{module}" for module in modules],
                }
            ]
            for section, modules in _MODULES.items()
        },
        "connection-types": [
            {
                "connection-type": CONNECTION_TYPE,
                "hook-name": "Kafka (exactly-once)",  # what the UI lists, without importing the hook
                "hook-class-name": "airflow_provider_kafka_eos.hooks.kafka_eos.KafkaEosHook",
                # The extra is the whole librdkafka client config as JSON (the shape of Airflow's
                # ``kafka`` connection); each form field is one key of it (hooks/connection_form.py).
                "ui-field-behaviour": connection_form.ui_field_behaviour_info(),
                "conn-fields": connection_form.conn_fields(),
            },
            {
                # The registry the record formats resolve against (hooks/registry_form.py).
                "connection-type": registry_form.REGISTRY_CONNECTION_TYPE,
                "hook-name": registry_form.REGISTRY_HOOK_NAME,
                "hook-class-name": "airflow_provider_kafka_eos.hooks.schema_registry.SchemaRegistryHook",
                "ui-field-behaviour": connection_form.ui_field_behaviour_info(
                    registry_form.REGISTRY_UI_FIELD_BEHAVIOUR),
                "conn-fields": connection_form.conn_fields(registry_form.REGISTRY_FIELDS),
            },
        ],
    }
