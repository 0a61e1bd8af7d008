"""client.properties read by us and by Kafka's own Java classes agree, file for file.

The Java side is real: ``java.util.Properties.load(InputStream)`` (what Kafka's tools use for
``--command-config``) and ``JaasContext.loadClientContext`` from the kafka-clients 4.4 jar of the
real-Kafka launcher's cache (fetched with Maven on first use). ``PropertiesParity.java`` is
compiled into a temporary directory here; no build output is kept. Each corpus file is also
written back by ``Properties.store`` (the escaped form Java tools emit) and read again by both.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from airflow_provider_kafka_eos.kafka.config import KafkaClientConfig
from airflow_provider_kafka_eos.kafka.errors import ConfigError
from airflow_provider_kafka_eos.kafka.jaas import JaasSyntaxError, parse_jaas_config
from airflow_provider_kafka_eos.kafka.java_properties import read_properties_file
from kafka_eos_testing.apache_kafka.jars import fetch_jars

pytestmark = pytest.mark.secured

HERE = Path(__file__).parent / "properties_parity"
CORPUS = sorted((HERE / "corpus").glob("*.properties"))
DEADLINE_S = 120


@pytest.fixture(scope="module")
def java(tmp_path_factory):
    """``run(*args)``: the compiled PropertiesParity program on the kafka-clients classpath."""
    if not shutil.which("javac"):
        pytest.skip("needs a JDK (javac); the real-Kafka passes have one")
    classpath = fetch_jars()
    out = tmp_path_factory.mktemp("parity-classes")
    subprocess.run(
        ["javac", "-d", str(out), "-cp", classpath, str(HERE / "PropertiesParity.java")],
        check=True,
        timeout=DEADLINE_S,
        capture_output=True,
    )

    def run(*args: str) -> str:
        done = subprocess.run(
            ["java", "-cp", f"{out}:{classpath}", "PropertiesParity", *args],
            check=True,
            timeout=DEADLINE_S,
            capture_output=True,
            text=True,
        )
        return done.stdout

    return run


def _python_view(path: Path) -> dict:
    try:
        props = read_properties_file(path)
    except ConfigError:
        return {"error": True, "properties": {}, "jaas": {}}
    jaas = {}
    for key, value in props.items():
        if key.endswith("jaas.config"):
            try:
                entries = parse_jaas_config(value)
            except JaasSyntaxError:
                entries = None
            if entries is None or len(entries) != 1:  # Kafka's clients take exactly one entry
                jaas[key] = "refused"
            else:
                jaas[key] = [
                    {"module": e.login_module, "flag": e.flag, "options": dict(sorted(e.options.items()))}
                    for e in entries
                ]
    return {"error": False, "properties": props, "jaas": jaas}


def _java_view(line: str) -> dict:
    doc = json.loads(line)
    if doc["error"] is not None:  # Java refused the file (keys read before the error do not count)
        return {"error": True, "properties": {}, "jaas": {}}
    jaas = {key: ("refused" if "refused" in v else v["entries"]) for key, v in doc["jaas"].items()}
    return {"error": doc["error"] is not None, "properties": doc["properties"], "jaas": jaas}


def test_corpus_covers_the_cases_the_issue_names():
    text = "".join(p.read_text(encoding="iso-8859-1") for p in CORPUS)
    for needle in ("\\u00", "\\\n", " : ", "\n!", "\n#", 'username\\="etl"', "password=123", "'single'"):
        assert needle in text, needle


def test_every_corpus_file_reads_as_java_reads_it(java):
    lines = java("load", *map(str, CORPUS)).splitlines()
    assert len(lines) == len(CORPUS)
    for path, line in zip(CORPUS, lines, strict=True):
        assert _python_view(path) == _java_view(line), path.name


def test_properties_store_output_reads_as_java_reads_it(java, tmp_path):
    stored = []
    for path in CORPUS:
        if _python_view(path)["error"]:
            continue
        target = tmp_path / path.name
        java("store", str(path), str(target))
        stored.append(target)
    assert stored
    lines = java("load", *map(str, stored)).splitlines()
    for path, line in zip(stored, lines, strict=True):
        java_view = _java_view(line)
        assert _python_view(path) == java_view, path.name
        assert java_view["properties"] == _python_view(HERE / "corpus" / path.name)["properties"]


def test_scram_password_with_escaped_characters_reaches_librdkafka():
    """The issue's two failures: an escaped password stayed escaped; store-style ``\\=`` was refused."""
    for name in ("04-jaas-scram.properties", "06-store-style.properties"):
        config = KafkaClientConfig.from_properties_file(
            HERE / "corpus" / name, overrides={"bootstrap.servers": "localhost:9093"}
        )
        assert config.get("sasl.username") == "etl"
        expected = 'p=w:d\\x"q\u00e4' if name.startswith("04") else "s3cr=t:\\x\u00e4!#"
        assert config.get("sasl.password") == expected
        assert expected not in repr(config)
