"""pytest plugin: the kafka_broker fixture (embedded broker, or KAFKA_BOOTSTRAP_SERVERS)."""
