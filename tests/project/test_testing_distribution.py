"""The test double is its own distribution: the provider's wheel carries no test code.

Before the split, every Airflow worker installed a 5k-line Kafka broker, the launchers, a pytest
plugin and the ``kafka-eos-devbroker`` console script with the provider. Both wheels are built
here from the checkout (the way a release builds them) and their contents read.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import zipfile

import pytest

import airflow_provider_kafka_eos
import kafka_eos_testing

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def _build_wheel(project: pathlib.Path, out: pathlib.Path) -> zipfile.ZipFile:
    uv = pathlib.Path(sys.executable).with_name("uv")  # ./run installs it into the venv
    command = (
        [str(uv), "build", "--wheel", "-q", "-o", str(out), str(project)]
        if uv.exists()
        else [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(project)]
    )
    built = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = out.glob("*.whl")
    return zipfile.ZipFile(wheel)


def _entry_points(wheel: zipfile.ZipFile) -> str:
    return wheel.read(next(n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt"))).decode()


def _imports(source: bytes) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.timeout(300)
def test_the_runtime_wheel_holds_no_test_code_and_no_devbroker(tmp_path):
    wheel = _build_wheel(REPO_ROOT, tmp_path)
    names = wheel.namelist()
    assert "airflow_provider_kafka_eos/cli/__init__.py" in names  # the wheel read is the provider's
    double = ("kafka_eos_testing/", "airflow_provider_kafka_eos/testing/")
    assert [n for n in names if n.startswith(double)] == []
    assert [n for n in names if n.endswith("pom.xml")] == []
    importing_test_code = [
        n
        for n in names
        if n.endswith(".py") and _imports(wheel.read(n)) & {"pytest", "kafka_eos_testing", "moto"}
    ]
    assert importing_test_code == []
    entry_points = _entry_points(wheel)
    assert "kafka-eos-txn" in entry_points
    assert "kafka-eos-devbroker" not in entry_points
    assert "pytest11" not in entry_points


@pytest.mark.timeout(300)
def test_the_testing_wheel_carries_the_double_its_script_and_the_kafka_pom(tmp_path):
    wheel = _build_wheel(REPO_ROOT / "testing", tmp_path)
    names = wheel.namelist()
    assert "kafka_eos_testing/broker/cli.py" in names
    assert "kafka_eos_testing/apache_kafka/pom.xml" in names  # Maven resolves real Kafka's jars from it
    assert "kafka_eos_testing/pytest_plugin.py" in names
    assert [n for n in names if n.startswith("airflow_provider_kafka_eos/")] == []
    assert "kafka-eos-devbroker = kafka_eos_testing.broker.cli:main" in _entry_points(wheel)
    metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert f"Version: {kafka_eos_testing.__version__}\n" in metadata
    provider = airflow_provider_kafka_eos.__version__
    assert f"Requires-Dist: airflow-provider-kafka-eos=={provider}\n" in metadata


def test_the_double_is_released_in_lockstep_with_the_provider():
    """The double answers the provider's own protocol paths: the pin in testing/pyproject.toml and
    the provider's [testing] extra name the one version both packages carry."""
    assert kafka_eos_testing.__version__ == airflow_provider_kafka_eos.__version__
    pin = f"airflow-provider-kafka-eos=={airflow_provider_kafka_eos.__version__}"
    assert f'"{pin}"' in (REPO_ROOT / "testing" / "pyproject.toml").read_text()
    extra = f"airflow-provider-kafka-eos-testing=={airflow_provider_kafka_eos.__version__}"
    assert f'"{extra}"' in (REPO_ROOT / "pyproject.toml").read_text()
