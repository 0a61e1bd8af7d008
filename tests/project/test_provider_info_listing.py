"""Provider info lists the integration, operators, hooks, sensors and triggers (as the Kafka and
Spark providers do), and Airflow's own schema accepts it. Before: only the connection type."""

from __future__ import annotations

import importlib
import inspect
import json
import pathlib

import airflow
import jsonschema

import airflow_provider_kafka_eos
from airflow_provider_kafka_eos.get_provider_info import get_provider_info

PACKAGE = pathlib.Path(airflow_provider_kafka_eos.__file__).parent
SECTIONS = ("operators", "hooks", "sensors", "triggers")


def test_airflow_s_provider_info_schema_accepts_it():
    schema = json.loads((pathlib.Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_every_section_names_an_integration_the_provider_declares():
    info = get_provider_info()
    integrations = {i["integration-name"] for i in info["integrations"]}
    for section in SECTIONS:
        assert info[section], section
        assert {entry["integration-name"] for entry in info[section]} <= integrations, section


def test_every_module_of_each_section_is_listed_and_defines_one_of_its_classes():
    """A new operator module left out of the listing fails here; so does a listed path that moved."""
    from airflow.sdk import BaseHook, BaseOperator
    from airflow.triggers.base import BaseTrigger

    base = {"operators": BaseOperator, "sensors": BaseOperator, "hooks": BaseHook, "triggers": BaseTrigger}
    info = get_provider_info()
    for section in SECTIONS:
        listed = [m for entry in info[section] for m in entry["python-modules"]]
        on_disk = {
            f"airflow_provider_kafka_eos.{section}.{p.stem}"
            for p in (PACKAGE / section).glob("*.py")
            # the form is data, masking registers secret key names (an Airflow plugin) and
            # store_credentials reads the store's AWS connection for the hook: no hooks
            if p.stem not in ("__init__", "connection_form", "masking", "registry_form", "store_credentials")
        }
        assert sorted(listed) == sorted(on_disk), section
        for name in listed:
            module = importlib.import_module(name)
            defined = [
                c
                for _, c in inspect.getmembers(module, inspect.isclass)
                if c.__module__ == name and issubclass(c, base[section])
            ]
            assert defined, f"{name} defines no {base[section].__name__}"
