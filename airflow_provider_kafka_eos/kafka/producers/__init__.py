"""Producers: the pre-commit half of the two-phase commit. The librdkafka (confluent-kafka)
producer and the Arrow-native one (RecordBatch v2 from Arrow columns, Java-compatible
partitioning, sent through ``protocol.wire``). Built on ``protocol``."""
