"""A Confluent-API-compatible Schema Registry on loopback: Apicurio Registry, fetched with Maven.

    python -m kafka_eos_testing.schema_registry          # foreground; prints the URL to use

Why Apicurio: it serves the Confluent API (``/apis/ccompat/v7``) that confluent-kafka's
``SchemaRegistryClient`` and its Avro / Protobuf / JSON Schema serializers talk to, it is on Maven
Central (Confluent's own server and Karapace are not on a registry this project can use), and
3.0.9's runner jar starts on Java 17 (3.3.x needs Java 21). Its storage is an in-memory database:
a restart starts empty, so one server per test session and unique subject names per test.

``io.apicurio:apicurio-registry-app:3.0.9:tar.gz:all`` (~105 MB) is copied once with
``mvn dependency:copy`` and unpacked into ``~/.cache/kafka-eos/apicurio-registry-3.0.9`` (or
``$KAFKA_EOS_REGISTRY_CACHE``); the cache counts only with its ``COMPLETE`` marker, written last,
and a file lock keeps parallel test processes from fetching twice (as ``apache_kafka/jars.py``).

Both the HTTP port and Quarkus's management port (which defaults to 0.0.0.0:9000) are bound to
127.0.0.1 on free ports. Test-only: nothing in the provider imports this module.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import shutil
import tarfile
import tempfile
import time
import urllib.request

from kafka_eos_testing.launched import LaunchedServer, free_port
from kafka_eos_testing.maven_fetch import locked_fetch, maven_failure, run_maven

__all__ = ["APICURIO_VERSION", "RegistryFetchError", "SchemaRegistryServer", "fetch_registry"]

APICURIO_VERSION = "3.0.9"
ARTIFACT = f"io.apicurio:apicurio-registry-app:{APICURIO_VERSION}:tar.gz:all"
CACHE_ENV = "KAFKA_EOS_REGISTRY_CACHE"
FETCH_TIMEOUT_S = 900.0
_RUNNER = f"apicurio-registry-app-{APICURIO_VERSION}-runner.jar"
_MARKER = "COMPLETE"


class RegistryFetchError(RuntimeError):
    """Maven could not provide the registry (unreachable, or the cache is damaged)."""


def cache_dir() -> pathlib.Path:
    """``$KAFKA_EOS_REGISTRY_CACHE`` or ``~/.cache/kafka-eos/apicurio-registry-<version>``."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return pathlib.Path(configured).expanduser()
    return pathlib.Path.home() / ".cache" / "kafka-eos" / f"apicurio-registry-{APICURIO_VERSION}"


def _cached_runner(cache: pathlib.Path) -> pathlib.Path | None:
    runner = cache / "app" / _RUNNER
    if (cache / _MARKER).is_file() and runner.is_file() and (cache / "app" / "lib").is_dir():
        return runner
    return None


def fetch_registry(cache: pathlib.Path | None = None) -> pathlib.Path:
    """The runner jar, fetched and unpacked first unless the cache is complete."""
    return locked_fetch(cache or cache_dir(), _cached_runner, _fetch, RegistryFetchError, ARTIFACT)


def _fetch(cache: pathlib.Path) -> pathlib.Path:
    staging = pathlib.Path(tempfile.mkdtemp(prefix="fetch-", dir=cache))
    started = time.monotonic()
    try:
        result = run_maven(
            ["-q", "-B", "dependency:copy", f"-Dartifact={ARTIFACT}", f"-DoutputDirectory={staging}"],
            artifact=ARTIFACT, cache=cache, error=RegistryFetchError, timeout_s=FETCH_TIMEOUT_S, cwd=staging)
        archives = list(staging.glob("*.tar.gz"))
        if result.returncode != 0 or len(archives) != 1:
            raise maven_failure(result, artifact=ARTIFACT, cache=cache, error=RegistryFetchError)
        unpacked = staging / "app"
        with tarfile.open(archives[0]) as archive:
            archive.extractall(unpacked, filter="data")
        if not (unpacked / _RUNNER).is_file():
            raise RegistryFetchError(f"{ARTIFACT} has no {_RUNNER}: the archive's layout changed")
        shutil.rmtree(cache / "app", ignore_errors=True)
        unpacked.rename(cache / "app")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    (cache / "FETCH_SECONDS").write_text(f"{time.monotonic() - started:.1f}\n")
    (cache / _MARKER).write_text(f"{ARTIFACT}\n")
    return cache / "app" / _RUNNER


class SchemaRegistryServer(LaunchedServer):
    """One Apicurio Registry process on 127.0.0.1; ``stop()`` (or the context manager) ends it.

    ``url`` is the Confluent-compatible API's base, what ``SchemaRegistryClient({"url": ...})``
    takes; ``start_timeout_s`` bounds the readiness wait (5-17 s on a loaded 2-core machine).
    """

    what = "the schema registry"

    def __init__(self, *, log_path: pathlib.Path | None = None, start_timeout_s: float = 120.0,
                 java: str | None = None) -> None:
        runner = fetch_registry()
        self.port = free_port()
        self.management_port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base_url}/apis/ccompat/v7"
        self.log_path = log_path
        java = java or shutil.which("java")
        if java is None:
            raise RegistryFetchError("the registry needs Java 17+ (java is not on PATH)")
        command = [
            java, "-Xms64m", "-Xmx384m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
            "-Dquarkus.http.host=127.0.0.1", f"-Dquarkus.http.port={self.port}",
            "-Dquarkus.management.host=127.0.0.1", f"-Dquarkus.management.port={self.management_port}",
            "-Dquarkus.log.console.level=WARN",
            "-jar", str(runner),
        ]
        self._launch(command, start_timeout_s=start_timeout_s, cwd=runner.parent)

    def _ready(self) -> bool:
        # The Confluent API answering, not just the port: the storage is initialised by then.
        try:
            urllib.request.urlopen(f"{self.url}/subjects", timeout=2).close()  # noqa: S310 (loopback)
        except OSError:
            return False
        return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.parse_args(argv)
    with SchemaRegistryServer() as server:
        print(f"schema registry (Apicurio {APICURIO_VERSION}) ready in {server.startup_s:.1f} s: "
              f"{server.url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            server.process.wait()


if __name__ == "__main__":
    main()
