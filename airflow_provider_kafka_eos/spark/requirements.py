"""What the job side needs, checked where it runs: the Spark versions we support and the
packages the driver and the executors import.

The executors of a real cluster do not have this provider installed (its code reaches them
with the job, see ``spark/shipping.py``), and often not every package the write needs either.
Without these checks a missing package surfaces as a pickling or import traceback from deep
inside PySpark's worker, four task attempts later; with them the job fails in its first task
with one line that names the package and the ``pip install`` line that fixes it.

The version bounds in the install line come from this provider's own package metadata
(``pyproject.toml`` is their one owner); where the metadata is not installed (a driver that got the
provider through ``--py-files``) the line names the package without bounds.
"""

from __future__ import annotations

import importlib
import re
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from airflow_provider_kafka_eos.kafka.errors import ConfigError, UnsupportedCapabilityError

__all__ = [
    "CODEC_REQUIREMENTS",
    "JOB_REQUIREMENTS",
    "MISSING_MARKER",
    "RUNBOOK",
    "SUPPORTED_SPARK",
    "Requirement",
    "check_distribution_pair",
    "check_importable",
    "check_spark_version",
    "executor_python",
    "install_specs",
    "missing_requirement_error",
    "requirements_for",
    "translate_task_failure",
]

# The range of Spark (JVM) and PySpark versions the writer and the job run on; the [spark]
# extra in pyproject.toml admits only versions inside it (a test checks).
SUPPORTED_SPARK = ">=3.5,<5"
_LOWEST, _BEYOND = (3, 5), (5, 0)
RUNBOOK = RUNBOOK_JOB_SIDE = "spark-job-requirements"
PROVIDER_DISTRIBUTION = "airflow-provider-kafka-eos"
# Executors prefix their one-line message with this, so the driver can find it in Spark's error.
MISSING_MARKER = "KAFKA_EOS_MISSING_REQUIREMENT:"


@dataclass(frozen=True)
class Requirement:
    """One package the write imports on the driver and in every task."""

    distribution: str  # the name pip installs
    module: str  # what the check imports: exactly what the write path needs from the package
    why: str
    producers: tuple[str, ...] = ("arrow", "librdkafka")  # the producers (spark/writer.py) needing it


JOB_REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement("pyarrow", "pyarrow", "mapInArrow hands the rows to the producers as Arrow batches"),
    # kafka-python 2.x has no kafka.net: importing it tells "too old" from "present".
    Requirement("kafka-python", "kafka.net.compat",
                "the coordinator calls and the Arrow producer's wire layer (kafka-python >= 3)"),
    Requirement("confluent-kafka", "confluent_kafka", "the librdkafka transactional producer",
                ("librdkafka",)),
    Requirement("numpy", "numpy", "the Arrow producer encodes record batches with it", ("arrow",)),
    Requirement("crc32c", "crc32c", "the Arrow producer's record-batch checksums", ("arrow",)),
)


# What the Arrow producer imports for the connection's compression.type (kafka/producers/compression.py); only
# a write that names the codec needs it (librdkafka carries its codecs inside confluent-kafka).
CODEC_REQUIREMENTS: dict[str, Requirement] = {
    "snappy": Requirement("python-snappy", "snappy", "compression.type=snappy on the Arrow producer",
                          ("arrow",)),
    "lz4": Requirement("lz4", "lz4.frame", "compression.type=lz4 on the Arrow producer", ("arrow",)),
    "zstd": Requirement("zstandard", "zstandard", "compression.type=zstd on the Arrow producer", ("arrow",)),
}


def requirements_for(producer: str | None, codec: str | None = None) -> tuple[Requirement, ...]:
    """What a write with ``producer`` (``None``: every producer's requirements) and the connection's
    ``compression.type`` ``codec`` imports."""
    needed = tuple(r for r in JOB_REQUIREMENTS if producer is None or producer in r.producers)
    extra = CODEC_REQUIREMENTS.get(codec or "")
    if extra is not None and (producer is None or producer in extra.producers):
        needed += (extra,)
    return needed


def check_spark_version(version: str, *, where: str) -> None:
    """Refuse a Spark outside ``SUPPORTED_SPARK`` before anything runs, naming the range."""
    parsed = _major_minor(version)
    if parsed is None or not (_LOWEST <= parsed < _BEYOND):
        raise UnsupportedCapabilityError(
            f"{where} is Spark {version}; the exactly-once writer supports Spark and PySpark "
            f"{SUPPORTED_SPARK} (3.5.x and 4.x): run the job on a supported Spark, or install the "
            "[spark] extra's PySpark",
            runbook=RUNBOOK,
        )


