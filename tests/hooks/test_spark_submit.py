"""The spark-submit layer of the submit operator (hooks/spark_submit.py): the job's command line and
its environment, as pure functions of the operator's values (spark-submit itself runs in
tests/operators/test_pipeline_operators.py and tests/system/dags/test_pipeline.py)."""

from __future__ import annotations

import sys

from airflow_provider_kafka_eos.hooks.spark_submit import job_arguments, launch_settings
from airflow_provider_kafka_eos.spark import handoff, shipping
from airflow_provider_kafka_eos.spark import job as eos_job


def test_job_arguments_leave_unset_values_to_the_job_and_parse_back():
    args = job_arguments({"pipeline-id": "p", "topic": "t", "transactional-id-prefix": "p",
                          "checkpoint-id": 0, "manifest-base-uri": "/m", "application": "m:f",
                          "headers-col": None, "producer": "", "two-phase-commit": True, "try-number": 0})
    assert args == ["--pipeline-id", "p", "--topic", "t", "--transactional-id-prefix", "p", "--checkpoint-id",
                    "0", "--manifest-base-uri", "/m", "--application", "m:f", "--two-phase-commit",
                    "--try-number", "0"]
    parsed = eos_job.build_arg_parser().parse_args(args)
    assert (parsed.checkpoint_id, parsed.two_phase_commit, parsed.headers_col) == (0, True, None)


def test_a_local_master_runs_this_python_quietly_without_shipping_the_runtime():
    settings = launch_settings(env_vars={"X": "1"}, conf={"spark.executor.cores": "1"}, py_files=None,
                               config_file="/dev/shm/f", python_executable=None, executor_python=None,
                               master="local[2]", cluster_mode=False)
    assert settings.env_vars["X"] == "1" and settings.env_vars[handoff.CONFIG_FILE_ENV] == "/dev/shm/f"
    assert settings.env_vars["PYSPARK_PYTHON"] == settings.env_vars["PYSPARK_DRIVER_PYTHON"] == sys.executable
    assert settings.conf["spark.speculation"] == "false" and settings.conf["spark.executor.cores"] == "1"
    assert "spark.driver.extraJavaOptions" in settings.conf  # the driver's log is cut to the job's lines
    assert settings.py_files is None


def test_a_cluster_driver_gets_the_runtime_zip_and_keeps_the_clusters_python():
    settings = launch_settings(env_vars=None, conf=None, py_files="a.py", config_file="/secrets/kafka.json",
                               python_executable=None, executor_python=None, master="spark://m:7077",
                               cluster_mode=True)
    assert "PYSPARK_PYTHON" not in settings.env_vars and "PYSPARK_DRIVER_PYTHON" not in settings.env_vars
    assert settings.py_files == f"a.py,{shipping.runtime_zip()}"
    assert "spark.driver.extraJavaOptions" not in settings.conf  # the cluster's driver cannot read our files


def test_the_job_must_be_a_file_spark_submit_can_run(tmp_path):
    """The provider imported from a zip gives ``spark/job.py`` a path inside the archive: refused by
    name before anything is claimed, unless the operator was given a job file of its own."""
    import pytest

    from airflow_provider_kafka_eos.hooks.spark_submit import require_job_file
    from airflow_provider_kafka_eos.kafka.errors import ConfigError

    require_job_file(eos_job.__file__, eos_job.__file__)  # installed: a file
    archive = tmp_path / "airflow_provider_kafka_eos-0.1.0-abc.zip"
    in_zip = str(archive / "airflow_provider_kafka_eos" / "spark" / "job.py")
    with pytest.raises(ConfigError, match="imported airflow_provider_kafka_eos from an archive"):
        require_job_file(in_zip, in_zip)
    require_job_file("s3://jobs/my_job.py", in_zip)  # the user's own application: theirs to check
