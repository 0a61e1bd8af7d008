"""``./run demo``'s options (scripts/demo.py): what combines, and what is refused before anything starts.

Only the parsing is run (no broker, no Airflow, no Spark): the demo itself is run by hand
(``./run demo --pipeline kafka-to-kafka --kafka apache``), its closing checks are its exit status.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo():
    spec = importlib.util.spec_from_file_location("kafka_eos_demo_script", ROOT / "scripts" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("argv", "kafka", "pipeline", "security"), [
    ([], "embedded", "files", "plaintext"),
    (["--pipeline", "kafka-to-kafka"], "embedded", "kafka-to-kafka", "plaintext"),
    (["--pipeline", "kafka-to-kafka", "--kafka", "apache"], "apache", "kafka-to-kafka", "plaintext"),
    (["--kafka", "apache", "--security", "mtls"], "apache", "files", "mtls"),
])
def test_the_demo_runs_each_pipeline_on_each_kafka(demo, argv, kafka, pipeline, security):
    args = demo.parse_arguments(argv)
    assert (args.kafka, args.pipeline, args.security) == (kafka, pipeline, security)


@pytest.mark.parametrize(("argv", "named"), [
    (["--security", "sasl_ssl"], "--security sasl_ssl needs --kafka apache"),
    (["--pipeline", "kafka-to-kafka", "--kafka", "apache", "--security", "mtls"],
     "--pipeline kafka-to-kafka runs on a plaintext node only"),
    (["--pipeline", "kafka-to-kafka", "--kafka", "apache", "--security", "sasl_ssl"],
     "not the client credentials of --security sasl_ssl"),
])
def test_a_combination_the_demo_cannot_run_is_refused_by_name(demo, capsys, argv, named):
    with pytest.raises(SystemExit) as exit_info:
        demo.parse_arguments(argv)
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err