def check_distribution_pair(versions: Mapping[str, str | None] | None = None) -> None:
    """Refuse ``pyspark`` and ``pyspark-client`` of different versions in one environment.

    Both install the same ``pyspark`` package folder; the Spark provider pulls
    ``pyspark-client`` (4.x), so a ``pyspark`` of another version beside it leaves a mix of two
    versions' files (it fails later, inside py4j, with a constructor error).
    """
    if versions is None:
        versions = {name: _installed_version(name) for name in ("pyspark", "pyspark-client")}
    classic, client = versions.get("pyspark"), versions.get("pyspark-client")
    if classic and client and classic != client:
        raise ConfigError(
            f"pyspark {classic} and pyspark-client {client} are installed in one environment; both write "
            f"the same 'pyspark' package, so its files are a mix of two versions. Install the same "
            f"version of both (pip install 'pyspark=={client}'), or run the job in its own environment "
            "without the Spark provider (python_executable)",
            runbook=RUNBOOK,
        )


def install_specs() -> dict[str, str]:
    """``distribution -> requirement string`` (with this provider's bounds where known)."""
    specs = {r.distribution: r.distribution for r in (*JOB_REQUIREMENTS, *CODEC_REQUIREMENTS.values())}
    try:
        from importlib.metadata import requires

        declared = requires(PROVIDER_DISTRIBUTION) or []
    except Exception:  # not installed (shipped as a zip), or broken metadata: bare names are still right
        declared = []
    for line in declared:
        text = line.split(";", 1)[0].strip()
        match = re.match(r"[A-Za-z0-9._-]+", text)
        if match and _normalise(match.group(0)) in {_normalise(name) for name in specs}:
            name = next(n for n in specs if _normalise(n) == _normalise(match.group(0)))
            specs[name] = name + text[match.end():].replace(" ", "")
    return specs


def check_importable(
    specs: Mapping[str, str] | None, *, where: str, marked: bool = False, producer: str | None = None,
    codec: str | None = None,
) -> None:
    """Import every requirement; when any fails, raise one line naming them and the fix.

    Called by the job before Spark starts (the driver) and at the top of every write task
    (``marked=True``: the message then starts with ``MISSING_MARKER``, so the driver can find
    it inside Spark's task-failure text and raise it alone).
    """
    missing = []
    for requirement in requirements_for(producer, codec):
        try:
            importlib.import_module(requirement.module)
        except ImportError as exc:
            missing.append((requirement, _short(exc)))
    if missing:
        error = missing_requirement_error(missing, specs or {}, where=where)
        if marked:
            error = ConfigError(f"{MISSING_MARKER} {error.cause}", runbook=RUNBOOK)
        raise error


def missing_requirement_error(
    missing: list[tuple[Requirement, str]], specs: Mapping[str, str], *, where: str
) -> ConfigError:
    names = ", ".join(r.distribution for r, _ in missing)
    reasons = "; ".join(f"{r.distribution}: {reason} ({r.why})" for r, reason in missing)
    line = "pip install " + " ".join(f"'{specs.get(r.distribution, r.distribution)}'" for r, _ in missing)
    return ConfigError(
        f"{where} lacks {names}, a job-side requirement of the exactly-once write ({reasons}); install it "
        f"into that Python: {line}",
        runbook=RUNBOOK,
    )


def executor_python() -> str:
    """How a task names the Python it runs in (the one that lacks a package)."""
    return f"the executor Python {sys.executable} on {socket.gethostname()}"


def translate_task_failure(exc: BaseException, specs: Mapping[str, str]) -> ConfigError | None:
    """The one-line error hidden in a failed Spark job's text, or None when it is something else.

    Recognises the tasks' own ``MISSING_MARKER`` line, and the import errors PySpark's worker
    raises before our task function runs (pyarrow for ``mapInArrow``; this provider's package
    when its code did not reach the executor).
    """
    text = str(exc)
    marker = text.find(MISSING_MARKER)
    if marker >= 0:
        line = text[marker + len(MISSING_MARKER):].splitlines()[0]
        return ConfigError(line.split(". Next step:", 1)[0].strip(), runbook=RUNBOOK)
    match = re.search(r"No module named '([A-Za-z0-9_.]+)'", text)
    if match is None:
        return None
    module = match.group(1)
    for requirement in (*JOB_REQUIREMENTS, *CODEC_REQUIREMENTS.values()):
        if module == requirement.module or requirement.module.startswith(module + "."):
            return missing_requirement_error([(requirement, f"No module named '{module}'")], specs,
                                             where="an executor's Python")
    if module.split(".")[0] == "airflow_provider_kafka_eos":
        return ConfigError(
            f"an executor could not import {module}: the provider's code did not reach it (the writer "
            "ships it with SparkContext.addPyFile, the submit operator with --py-files)",
            runbook=RUNBOOK,
        )
    return None


def _installed_version(distribution: str) -> str | None:
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python < 3.8
        return None
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def _major_minor(version: str) -> tuple[int, int] | None:
    match = re.match(r"\s*(\d+)\.(\d+)", str(version))
    return (int(match.group(1)), int(match.group(2))) if match else None


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _short(exc: BaseException | str) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
