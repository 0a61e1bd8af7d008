"""The log4j2 configuration spark-submit's driver JVM starts with: Spark's start-up chatter cut.

Why: ``SparkContext.setLogLevel`` (``spark/job.py``) only takes effect once the session exists;
everything the JVM logs before that (about 41 INFO lines per submit: version, security manager,
block manager, UI, executor start) went to the task log at Spark's default INFO. A log4j2 file
named on the driver's command line (``-Dlog4j2.configurationFile``) applies from the first line.

Its root level is ``KAFKA_EOS_SPARK_LOG_LEVEL`` (``kafka/log_levels.py``, default ``WARN``), so
the same switch still turns Spark's output up (``INFO``, ``DEBUG``...). A driver Java option that
already names a log4j2 file (yours) is left as it is. Only the driver is configured: in local mode
the executors live in its JVM; on a cluster their logs go to the workers, not to the task log.
No Airflow import (plain files and strings).
"""

from __future__ import annotations

import os
import tempfile

from airflow_provider_kafka_eos.kafka.log_levels import spark_log_level

__all__ = ["DRIVER_JAVA_OPTIONS", "log4j2_properties", "quiet_driver_conf"]

DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
_PROPERTY = "-Dlog4j2.configurationFile="


def log4j2_properties(level: str) -> str:
    """Spark's console layout (stderr), root logger at ``level``."""
    return "\n".join(
        [
            "# airflow-provider-kafka-eos (spark/log_config.py); KAFKA_EOS_SPARK_LOG_LEVEL sets the level",
            f"rootLogger.level = {level.lower()}",
            "rootLogger.appenderRef.stderr.ref = console",
            "appender.console.type = Console",
            "appender.console.name = console",
            "appender.console.target = SYSTEM_ERR",
            "appender.console.layout.type = PatternLayout",
            "appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex",
            "",
        ]
    )


def _config_file(level: str) -> str:
    """One file per level in the temp dir, written atomically (tasks of any user may share it)."""
    path = os.path.join(tempfile.gettempdir(), f"kafka-eos-log4j2-{level.lower()}-{os.getuid()}.properties")
    text = log4j2_properties(level)
    try:
        with open(path, encoding="utf-8") as existing:
            if existing.read() == text:
                return path
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".kafka-eos-log4j2-")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return path


def quiet_driver_conf(conf: dict[str, str] | None) -> dict[str, str]:
    """``conf`` with the driver's Java options naming the log4j2 file (unless they name one already)."""
    conf = dict(conf or {})
    options = str(conf.get(DRIVER_JAVA_OPTIONS) or "")
    if _PROPERTY in options:
        return conf
    level = spark_log_level()  # ConfigError naming KAFKA_EOS_SPARK_LOG_LEVEL for a bad value
    conf[DRIVER_JAVA_OPTIONS] = f"{options} {_PROPERTY}{_config_file(level)}".strip()
    return conf
