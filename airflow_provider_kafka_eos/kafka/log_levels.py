"""How loud the client libraries under the provider are: quiet by default, one switch each.

Why: a Kafka-facing task printed about 19 kafka-python INFO lines (IO loop, transports) before
its one useful line, and the submit log carried about 330 lines of Spark INFO. The provider's
own loggers (``airflow_provider_kafka_eos.*``) are not touched; only these libraries are set:

- ``KAFKA_EOS_CLIENT_LOG_LEVEL`` (default ``WARNING``): the Python loggers of kafka-python
  (``kafka``) and of py4j (``py4j``, the Spark driver's bridge), in Airflow tasks (the hook sets
  them) and in the Spark job (its entry point does). Any Python level name or number.
- ``KAFKA_EOS_SPARK_LOG_LEVEL`` (default ``WARN``): Spark's own log level in the job, set as soon
  as its session exists (``SparkContext.setLogLevel``). A Spark level name.

Set either in the worker's environment (spark-submit inherits it) to turn the chatter back up,
e.g. ``KAFKA_EOS_CLIENT_LOG_LEVEL=INFO``. A value that is not a level is refused with an error
naming the variable, never ignored. No Airflow import: the Spark driver uses this module too.
"""

from __future__ import annotations

import logging
import os

from airflow_provider_kafka_eos.kafka.errors import ConfigError

ENV_CLIENT_LOG_LEVEL = "KAFKA_EOS_CLIENT_LOG_LEVEL"
ENV_SPARK_LOG_LEVEL = "KAFKA_EOS_SPARK_LOG_LEVEL"
CLIENT_LOGGERS = ("kafka", "py4j")
DEFAULT_CLIENT_LEVEL = "WARNING"
DEFAULT_SPARK_LEVEL = "WARN"
SPARK_LEVELS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")


def client_log_level() -> int:
    """The level for the client libraries' Python loggers (ConfigError names a bad variable)."""
    raw = (os.environ.get(ENV_CLIENT_LOG_LEVEL) or DEFAULT_CLIENT_LEVEL).strip()
    if raw.isdigit():
        return int(raw)
    level = logging.getLevelName(raw.upper())
    if not isinstance(level, int):
        raise ConfigError(
            f"{ENV_CLIENT_LOG_LEVEL}={raw!r} is not a Python log level: use DEBUG, INFO, WARNING, "
            "ERROR or CRITICAL"
        )
    return level


def quiet_client_loggers() -> int:
    """Set kafka-python's and py4j's loggers to :func:`client_log_level`; returns the level."""
    level = client_log_level()
    for name in CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(level)
    return level


def spark_log_level() -> str:
    """Spark's log level for the job (ConfigError names a bad variable)."""
    raw = (os.environ.get(ENV_SPARK_LOG_LEVEL) or DEFAULT_SPARK_LEVEL).strip().upper()
    if raw == "WARNING":
        raw = "WARN"
    if raw not in SPARK_LEVELS:
        raise ConfigError(
            f"{ENV_SPARK_LOG_LEVEL}={raw!r} is not a Spark log level: use one of {', '.join(SPARK_LEVELS)}"
        )
    return raw
