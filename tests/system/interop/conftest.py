"""The reference client for the interop tests: ``interop/java`` built with Maven on first use.

Build output and jars go to a cache outside the repository (``$KAFKA_EOS_INTEROP_CACHE`` or
``~/.cache/kafka-eos/interop-java``), rebuilt when the pom or the source changes. Without Java 17
and Maven the tests skip, naming them.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3] / "interop" / "java"
CACHE_ENV = "KAFKA_EOS_INTEROP_CACHE"
BUILD_TIMEOUT_S = 600
RUN_TIMEOUT_S = 120


@dataclass(frozen=True)
class JavaInterop:
    """Runs ``kafkaeos.interop.TwoPhaseInterop`` with Kafka's Java client 4.4.0."""

    java: str
    classpath: str

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.java, "-Xmx128m", "-cp", self.classpath, "kafkaeos.interop.TwoPhaseInterop", *args],
            capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False,
        )


def _java_17(java: str) -> bool:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        return False
    match = re.search(r'version "(\d+)', out)
    return bool(match) and int(match.group(1)) >= 17


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted([ROOT / "pom.xml", *ROOT.rglob("*.java")]):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@pytest.fixture(scope="session")
def java_interop() -> JavaInterop:
    java, mvn = shutil.which("java"), shutil.which("mvn")
    if not java or not mvn or not _java_17(java):
        pytest.skip("needs Java 17 + Maven (to build interop/java against kafka-clients 4.4.0)")
    cache = pathlib.Path(os.environ.get(CACHE_ENV) or pathlib.Path.home() / ".cache/kafka-eos/interop-java")
    cache.mkdir(parents=True, exist_ok=True)
    marker, stamp = cache / "BUILT", _fingerprint()
    classpath = f"{cache / 'target' / 'classes'}{os.pathsep}{cache / 'libs' / '*'}"
    with open(cache / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test runs build once
        if not marker.is_file() or marker.read_text() != stamp:
            marker.unlink(missing_ok=True)
            shutil.rmtree(cache / "libs", ignore_errors=True)
            result = subprocess.run(
                [mvn, "-q", "-B", "-f", str(ROOT / "pom.xml"), f"-Dinterop.buildDir={cache / 'target'}",
                 "compile", "dependency:copy-dependencies", f"-DoutputDirectory={cache / 'libs'}",
                 "-DincludeScope=runtime"],
                capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False,
            )
            if result.returncode != 0:
                output = f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
                pytest.fail(f"building interop/java failed:\n{output}")
            marker.write_text(stamp)
    return JavaInterop(java, classpath)
