"""The provider's Airflow plugin (pyproject.toml's ``airflow.plugins`` entry point).

An entry point, not provider info's ``plugins``: Airflow 3.3 loads provider-info plugins only with
``[core] lazy_load_providers = False``, entry-point plugins always.

It installs, in the API server only (tasks never import it):

- :class:`~airflow_provider_kafka_eos.ui.test_button.HostlessConnectionTestMiddleware`, so the
  connection Test button works for a stored ``kafka_eos`` connection on Airflow 3.3;
- the operators' console (``ui/console.py``): a React app in Airflow's navigation (Browse >
  Kafka EOS console, at ``/plugin/kafka-eos-console``) whose bundle and JSON are served at
  ``/kafka-eos-console``;
- the operators' view (``ui/view.py``) at ``/kafka-eos/``: the plain page the tasks' extra links
  open at a checkpoint's row, the runbook pages and the pre-filled resolution requests the
  console links to, and the open transactions' JSON the console reads. Read-only, behind
  Airflow's permissions.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_provider_kafka_eos.ui.console import BUNDLE, CONSOLE_PREFIX
from airflow_provider_kafka_eos.ui.console import app as console_app
from airflow_provider_kafka_eos.ui.links import CONSOLE_ROUTE, VIEW_PREFIX
from airflow_provider_kafka_eos.ui.test_button import HostlessConnectionTestMiddleware
from airflow_provider_kafka_eos.ui.view import app as view_app


class KafkaEosPlugin(AirflowPlugin):
    name = "kafka_eos"
    fastapi_root_middlewares = [
        {
            "name": "kafka_eos connection Test button (host-less type)",
            "middleware": HostlessConnectionTestMiddleware,
            "args": [],
            "kwargs": {},
        }
    ]
    fastapi_apps = [
        {"app": view_app, "url_prefix": VIEW_PREFIX, "name": "kafka_eos checkpoints"},
        {"app": console_app, "url_prefix": CONSOLE_PREFIX, "name": "kafka_eos console"},
    ]
    # Airflow >= 3.1: the UI imports bundle_url (relative: under Airflow's base URL) and renders
    # the component it leaves in globalThis.AirflowPlugin at /plugin/<url_route>.
    react_apps = [
        {
            "name": "Kafka EOS console",
            "bundle_url": f"{CONSOLE_PREFIX.lstrip('/')}/static/{BUNDLE}",
            "destination": "nav",
            "category": "browse",
            "url_route": CONSOLE_ROUTE,
        }
    ]
