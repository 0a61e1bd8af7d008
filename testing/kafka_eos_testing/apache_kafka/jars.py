"""The Apache Kafka broker jars: fetched once with Maven into a cache outside the repository.

``pom.xml`` beside this module names the artifacts (``org.apache.kafka:kafka_2.13`` and a log
backend); ``mvn dependency:copy-dependencies`` copies them and every runtime dependency into
``<cache>/libs``. The cache counts as complete only when ``<cache>/COMPLETE`` lists exactly the
jars present with their sizes, so an interrupted fetch or a damaged cache is fetched again
instead of starting a broker that dies with a ClassNotFoundException.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
import time

from kafka_eos_testing.maven_fetch import locked_fetch, maven_failure, run_maven

KAFKA_VERSION = "4.4.0"
ARTIFACT = f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}"
CACHE_ENV = "KAFKA_EOS_KAFKA_CACHE"
POM = pathlib.Path(__file__).with_name("pom.xml")
FETCH_TIMEOUT_S = 900.0
_MARKER = "COMPLETE"
# Jars the broker cannot start without; their absence means the cache is not Kafka 4.4.0.
_REQUIRED = (f"kafka_2.13-{KAFKA_VERSION}.jar", f"kafka-clients-{KAFKA_VERSION}.jar")


class JarFetchError(RuntimeError):
    """Maven could not provide the Kafka jars (unreachable, or the cache is damaged)."""


def cache_dir() -> pathlib.Path:
    """Where the jars live: ``$KAFKA_EOS_KAFKA_CACHE`` or ``~/.cache/kafka-eos/apache-kafka-4.4.0``."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return pathlib.Path(configured).expanduser()
    return pathlib.Path.home() / ".cache" / "kafka-eos" / f"apache-kafka-{KAFKA_VERSION}"


def _listing(libs: pathlib.Path) -> str:
    return "".join(f"{p.name} {p.stat().st_size}\n" for p in sorted(libs.glob("*.jar")))


def cached_classpath(cache: pathlib.Path | None = None) -> str | None:
    """The classpath of a complete cache, or None when it must be fetched (again)."""
    cache = cache or cache_dir()
    libs, marker = cache / "libs", cache / _MARKER
    try:
        if marker.read_text() != _listing(libs):
            return None
    except OSError:
        return None
    if not all((libs / jar).is_file() for jar in _REQUIRED):
        return None
    return str(libs / "*")


def fetch_jars(cache: pathlib.Path | None = None, *, quiet: bool = True) -> str:
    """The broker's classpath (``<cache>/libs/*``), running Maven first unless the cache is complete."""
    return locked_fetch(cache or cache_dir(), cached_classpath, lambda c: _fetch(c, quiet), JarFetchError,
                        ARTIFACT)


def _fetch(cache: pathlib.Path, quiet: bool) -> str:
    staging = pathlib.Path(tempfile.mkdtemp(prefix="libs-", dir=cache))
    command = [
        "-B",
        "-f",
        str(POM),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}",
        "-DincludeScope=runtime",
    ]
    if quiet:
        command.insert(0, "-q")
    started = time.monotonic()
    try:
        result = run_maven(command, artifact=ARTIFACT, cache=cache, error=JarFetchError,
                           timeout_s=FETCH_TIMEOUT_S)
    except JarFetchError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if result.returncode != 0 or not all((staging / jar).is_file() for jar in _REQUIRED):
        shutil.rmtree(staging, ignore_errors=True)
        raise maven_failure(result, artifact=ARTIFACT, cache=cache, error=JarFetchError,
                            hint=" a damaged ~/.m2 entry can be removed and fetched again")
    libs = cache / "libs"
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    (cache / _MARKER).write_text(_listing(libs))
    (cache / "FETCH_SECONDS").write_text(f"{time.monotonic() - started:.1f}\n")
    classpath = cached_classpath(cache)
    if classpath is None:  # pragma: no cover - the listing was written from these very files
        raise JarFetchError(f"the jar cache {cache} changed while it was written; run again")
    return classpath
