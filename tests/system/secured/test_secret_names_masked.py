"""Secrets of a Kafka connection read by a template before any hook of this provider ran.

A DAG of plain PythonOperators (it never imports this provider) templated with
``conn.<id>.extra_dejson['sasl.jaas.config']`` and ``['ssl.key.pem']``: Airflow masks an extra's
values by key name when it is read, and its own names miss these two. The provider's entry-point
plugin (``hooks/masking.py``), which Airflow loads in the task process before it renders
templates, adds them. Run in a fresh interpreter so nothing of the provider is imported beforehand.
No Kafka needed: the connection is only read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.provider_logic

JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="etl" '
    'password="jaas-secret-7d3f0a";'
)
KEY_PEM = (
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC-inline-key-9e41\n-----END PRIVATE KEY-----"
)

DAG_FILE = r"""
import datetime as dt
import logging

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

CONN = "kafka_eos_unhooked"


def show(**secrets):
    for name, value in secrets.items():
        print(f"printed {name}={value}")
        logging.getLogger("airflow.task").info("logged %s=%s", name, value)


with DAG("secret_names", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    PythonOperator(
        task_id="show",
        python_callable=show,
        op_kwargs={
            "sasl_jaas_config": "{{ conn.%s.extra_dejson['sasl.jaas.config'] }}" % CONN,
            "ssl_key_pem": "{{ conn.%s.extra_dejson['ssl.key.pem'] }}" % CONN,
        },
    )

"""

SCRIPT = r"""
import contextlib, io, json, logging, sys

from airflow.dag_processing.dagbag import DagBag

bag = DagBag(dag_folder=sys.argv[1])
assert bag.import_errors == {}, bag.import_errors
dag = bag.get_dag("secret_names")
handler = logging.StreamHandler(out := io.StringIO())
logging.getLogger("airflow.task").addHandler(handler)
hooked_before = sorted(m for m in sys.modules if m.startswith("airflow_provider_kafka_eos"))
with contextlib.redirect_stdout(out):
    run = dag.test()

from airflow.models.renderedtifields import RenderedTaskInstanceFields
from airflow.sdk._shared.secrets_masker import redact
from airflow.utils.session import create_session

with create_session() as session:
    ti = run.get_task_instances()[0]
    rendered = RenderedTaskInstanceFields.get_templated_fields(ti, session=session)
    state = str(ti.state)
print("RESULT=" + json.dumps({
    "state": state,
    "task_log": redact(out.getvalue()),  # what the log writer's masker makes of the task's output
    "rendered": rendered,
    "before": hooked_before,
    "after": sorted(m for m in sys.modules if m.startswith("airflow_provider_kafka_eos")),
}, default=str))
"""


def test_jaas_and_inline_key_are_masked_in_the_task_log_and_rendered_template(airflow_db, tmp_path):
    env = {
        **os.environ,
        "AIRFLOW_CONN_KAFKA_EOS_UNHOOKED": json.dumps(
            {
                "conn_type": "kafka_eos",
                "extra": {"bootstrap.servers": "b:9093", "sasl.jaas.config": JAAS, "ssl.key.pem": KEY_PEM},
            }
        ),
    }
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "secret_names.py").write_text(DAG_FILE)
    local = "airflow.dag_processing.bundles.local.LocalDagBundle"
    env["AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"] = json.dumps(
        [
            {"name": "dags-folder", "classpath": local, "kwargs": {}},
            {"name": "secret-names", "classpath": local, "kwargs": {"path": str(folder)}},
        ]
    )
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(folder)],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=tmp_path,
    )
    line = next((x for x in result.stdout.splitlines() if x.startswith("RESULT=")), None)
    assert line is not None, result.stdout[-2000:] + result.stderr[-3000:]
    found = json.loads(line[len("RESULT=") :])
    assert found["state"] == "success", result.stderr[-3000:]
    # Before the run only provider discovery had touched the package (get_provider_info, plain data).
    assert not any(m.endswith((".masking", ".kafka_eos")) for m in found["before"]), found["before"]
    assert "airflow_provider_kafka_eos.hooks.masking" in found["after"]  # Airflow's plugin loader did
    log = found["task_log"]
    assert "printed sasl_jaas_config=***" in log and "logged ssl_key_pem=***" in log, log
    rendered = json.dumps(found["rendered"])
    assert "***" in rendered
    for secret in ("jaas-secret-7d3f0a", "inline-key-9e41"):
        assert secret not in log and secret not in rendered
