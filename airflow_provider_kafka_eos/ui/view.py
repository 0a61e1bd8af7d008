"""The operators' view, first cut: checkpoints and open transactions, read-only, in Airflow's API server.

Mounted by the provider's plugin at ``/kafka-eos`` (``ui/plugin.py``): ``/kafka-eos/`` is an HTML
page, ``/kafka-eos/api/checkpoints`` and ``/kafka-eos/api/transactions`` its tables as JSON. They
read the manifest store and the cluster of a ``kafka_eos`` connection (``?conn_id=``, default
``kafka_eos_default``) and change nothing. Transactions are the sensor's scan (``scan.scan``):
each Ongoing transaction under ``?prefixes=`` (comma-separated; blank: the whole cluster) at
least ``?min_age_s=`` old, classified against the PREPARED manifests (orphan / commit-pending /
foreign), with the partitions whose last stable offset it holds.

Permissions are Airflow's: the caller is the Airflow user of the request (the UI's session
cookie or a bearer token, resolved by Airflow's own ``get_user``), and must be allowed to read
that connection (the store is configured on it); otherwise 401 / 403. A store that is not
configured, malformed or unreadable is a named error on the page (HTTP 503), never an empty list.

``/kafka-eos/runbook/`` renders the runbook pages shipped in the package (any logged-in user);
each transaction row links to its page, and to ``/kafka-eos/resolve``: a pre-filled
``eos_manual_resolution`` request for it, offering only what its classification allows
(``ui/resolution.py``). Each checkpoint row is the anchor ``#checkpoint-<pipeline>-<id>`` the
submit and commit tasks' extra links point at (``ui/links.py``).
"""

from __future__ import annotations

import html
import time
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse

from airflow_provider_kafka_eos.kafka.errors import KafkaEosError
from airflow_provider_kafka_eos.ui.links import airflow_base_path, checkpoint_anchor

DEFAULT_CONN_ID = "kafka_eos_default"
COLUMNS = ("pipeline_id", "checkpoint_id", "status", "run", "records", "transactions", "age_s", "manifest")
TXN_COLUMNS = (
    "transactional_id", "kind", "age_s", "partitions", "manifest_uri", "reason", "next_step", "runbook"
)

app = FastAPI(title="Kafka exactly-once: checkpoints", docs_url=None, redoc_url=None, openapi_url=None)


