"""The operators' console: an Airflow 3 React app plugin (``react_apps``) and the JSON it reads.

Mounted by the provider's plugin at ``/kafka-eos-console`` (``ui/plugin.py``). The React app
itself is built from ``ui_console/`` (TypeScript, Vite: ``./run console-build``) into this
package's ``console_dist/`` (package data: the wheel ships it) and served at
``/kafka-eos-console/static/console.js``; Airflow's UI imports it and renders its component
inside its own page (its theme, its light/dark mode, its React and Chakra UI shared through
``globalThis``).

The JSON has the view's permissions (``ui/view.py``: the caller must be allowed to read the
connection; 401 / 403) and is bounded: ``/api/pipelines`` lists the store's pipelines (one
listing), ``/api/pipeline`` one page of a pipeline's newest checkpoints (``limit`` <= 500; the
listing gives the ids, only the page is read) with the last-stable-offset lag history of its
topics (``kafka/operations/lso_history.py``, the last :data:`HISTORY_POINTS` samples). Open
transactions come from the view's ``/kafka-eos/api/transactions`` (the sensor's scan). A store
that cannot be read is HTTP 503 with its named error, never an empty page.
"""

from __future__ import annotations

import asyncio
import pathlib
import time
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import FileResponse, JSONResponse

from airflow_provider_kafka_eos.kafka.errors import KafkaEosError
from airflow_provider_kafka_eos.ui.view import DEFAULT_CONN_ID, ConnId, require_connection_read, user_dep

CONSOLE_PREFIX = "/kafka-eos-console"
BUNDLE = "console.js"
DIST = pathlib.Path(__file__).resolve().parent / "console_dist"
HISTORY_POINTS = 500  # per topic, newest: enough for the plot, bounded for the page
MAX_PAGE = 500

app = FastAPI(title="Kafka exactly-once: console", docs_url=None, redoc_url=None, openapi_url=None)


def checkpoint_point(uri: str, manifest: Any) -> dict[str, Any]:
    """One checkpoint for the timeline: when it was prepared, when (and if) it committed, by whom.

    ``committed_at_ms`` is the commit decision's time (recorded before the commit acts), else the
    manifest's last update for a COMMITTED one written before decisions existed.
    """
    decision = manifest.decision
    committed = manifest.status.value == "COMMITTED"
    committed_at = (decision.at_ms if decision is not None and decision.outcome == "commit"
                    else manifest.updated_at_ms) if committed else None
    counts = [c.record_count for c in manifest.output_committables]
    run = manifest.prepared_by
    return {
        "checkpoint_id": manifest.checkpoint_id,
        "status": manifest.status.value,
        "given_up": manifest.given_up,
        "prepared_at_ms": manifest.created_at_ms,
        "committed_at_ms": committed_at,
        "commit_latency_ms": None if committed_at is None else max(0, committed_at - manifest.created_at_ms),
        "records": None if None in counts else sum(counts),
        "transactions": len(manifest.committables),
        "run": run.run_id if run is not None else None,
        "dag_id": run.dag_id if run is not None else None,
        "batch": manifest.input.id if manifest.input is not None else None,
        "topic": manifest.topic,
        "transactional_id_prefix": manifest.transactional_id_prefix,
        "manifest": uri,
    }


def _store(conn_id: str) -> Any:
    """The connection's manifest store, with its credentials; 404 naming a connection that does
    not exist (a typo in the console's connection field), not Airflow's bare 500."""
    from airflow.exceptions import AirflowNotFoundException

    from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook

    try:
        return KafkaEosHook(kafka_eos_conn_id=conn_id).manifest_store()
    except AirflowNotFoundException:
        raise HTTPException(404, f"connection {conn_id!r} does not exist: create it (Admin > Connections) "
                                 "or type the id of a kafka_eos connection") from None


def pipeline_page(store: Any, pipeline_id: str, limit: int, before: int | None) -> dict[str, Any]:
    """A page of the pipeline's checkpoints, newest first (``newer`` / ``older``: how many lie on
    either side of it, for the console's pager), and its topics' lag history."""
    from airflow_provider_kafka_eos.kafka.operations.lso_history import read_history

    page = store.newest(pipeline_id, limit, before)
    points = [checkpoint_point(uri, m) for uri, m in page.manifests]
    topics = sorted({p["topic"] for p in points})
    history = {t: read_history(store.base_uri, t, access=store.access)[-HISTORY_POINTS:] for t in topics}
    prefixes = sorted({p["transactional_id_prefix"] for p in points})
    return {"store": store.base_uri, "pipeline_id": pipeline_id, "total": page.total, "limit": limit,
            "before": before, "newer": page.newer, "older": page.older, "checkpoints": points,
            "topics": topics, "transactional_id_prefixes": prefixes, "lso_history": history,
            "now_ms": int(time.time() * 1000)}


def _error(conn_id: str, err: Exception) -> JSONResponse:
    return JSONResponse({"conn_id": conn_id, "error": str(err)}, status_code=503)


@app.get("/api/pipelines")
async def pipelines_json(user: Annotated[Any, user_dep()], conn_id: ConnId = DEFAULT_CONN_ID) -> JSONResponse:
    require_connection_read(conn_id, user)
    try:
        store = await asyncio.to_thread(_store, conn_id)
        names = await asyncio.to_thread(store.pipelines)
    except KafkaEosError as err:
        return _error(conn_id, err)
    return JSONResponse({"conn_id": conn_id, "store": store.base_uri, "pipelines": names})


PipelineId = Annotated[str, Query(min_length=1, max_length=250)]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE)]
Before = Annotated[int | None, Query(ge=0)]


@app.get("/api/pipeline")
async def pipeline_json(user: Annotated[Any, user_dep()], pipeline_id: PipelineId,
                        conn_id: ConnId = DEFAULT_CONN_ID, limit: Limit = 200,
                        before: Before = None) -> JSONResponse:
    require_connection_read(conn_id, user)
    try:
        store = await asyncio.to_thread(_store, conn_id)
        data = await asyncio.to_thread(pipeline_page, store, pipeline_id, limit, before)
    except (KafkaEosError, OSError, ValueError) as err:
        return _error(conn_id, err)
    return JSONResponse({"conn_id": conn_id, **data})


@app.get("/static/{name}")
async def bundle(name: str) -> FileResponse:
    """The built React app (static, like Airflow's own assets: the data behind it is what is guarded)."""
    path = DIST / name
    if name != BUNDLE or not path.is_file():
        raise HTTPException(404, f"{name}: not in the console's build (run ./run console-build)")
    return FileResponse(path, media_type="text/javascript", headers={"Cache-Control": "no-cache"})
