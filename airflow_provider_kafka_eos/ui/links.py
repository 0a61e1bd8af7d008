"""Extra links from the submit and commit tasks to their checkpoint in the operators' view.

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
    "VIEW_PREFIX", "CheckpointViewLink", "airflow_base_path", "checkpoint_anchor", "checkpoint_view_url",
    "remember_checkpoint",
]

VIEW_PREFIX = "/kafka-eos"
_ATTRIBUTE = "_kafka_eos_view_checkpoint"


def checkpoint_view_url(conn_id: str, pipeline_id: str, checkpoint_id: int, base_path: str = "") -> str:
    """The view filtered to the pipeline, scrolled to (and highlighting) the checkpoint's row."""
    query = urlencode({"conn_id": conn_id, "pipeline_id": pipeline_id})
    return f"{base_path}{VIEW_PREFIX}/?{query}#{checkpoint_anchor(pipeline_id, checkpoint_id)}"


def checkpoint_anchor(pipeline_id: str, checkpoint_id: int) -> str:
    """The checkpoint row's id on the view's page (the link ends with ``#`` and this)."""
    return f"checkpoint-{pipeline_id}-{checkpoint_id}"


def remember_checkpoint(operator: Any, conn_id: str, pipeline_id: Any, checkpoint_id: Any) -> None:
    """Record on the running task which checkpoint its link should open."""
    if pipeline_id and checkpoint_id is not None:
        setattr(operator, _ATTRIBUTE, (str(conn_id), str(pipeline_id), int(checkpoint_id)))


class CheckpointViewLink(BaseOperatorLink):
    """"Kafka EOS checkpoint": the task's checkpoint in the operators' view."""

    name = "Kafka EOS checkpoint"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        target = getattr(operator, _ATTRIBUTE, None)
        if not target:
            return ""
        return checkpoint_view_url(*target, base_path=airflow_base_path())


def airflow_base_path() -> str:
    """The path prefix of Airflow's UI (``[api] base_url``), usually empty."""
    from airflow.configuration import conf

    return urlparse(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")
