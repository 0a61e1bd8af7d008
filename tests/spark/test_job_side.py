"""The job side's own rules: supported Spark range, requirement checks, the runtime zip, and an
Airflow side that imports without PySpark. (The same rules on a real cluster: tests/system/spark_cluster.)"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
import subprocess
import sys
import zipfile
from types import SimpleNamespace

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import airflow_provider_kafka_eos
from airflow_provider_kafka_eos.kafka.errors import ConfigError, UnsupportedCapabilityError
from airflow_provider_kafka_eos.runbook import reference as runbook_reference
from airflow_provider_kafka_eos.spark import requirements, shipping
from airflow_provider_kafka_eos.spark.writer import write_exactly_once

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def _declared(extra: str | None) -> dict[str, Requirement]:
    """This install's requirements (the metadata pyproject.toml wrote), by name, for one extra."""
    found = {}
    for line in importlib.metadata.requires("airflow-provider-kafka-eos") or []:
        requirement = Requirement(line)
        in_extra = requirement.marker is not None and requirement.marker.evaluate({"extra": extra or ""})
        if (extra is None and requirement.marker is None) or (extra is not None and in_extra):
            found[requirement.name] = requirement
    return found


def test_the_spark_extra_resolves_one_pyspark_pyspark_client_pair_inside_the_supported_range():
    """Before: `pip install '...[spark]'` resolved pyspark 4.3.0 beside the Spark provider's
    pyspark-client 4.2.0. Both are now bounded by the newest pair released together, and pyspark's
    releases without a pyspark-client twin are left out."""
    spark = _declared("spark")
    pyspark, client = spark["pyspark"].specifier, spark["pyspark-client"].specifier
    supported = SpecifierSet(requirements.SUPPORTED_SPARK)
    # pyspark releases at the time of writing; 4.0.5, 4.1.4, 4.2.1 and 4.3.0 have no pyspark-client
    released = ["3.4.4", "3.5.0", "3.5.9", "4.0.4", "4.0.5", "4.1.3", "4.1.4", "4.2.0", "4.2.1", "4.3.0"]
    admitted = [v for v in released if v in pyspark]
    assert admitted == ["3.5.0", "3.5.9", "4.0.4", "4.1.3", "4.2.0"]
    assert all(v in supported for v in admitted)
    # the newest each side resolves on its own is the same version
    assert max(admitted, key=Version) == max((v for v in released if v in client), key=Version) == "4.2.0"
    assert {"pyarrow", "numpy", "pandas"} <= set(spark)
    base = _declared(None)
    assert not {"pyspark", "pyspark-client", "pyarrow", "numpy", "pandas"} & set(base)


def test_airflow_is_bounded_from_below_only_and_confluent_kafka_below_its_next_major():
    base = _declared(None)
    assert str(base["apache-airflow"].specifier) == ">=3.1"
    assert "3.4.0" in base["apache-airflow"].specifier and "4.0.0" in base["apache-airflow"].specifier
    assert "2.17.0" in base["confluent-kafka"].specifier and "3.0.0" not in base["confluent-kafka"].specifier


@pytest.mark.parametrize("version", ["3.4.3", "3.3.0", "5.0.0", "2.4.8", "not-a-version"])
def test_a_spark_outside_the_range_is_refused_naming_the_range(version):
    with pytest.raises(UnsupportedCapabilityError) as excinfo:
        requirements.check_spark_version(version, where="the cluster")
    message = str(excinfo.value)
    assert (
        version in message and ">=3.5,<5" in message and "docs/runbook/spark-job-requirements.md" in message
    )


@pytest.mark.parametrize("version", ["3.5.0", "3.5.9", "4.0.1", "4.2.0", "4.3.0.dev1"])
def test_spark_35_and_4x_are_accepted(version):
    requirements.check_spark_version(version, where="the cluster")


