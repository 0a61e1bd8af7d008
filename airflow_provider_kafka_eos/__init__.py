"""Exactly-once PySpark -> Kafka writes with Airflow as the two-phase-commit transaction manager.

The import of this package must stay cheap: Airflow calls ``get_provider_info`` while it
discovers providers, and Spark executors import the ``kafka`` sub-package, so nothing here
may import Airflow, Spark or a Kafka client.
"""

from __future__ import annotations

__version__ = "0.1.0"

CONNECTION_TYPE = "kafka_eos"
# The project's home: documentation links, runbook URLs and the package metadata all start here
# (pyproject.toml repeats it for the package index; tests/project/test_provider_registration.py checks).
PROJECT_URL = "https://github.com/airflow-provider-kafka-eos/airflow-provider-kafka-eos"

# What `airflow providers` and the UI's provider pages list, as the Kafka and Spark providers do:
# module paths only (Airflow imports them when asked), one integration for every section.
_INTEGRATION = "Kafka exactly-once (EOS)"
_MODULES = {
    "operators": ["submit", "commit", "abort", "resolve", "approval", "preflight"],
    "hooks": ["kafka_eos", "spark_submit"],
    "sensors": ["lingering"],
    "triggers": ["lingering", "committed_input"],
}


def get_provider_info() -> dict:
    """Provider metadata Airflow reads through the ``apache_airflow_provider`` entry point."""
    from airflow_provider_kafka_eos.hooks import connection_form  # plain data, no Airflow import

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
                    "python-modules": [f"{__name__}.{section}.{module}" for module in modules],
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
            }
        ],
    }
