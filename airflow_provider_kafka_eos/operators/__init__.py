"""See the package docstring of airflow_provider_kafka_eos."""

from airflow_provider_kafka_eos._moved import install as _install_moved

_install_moved()  # operators.assets / lineage / metrics / fail_now keep working from their old paths
