"""The provider's Airflow plugin (pyproject.toml's ``airflow.plugins`` entry point).

An entry point, not provider info's ``plugins``: Airflow 3.3 loads provider-info plugins only with
``[core] lazy_load_providers = False``, entry-point plugins always.

It installs, in the API server only (tasks never import it):

- :class:`~airflow_provider_kafka_eos.ui.test_button.HostlessConnectionTestMiddleware`, so the
  connection Test button works for a stored ``kafka_eos`` connection on Airflow 3.3;
- the operators' view (``ui/view.py``) at ``/kafka-eos/``, read-only, behind Airflow's
  permissions, linked from the UI's Browse menu.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_provider_kafka_eos.ui.test_button import HostlessConnectionTestMiddleware
from airflow_provider_kafka_eos.ui.view import app as view_app

VIEW_PREFIX = "/kafka-eos"


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
    fastapi_apps = [{"app": view_app, "url_prefix": VIEW_PREFIX, "name": "kafka_eos checkpoints"}]
    external_views = [
        {
            "name": "Kafka EOS checkpoints",
            "href": f"{VIEW_PREFIX}/",
            "destination": "nav",
            "category": "browse",
            "url_route": "kafka-eos-checkpoints",
        }
    ]
