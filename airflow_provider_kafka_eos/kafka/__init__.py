"""Kafka-side core, no Airflow imports; layers from the ground up: the modules here (errors,
config, validation), then ``protocol``, then ``admin`` / ``producers`` / ``checkpoints``, then
``operations``. See the package docstring of airflow_provider_kafka_eos and docs/architecture.md.
"""
