"""The test double of airflow-provider-kafka-eos: its own distribution, airflow-provider-kafka-eos-testing.

The embedded Kafka broker (``kafka-eos-devbroker``), the real-Kafka, Spark-cluster and S3 launchers,
``produce_transaction``/``count_keys`` helpers and the pytest plugin (opt-in:
``-p kafka_eos_testing.pytest_plugin``). It lives outside the provider's wheel so that no Airflow
worker installs a Kafka broker and its console script; docs/dependencies.md says how to install it.
"""

# Released in lockstep with the provider: the double answers the provider's own protocol paths
# (tests/project/test_testing_distribution.py keeps the two versions equal).
__version__ = "0.1.0"
