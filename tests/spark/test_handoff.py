"""The worker <-> job hand-off has one owner (spark/handoff.py): what the job prints is what the
operator reads, and the module the job imports needs nothing of Airflow."""

from __future__ import annotations

import subprocess
import sys

from airflow_provider_kafka_eos.hooks import spark_submit
from airflow_provider_kafka_eos.operators import submit
from airflow_provider_kafka_eos.spark import handoff, job


def test_the_result_line_the_job_prints_is_the_one_the_operator_reads():
    line = handoff.result_line("s3://bucket/manifests/orders/checkpoint-7.json")
    assert line == "KAFKA_EOS_MANIFEST_URI=s3://bucket/manifests/orders/checkpoint-7.json"
    assert handoff.manifest_uri_of(line + "  ") == "s3://bucket/manifests/orders/checkpoint-7.json"
    assert handoff.manifest_uri_of("KAFKA_EOS_MANIFEST_URI=") is None
    assert handoff.manifest_uri_of("INFO KAFKA_EOS_MANIFEST_URI=/x") is None  # only a whole line counts


def test_the_job_and_the_operator_use_the_handoff_s_names_not_copies():
    for name in ("CONFIG_FILE_ENV", "CONFIG_ENV", "RESULT_PREFIX", "ERROR_PREFIX", "EXIT_USAGE",
                 "PRIVATE_FILE_CONFIG_KEY", "PRIVATE_FILE_PARAMS_KEY", "load_client_config", "load_params"):
        assert getattr(job, name) is getattr(handoff, name), name
    # the worker side writes the private file through the hook (hooks/spark_submit.py), by handoff's names
    assert spark_submit.handoff is handoff
    for name in ("private_dir", "write_private_file", "sweep_private_files"):
        for module in (submit, spark_submit):
            assert getattr(module, name, getattr(handoff, name)) is getattr(handoff, name), (module, name)


def test_the_handoff_imports_nothing_of_airflow():
    probe = subprocess.run(
        [sys.executable, "-c",
         "import sys\n"
         "import airflow_provider_kafka_eos.spark.handoff\n"
         "import airflow_provider_kafka_eos.spark.job\n"
         "print(sorted(m for m in sys.modules if m.split('.')[0] == 'airflow'))"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert probe.stdout.strip() == "[]"
