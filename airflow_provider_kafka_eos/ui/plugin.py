"""The provider's Airflow plugin (setup.cfg's ``airflow.plugins`` entry point).

An entry point, not provider info's ``plugins``: Airflow 3.3 loads provider-info plugins only with
``[core] lazy_load_providers = False``, entry-point plugins always.

Today it only installs :class:`~airflow_provider_kafka_eos.ui.test_button.HostlessConnectionTestMiddleware`
on the API server, so the connection Test button works for a stored ``kafka_eos`` connection on
Airflow 3.3 (see that module). Airflow loads it in the API server only; tasks never import it.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_provider_kafka_eos.ui.test_button import HostlessConnectionTestMiddleware


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
