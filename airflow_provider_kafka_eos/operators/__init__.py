"""See the package docstring of airflow_provider_kafka_eos."""
