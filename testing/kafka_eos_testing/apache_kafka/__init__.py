"""Real Apache Kafka 4.4 for tests, the demo and ``./run kafka`` (see docs/real-kafka.md)."""

from .cluster import ApacheKafkaCluster, KafkaNode, KafkaStartError
from .jars import CACHE_ENV, KAFKA_VERSION, JarFetchError, cache_dir, fetch_jars
from .options import KafkaOptions, UnsupportedOption

__all__ = [
    "CACHE_ENV",
    "KAFKA_VERSION",
    "ApacheKafkaCluster",
    "JarFetchError",
    "KafkaNode",
    "KafkaOptions",
    "KafkaStartError",
    "UnsupportedOption",
    "cache_dir",
    "fetch_jars",
]
