"""Kafka-side core, no Airflow imports; layers from the ground up: the modules here (errors,
config, validation), then ``protocol``, then ``admin`` / ``producers`` / ``checkpoints``, then
``operations``. See the package docstring of airflow_provider_kafka_eos and docs/architecture.md.
"""

from airflow_provider_kafka_eos._moved import install as _install_moved

_install_moved()  # the old flat module paths (kafka.transactions, kafka.manifest...) keep working