def test_the_writer_refuses_an_unsupported_session_before_touching_kafka(tmp_path):
    """A Spark 3.4 session (stubbed: no Spark 3.4 here) with an unreachable broker: refused first."""
    df = SimpleNamespace(sparkSession=SimpleNamespace(version="3.4.1"))
    with pytest.raises(UnsupportedCapabilityError, match=r"Spark 3\.4\.1.*>=3\.5,<5"):
        write_exactly_once(
            df,
            topic="t",
            kafka_config={"bootstrap.servers": "127.0.0.1:9"},
            transactional_id_prefix="p",
            checkpoint_id=1,
            manifest_base_uri=str(tmp_path),
        )


def test_pyspark_and_pyspark_client_of_different_versions_are_refused():
    with pytest.raises(ConfigError, match=r"pyspark 4\.3\.0 and pyspark-client 4\.2\.0.*pyspark==4\.2\.0"):
        requirements.check_distribution_pair({"pyspark": "4.3.0", "pyspark-client": "4.2.0"})
    requirements.check_distribution_pair({"pyspark": "4.2.0", "pyspark-client": "4.2.0"})
    requirements.check_distribution_pair({"pyspark": "3.5.4", "pyspark-client": None})
    requirements.check_distribution_pair()  # this environment is consistent


def test_install_specs_carry_the_declared_bounds():
    specs = requirements.install_specs()
    assert set(specs) == {"pyarrow", "confluent-kafka", "kafka-python", "numpy", "crc32c", "lz4",
                          "python-snappy", "zstandard"}
    assert ">=4.3" in specs["lz4"] and ">=0.22" in specs["zstandard"] and ">=0.7" in specs["python-snappy"]
    assert ">=2.16" in specs["confluent-kafka"] and "<3" in specs["confluent-kafka"]
    assert ">=1.26" in specs["numpy"]  # from the [spark] extra
    assert ">=3.0.12" in specs["kafka-python"] and ">=17" in specs["pyarrow"] and ">=2.4" in specs["crc32c"]


def test_each_producer_checks_what_it_imports():
    arrow = {r.distribution for r in requirements.requirements_for("arrow")}
    librdkafka = {r.distribution for r in requirements.requirements_for("librdkafka")}
    assert arrow == {"pyarrow", "kafka-python", "numpy", "crc32c"}
    assert librdkafka == {"pyarrow", "kafka-python", "confluent-kafka"}
    # a codec's package only when the connection names it, and only on the Arrow path
    assert {r.distribution for r in requirements.requirements_for("arrow", "zstd")} == arrow | {"zstandard"}
    assert {r.distribution for r in requirements.requirements_for("librdkafka", "zstd")} == librdkafka
    assert requirements.requirements_for("arrow", "gzip") == requirements.requirements_for("arrow")


def test_a_missing_codec_package_is_one_marked_line_naming_it(monkeypatch):
    import importlib

    real = importlib.import_module

    def without_lz4(name, *args):
        if name.startswith("lz4"):
            raise ImportError("No module named 'lz4'")
        return real(name, *args)

    monkeypatch.setattr(requirements.importlib, "import_module", without_lz4)
    with pytest.raises(ConfigError) as info:
        requirements.check_importable(requirements.install_specs(), where="the executor Python /x on n1",
                                      marked=True, producer="arrow", codec="lz4")
    text = str(info.value)
    assert text.startswith(requirements.MISSING_MARKER) and "lacks lz4" in text
    assert "pip install 'lz4" in text and ">=4.3" in text
    requirements.check_importable({}, where="w", producer="arrow", codec="zstd")  # installed here