def checkpoint_rows(manifests: list[tuple[str, Any]], now_ms: int) -> list[dict[str, Any]]:
    """One row per manifest, newest first: what an operator needs to pick the one to act on."""
    rows = []
    for uri, manifest in manifests:
        counts = [c.record_count for c in manifest.committables]
        rows.append(
            {
                "pipeline_id": manifest.pipeline_id,
                "checkpoint_id": manifest.checkpoint_id,
                "status": manifest.status.value,
                "run": manifest.prepared_by.describe() if manifest.prepared_by else None,
                "records": None if any(c is None for c in counts) else sum(counts),
                "transactions": len(manifest.committables),
                "age_s": max(0, (now_ms - manifest.created_at_ms) // 1000),
                "manifest": uri,
            }
        )
    return sorted(rows, key=lambda r: (r["pipeline_id"], -r["checkpoint_id"]))


def require_connection_read(conn_id: str, user: Any) -> None:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails

    if not get_auth_manager().is_authorized_connection(
        method="GET", details=ConnectionDetails(conn_id=conn_id), user=user
    ):
        raise HTTPException(403, f"not allowed to read connection {conn_id!r}")


def transaction_rows(findings: Any) -> list[dict[str, Any]]:
    rows = []
    for finding in findings.transactions:
        data = finding.to_dict()
        rows.append({c: data.get(c) for c in TXN_COLUMNS if c not in ("age_s", "partitions", "runbook")}
                    | {"age_s": finding.age_ms // 1000, "partitions": ", ".join(finding.partitions),
                       "runbook": finding.kind.runbook, "producer_id": finding.producer_id,
                       "producer_epoch": finding.producer_epoch,
                       "timeout_s": finding.timeout_ms // 1000 if finding.timeout_ms >= 0 else None})
    return sorted(rows, key=lambda r: (-r["age_s"], r["transactional_id"]))


async def _transactions_for(conn_id: str, prefixes: str | None, min_age_s: int, user: Any) -> dict[str, Any]:
    import asyncio

    from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook
    from airflow_provider_kafka_eos.kafka.operations.scan import ScanSpec, scan

    require_connection_read(conn_id, user)
    wanted = tuple(p.strip() for p in (prefixes or "").split(",") if p.strip()) or None
    hook = KafkaEosHook(kafka_eos_conn_id=conn_id)

    def blocking() -> Any:
        base = hook.manifest_base_uri()
        spec = ScanSpec(min_age_ms=min_age_s * 1000, prefixes=wanted, manifest_base_uri=base)
        with hook.transaction_admin() as admin:
            return scan(admin, spec, access=hook.store_access(base))

    from airflow_provider_kafka_eos.ui.resolution import DAG_ID, request_for, resolve_href

    findings = await asyncio.to_thread(blocking)
    rows = transaction_rows(findings)
    for row in rows:  # the pre-filled request the row's action opens (view-relative link)
        conf = request_for(row)
        row["action"] = None if conf is None else {
            "label": f"{DAG_ID}: {conf['action']}", "href": resolve_href(conn_id, str(row["kind"]), conf)}
    return {"conn_id": conn_id, "prefixes": list(wanted or ()), "min_age_s": min_age_s, "transactions": rows}


async def _rows_for(conn_id: str, pipeline_id: str | None, user: Any) -> dict[str, Any]:
    require_connection_read(conn_id, user)
    from airflow_provider_kafka_eos.hooks.kafka_eos import KafkaEosHook

    store = KafkaEosHook(kafka_eos_conn_id=conn_id).manifest_store()  # with the store's credentials
    manifests = store.manifests(pipeline_id or None)
    return {
        "conn_id": conn_id,
        "store": store.base_uri,
        "checkpoints": checkpoint_rows(manifests, int(time.time() * 1000)),
    }


def user_dep():
    from airflow.api_fastapi.core_api.security import get_user

    return Depends(get_user)


ConnId = Annotated[str, Query(min_length=1, max_length=250)]
Pipeline = Annotated[str | None, Query(max_length=250)]


@app.get("/api/checkpoints")
async def checkpoints_json(
    user: Annotated[Any, user_dep()], conn_id: ConnId = DEFAULT_CONN_ID, pipeline_id: Pipeline = None
) -> JSONResponse:
    try:
        return JSONResponse(await _rows_for(conn_id, pipeline_id, user))
    except KafkaEosError as err:
        return JSONResponse({"conn_id": conn_id, "error": str(err)}, status_code=503)


Prefixes = Annotated[str | None, Query(max_length=2000)]
MinAge = Annotated[int, Query(ge=0, le=7 * 24 * 3600)]


@app.get("/api/transactions")
async def transactions_json(
    user: Annotated[Any, user_dep()],
    conn_id: ConnId = DEFAULT_CONN_ID,
    prefixes: Prefixes = None,
    min_age_s: MinAge = 0,
) -> JSONResponse:
    try:
        return JSONResponse(await _transactions_for(conn_id, prefixes, min_age_s, user))
    except KafkaEosError as err:
        return JSONResponse({"conn_id": conn_id, "error": str(err)}, status_code=503)


def _cell(column: str, value: Any) -> str:
    text = html.escape("" if value is None else str(value))
    if column == "runbook" and value:
        return f"<td><a href='runbook/{text}'>{text}</a></td>"
    return f"<td>{text}</td>"


def _table(columns: tuple[str, ...], rows: list[dict[str, Any]], action: Any = None,
           row_id: Any = None) -> str:
    """An HTML table; ``action(row)`` adds an "action" cell after the first column, ``row_id(row)``
    an anchor id per row."""
    esc = html.escape

    def cells(row: dict[str, Any]) -> list[str]:
        out = [_cell(c, row[c]) for c in columns]
        return [out[0], f"<td>{action(row)}</td>", *out[1:]] if action else out

    heads = [f"<th>{esc(c)}</th>" for c in columns]
    head = "".join([heads[0], "<th>action</th>", *heads[1:]] if action else heads)
    body = "".join(
        (f"<tr id='{esc(row_id(row))}'>" if row_id else "<tr>") + "".join(cells(row)) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _resolve_cell(conn_id: str) -> Any:
    from airflow_provider_kafka_eos.ui.resolution import DAG_ID, request_for, resolve_href

    def cell(row: dict[str, Any]) -> str:
        conf = request_for(row)
        if conf is None:
            return ""
        href = html.escape(resolve_href(conn_id, str(row["kind"]), conf))
        return f"<a href='{href}'>{html.escape(DAG_ID)}: {html.escape(str(conf['action']))}</a>"

    return cell




@app.get("/", response_class=HTMLResponse)
async def checkpoints_page(
    user: Annotated[Any, user_dep()],
    conn_id: ConnId = DEFAULT_CONN_ID,
    pipeline_id: Pipeline = None,
    prefixes: Prefixes = None,
    min_age_s: MinAge = 0,
) -> HTMLResponse:
    esc = html.escape
    try:
        data = await _rows_for(conn_id, pipeline_id, user)
        txns = await _transactions_for(conn_id, prefixes, min_age_s, user)
    except KafkaEosError as err:
        body = (
            f"<p class='error'><b>Cannot read the checkpoints</b>: {esc(str(err))}</p>"
            "<p>Nothing was changed.</p>"
        )
        return HTMLResponse(_page(conn_id, body), status_code=503)
    scope = ", ".join(txns["prefixes"]) or "the whole cluster"
    body = (
        f"<p>Manifest store <code>{esc(data['store'])}</code> of connection <code>{esc(conn_id)}</code>: "
        f"{len(data['checkpoints'])} checkpoint(s). Read-only.</p>"
        + _table(COLUMNS, data["checkpoints"],
                 row_id=lambda r: checkpoint_anchor(r["pipeline_id"], r["checkpoint_id"]))
        + f"<h2>Open transactions</h2><p>Ongoing for at least {txns['min_age_s']} s under {esc(scope)}: "
        f"{len(txns['transactions'])}. <i>partitions</i> are those whose last stable offset each holds; "
        "<i>action</i> opens a pre-filled eos_manual_resolution request (a dry run until you untick "
        "it).</p>"
        + _table(TXN_COLUMNS, txns["transactions"], action=_resolve_cell(conn_id))
    )
    return HTMLResponse(_page(conn_id, body))


@app.get("/resolve", response_class=HTMLResponse)
async def resolve_page(
    request: Request, user: Annotated[Any, user_dep()], conn_id: ConnId = DEFAULT_CONN_ID,
    kind: Annotated[str, Query(max_length=40)] = "",
) -> HTMLResponse:
    """A pre-filled eos_manual_resolution request (nothing is sent until the operator submits it)."""
    from airflow_provider_kafka_eos.ui.resolution import parse_request, resolve_page_body

    try:
        conf, actions = parse_request(kind, request.query_params)
    except ValueError as err:
        body = f"<p class='error'><b>Cannot pre-fill the request</b>: {html.escape(str(err))}</p>"
        return HTMLResponse(_page(conn_id, body, heading="Resolve a transaction"), status_code=400)
    body = resolve_page_body(conn_id, kind, conf, actions, airflow_base_path())
    return HTMLResponse(_page(conn_id, body, heading="Resolve a transaction"))


@app.get("/runbook/", response_class=HTMLResponse)
async def runbook_index(user: Annotated[Any, user_dep()]) -> HTMLResponse:
    from airflow_provider_kafka_eos import runbook

    items = "".join(
        f"<li><a href='{html.escape(p)}'>{html.escape(runbook.title(p))}</a></li>" for p in runbook.pages()
    )
    return HTMLResponse(_page("", f"<h2>Runbook</h2><ul>{items}</ul>", heading="Kafka exactly-once runbook"))


@app.get("/runbook/{page}", response_class=HTMLResponse)
async def runbook_page(page: str, user: Annotated[Any, user_dep()]) -> HTMLResponse:
    """One runbook page, rendered (raw HTML in the Markdown is not passed through)."""
    from airflow_provider_kafka_eos import runbook

    try:
        text = runbook.read(page)
    except KeyError as err:
        raise HTTPException(404, str(err.args[0])) from None
    return HTMLResponse(_page("", _markdown(text), heading="Kafka exactly-once runbook"))


def _markdown(text: str) -> str:
    try:
        from markdown_it import MarkdownIt
    except ImportError:  # markdown-it-py comes with rich (an Airflow dependency); plain text otherwise
        return f"<pre>{html.escape(text)}</pre>"
    # Links between pages are "other-page.md": served here as "other-page".
    rendered = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)
    return rendered.replace('.md"', '"')


def _page(conn_id: str, body: str, heading: str = "Checkpoints") -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Kafka exactly-once: checkpoints</title>"
        "<style>body{font-family:sans-serif;font-size:14px;margin:1.5em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;max-width:24em;overflow-wrap:anywhere}"
        ".error{color:#b00}"
        "tr:target{background:#ffe8a0}</style></head>"
        f"<body><h1>{html.escape(heading)}</h1>{body}</body></html>"
    )
