"""Extra links from the submit and commit tasks to their checkpoint in the operators' console.

The console (``ui/console.py``, Airflow's ``/plugin/kafka-eos-console``) opens the page of the
pipeline's checkpoints that holds the task's one (``checkpoint_id=``: the page starting at it)
and highlights it in the timeline and its table.

Airflow 3 computes an operator's extra links on the worker when the task finishes (the task
runner calls ``get_link`` and stores the URL in XCom under the link's key; the API server only
reads it back), so the link is built from what the task itself learnt: the connection, the
pipeline and the checkpoint id it prepared or committed (``remember_checkpoint``). A task that
failed before it knew its checkpoint has no link (an empty URL: Airflow shows it disabled).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode, urlparse

from airflow.sdk import BaseOperatorLink

__all__ = [
    "CONSOLE_ROUTE", "VIEW_PREFIX", "CheckpointViewLink", "airflow_base_path", "checkpoint_anchor",
    "checkpoint_console_url", "remember_checkpoint",
]

VIEW_PREFIX = "/kafka-eos"
CONSOLE_ROUTE = "kafka-eos-console"  # the React app's url_route: Airflow shows it at /plugin/<route>
_ATTRIBUTE = "_kafka_eos_view_checkpoint"


def checkpoint_console_url(conn_id: str, pipeline_id: str, checkpoint_id: int, base_path: str = "") -> str:
    """The console on the pipeline, at the page that starts with the checkpoint (highlighted)."""
    query = urlencode({"conn_id": conn_id, "pipeline_id": pipeline_id, "checkpoint_id": checkpoint_id})
    return f"{base_path}/plugin/{CONSOLE_ROUTE}?{query}"


def checkpoint_anchor(pipeline_id: str, checkpoint_id: int) -> str:
    """The checkpoint row's id on the view's page (the link ends with ``#`` and this)."""
    return f"checkpoint-{pipeline_id}-{checkpoint_id}"


def remember_checkpoint(operator: Any, conn_id: str, pipeline_id: Any, checkpoint_id: Any) -> None:
    """Record on the running task which checkpoint its link should open."""
    if pipeline_id and checkpoint_id is not None:
        setattr(operator, _ATTRIBUTE, (str(conn_id), str(pipeline_id), int(checkpoint_id)))


class CheckpointViewLink(BaseOperatorLink):
    """"Kafka EOS checkpoint": the task's checkpoint in the operators' console."""

    name = "Kafka EOS checkpoint"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        target = getattr(operator, _ATTRIBUTE, None)
        if not target:
            return ""
        return checkpoint_console_url(*target, base_path=airflow_base_path())


def airflow_base_path() -> str:
    """The path prefix of Airflow's UI (``[api] base_url``), usually empty."""
    from airflow.configuration import conf

    return urlparse(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")
