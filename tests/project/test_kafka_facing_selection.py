"""``--kafka-facing`` and ``--kafka-facing-elsewhere`` (the pytest plugin): complementary halves.

The apache pass runs the first, the embedded pass the second when both run (scripts/test_passes.py):
every test must land in exactly one of them, except the embedded broker's own tests, in both.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

SAMPLE = '''
import pytest

def test_plain(): pass
def test_facing(kafka_broker): pass

@pytest.mark.provider_logic
def test_provider_rule(kafka_broker): pass

@pytest.mark.broker_double
def test_double(kafka_broker): pass

@pytest.mark.apache_kafka
def test_launcher(): pass
'''


def _collected(tmp_path: pathlib.Path, *options: str) -> tuple[int, set[str]]:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "kafka_eos_testing.pytest_plugin",
         "-p", "no:cacheprovider", "-o", "addopts=", *options, str(tmp_path / "test_sample.py")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )
    names = {line.split("::")[-1] for line in result.stdout.splitlines() if "::" in line}
    return result.returncode, names


def test_the_two_halves_split_the_suite_and_share_only_the_brokers_own_tests(tmp_path):
    code, facing = _collected(tmp_path, "--kafka-facing")
    assert code == 0 and facing == {"test_facing", "test_double", "test_launcher"}
    code, elsewhere = _collected(tmp_path, "--kafka-facing-elsewhere")
    assert code == 0 and elsewhere == {"test_plain", "test_provider_rule", "test_double"}
    code, everything = _collected(tmp_path)
    assert facing | elsewhere == everything and facing & elsewhere == {"test_double"}


def test_both_halves_at_once_is_a_usage_error(tmp_path):
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "kafka_eos_testing.pytest_plugin",
         "-o", "addopts=", "--kafka-facing", "--kafka-facing-elsewhere", str(tmp_path / "test_sample.py")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )
    assert result.returncode == 4 and "select opposite halves" in result.stderr