def test_a_task_failure_is_reduced_to_the_one_requirement_line():
    specs = {"confluent-kafka": "confluent-kafka>=2.16,<2.17", "pyarrow": "pyarrow>=17"}
    line = (
        f"{requirements.MISSING_MARKER} the executor Python /x/python on n1 lacks confluent-kafka (...); "
        "install it into that Python: pip install 'confluent-kafka>=2.16,<2.17'"
    )
    spark_text = (
        "Job aborted: Lost task 0.3: PythonException: Traceback (most recent call last):\n  File ...\n"
        f"airflow_provider_kafka_eos.kafka.errors.ConfigError: {line}. Next step: docs/runbook/x.md\n"
        "\tat org.apache.spark..."
    )
    error = requirements.translate_task_failure(RuntimeError(spark_text), specs)
    assert isinstance(error, ConfigError)
    assert str(error).startswith("the executor Python /x/python on n1 lacks confluent-kafka")
    assert "Traceback" not in str(error) and requirements.MISSING_MARKER not in str(error)
    # PySpark's own worker fails on pyarrow before our task function runs
    pyarrow = requirements.translate_task_failure(
        RuntimeError("ModuleNotFoundError: No module named 'pyarrow'"), specs
    )
    assert pyarrow is not None and "pip install 'pyarrow>=17'" in str(pyarrow)
    assert requirements.translate_task_failure(RuntimeError("division by zero"), specs) is None


