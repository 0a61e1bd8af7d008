"""Helpers of the cluster tests: submit the keys job (tests/system/faults/keys_app.py) to the cluster."""

from __future__ import annotations

import pathlib

from kafka_eos_testing.spark import job_arguments, spark_submit_job

KEYS_APP = pathlib.Path(__file__).resolve().parents[1] / "faults" / "keys_app.py"


def _keys(tag, n):
    return [f"{tag}-{i}" for i in range(n)]


def submit(cluster, broker, tmp_path, prefix, topic, checkpoint, *, count=300, partitions=3, conf=None,
           env=None, application_file=None):
    params = {"tag": prefix, "count": count, "partitions": partitions}
    arguments = job_arguments(
        prefix=prefix, topic=topic, checkpoint=checkpoint, manifest_base=tmp_path / "m",
        application=f"{KEYS_APP}:build_dataframe", params=params,
    )  # fmt: skip
    return spark_submit_job(
        arguments,
        client_config=broker.client_config(),
        work_dir=tmp_path,
        master=cluster.master_url,
        conf={**cluster.submit_conf(), **(conf or {})},
        env=env,
        application_file=application_file,
    )


def _tail(result):
    return result.stdout[-2000:] + result.stderr[-4000:]