def test_the_runtime_zip_holds_the_job_side_code_and_imports_on_its_own(tmp_path):
    path = shipping.runtime_zip(tmp_path)
    assert path == shipping.runtime_zip(tmp_path)  # content-addressed: built once
    names = set(zipfile.ZipFile(path).namelist())
    assert {
        "airflow_provider_kafka_eos/__init__.py",
        "airflow_provider_kafka_eos/spark/writer.py",
        "airflow_provider_kafka_eos/kafka/producers/librdkafka.py",
    } <= names
    assert not any(n.split("/")[1] in ("operators", "hooks", "sensors", "triggers", "testing") for n in names)
    # A Python that finds the provider only in the zip (isolated mode, zip first on the path).
    probe = subprocess.run(
        [sys.executable, "-I", "-c",
         f"import sys; sys.path.insert(0, {str(path)!r}); "
         "import airflow_provider_kafka_eos.spark.writer as w; print(w.__file__)"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip().startswith(str(path)), probe.stdout


# The job side's own modules: they run in Spark tasks, where the [spark] extra is installed.
JOB_SIDE_ONLY = {
    "airflow_provider_kafka_eos.kafka.producers.arrow",
    "airflow_provider_kafka_eos.kafka.producers.arrow_encode",
    "airflow_provider_kafka_eos.kafka.producers.arrow_send",
    "airflow_provider_kafka_eos.kafka.producers.partitioner",
    "airflow_provider_kafka_eos.kafka.producers.record_batch",
}


def test_the_airflow_side_imports_without_the_spark_extra():
    """The base install has no Spark provider, PySpark, pyarrow, numpy, pandas or the Arrow producer's
    CRC and codec packages (they are the [spark]
    extra): every module but the Arrow producer's imports without them, the writer, the job and the
    submit operator included (the provider absent: a ModuleNotFoundError as Python's import system
    raises it), and nothing imports the Spark provider. A DAG with a submit and a commit task is
    defined and serialized as the DAG processor does (a worker that runs only the commit task must
    parse the whole file); running the submit task fails with ``MissingExtraError`` naming the
    extra, before the manifest store is touched."""
    blocker = (
        "import importlib, json, pathlib, pkgutil, sys, tempfile\n"
        # The Spark provider's hooks and operators; its provider-info module still answers
        # Airflow's provider discovery, which loads every installed provider's entry point.
        "SPARK_PROVIDER = tuple('airflow.providers.apache.spark.' + m for m in ('hooks', 'operators'))\n"
        "BLOCKED = ('pyspark', 'pyarrow', 'numpy', 'pandas',\n"
        "           'crc32c', 'lz4', 'snappy', 'cramjam', 'zstandard')  # the Arrow producer's\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCKED + ('py4j',):\n"
        "            raise ImportError(f'blocked: {name}')\n"
        "        if name.startswith(SPARK_PROVIDER):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import airflow_provider_kafka_eos as package\n"
        "failed, other = [], {}\n"
        "for info in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "    try:\n"
        "        importlib.import_module(info.name)\n"
        "    except ImportError as exc:\n"
        "        failed.append(info.name) if 'blocked' in str(exc) else other.update({info.name: str(exc)})\n"
        "from airflow_provider_kafka_eos.get_provider_info import get_provider_info\n"
        "get_provider_info()  # lists the submit operator without importing it\n"
        "from airflow.sdk import DAG\n"
        "from airflow.serialization.serialized_objects import DagSerialization\n"
        "from airflow_provider_kafka_eos.kafka.errors import MissingExtraError\n"
        "from airflow_provider_kafka_eos.operators import submit as module\n"
        "from airflow_provider_kafka_eos.hooks.spark_submit import SPARK_PROVIDER_INSTALLED\n"
        "from airflow_provider_kafka_eos.operators.commit import KafkaCommitTransactionsOperator\n"
        "store = pathlib.Path(tempfile.mkdtemp())\n"
        "with DAG('eos_base_install', schedule=None) as dag:\n"
        "    submit = module.SparkEosSubmitOperator(task_id='submit', pipeline_id='p', topic='t',\n"
        "        application_callable='jobs:build', manifest_base_uri=store.as_uri(), input_id='b1',\n"
        "        conf={'spark.executor.cores': '1'}, driver_memory='1g', retries=2)\n"
        "    submit >> KafkaCommitTransactionsOperator(task_id='commit')\n"
        "serialized = DagSerialization.to_dict(dag)\n"
        "try:\n"
        "    submit.execute({})\n"
        "    refusal = None\n"
        "except MissingExtraError as exc:\n"
        "    refusal = [str(exc), isinstance(exc, ImportError)]\n"
        "blocked = BLOCKED\n"
        "imported = sorted(m for m in sys.modules\n"
        "                  if m.split('.')[0] in blocked or m.startswith(SPARK_PROVIDER))\n"
        "found = {'failed': sorted(failed), 'other': other, 'imported': imported,\n"
        "         'installed': SPARK_PROVIDER_INSTALLED, 'tasks': sorted(dag.task_dict),\n"
        "         'retries': submit.retries, 'serialized': 'dag' in serialized, 'refusal': refusal,\n"
        "         'store': sorted(p.name for p in store.rglob('*'))}\n"
        "print(json.dumps(found))\n"
    )
    probe = subprocess.run(
        [sys.executable, "-c", blocker],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=pathlib.Path(airflow_provider_kafka_eos.__file__).parents[1],
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    assert found["other"] == {}  # a module failing to import for another reason
    assert found["failed"] == sorted(JOB_SIDE_ONLY), probe.stdout[-3000:]
    assert found["imported"] == []
    assert found["installed"] is False
    assert (found["tasks"], found["retries"], found["serialized"]) == (["commit", "submit"], 2, True)
    message, is_import_error = found["refusal"]
    assert is_import_error
    assert "needs the Apache Spark provider (apache-airflow-providers-apache-spark)" in message
    assert "install airflow-provider-kafka-eos[spark]" in message
    assert message.endswith(f"Next step: {runbook_reference('spark-job-requirements')}")
    assert found["store"] == []  # refused before the input claim or a manifest was written
    warned = "task submit: SparkEosSubmitOperator needs the Apache Spark provider"  # at parse time
    assert warned in probe.stdout + probe.stderr


def test_the_spark_provider_is_in_the_spark_extra_and_not_in_the_base_install():
    """Read from pyproject.toml (the metadata's one owner), so the rule holds before a reinstall."""
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    names = {
        group: {Requirement(line).name for line in lines}
        for group, lines in {"base": project["dependencies"], **project["optional-dependencies"]}.items()
    }
    heavy = {"apache-airflow-providers-apache-spark", "pyspark", "pyspark-client", "pyarrow", "numpy"}
    heavy |= {"pandas", "crc32c", "lz4", "python-snappy", "zstandard"}  # the Arrow producer's, job side
    assert heavy <= names["spark"]
    assert not heavy & names["base"]
