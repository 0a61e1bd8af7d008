"""Pre-filled ``eos_manual_resolution`` requests for the operators' view's open transactions.

Why a page of our own: Airflow 3.3's trigger form takes no values from its URL (its React form is
filled from the DAG's param defaults, or from an earlier run's conf with "Trigger again with
config"; the 2.x ``/trigger?conf=`` URL is gone). So each open transaction links to
``/kafka-eos/resolve?...``: the same request as the DAG's form, pre-filled, which the operator
reads, may edit, and submits. It is sent to Airflow's own REST API
(``POST /api/v2/dags/eos_manual_resolution/dagRuns``) as the logged-in user, so Airflow's DAG-run
permissions decide, and the DAG's own validation and safety rules apply as for its form. The
view itself changes nothing.

What is offered follows the safe design (docs/design: no shipped path aborts a prepared record):

- ``commit-pending`` (a PREPARED manifest lists it): ``commit-from-manifest`` with its manifest;
  never ``abort``.
- ``orphan`` (no PREPARED manifest lists it): ``abort`` as compare-and-abort (producer id and
  epoch as seen), still protected by the DAG's manifest check.
- ``foreign`` (outside the pipelines' prefixes): ``describe`` only.

Every request starts as a dry run; the operator unticks it to act.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

__all__ = ["DAG_ID", "request_for", "resolve_href", "resolve_page_body"]

DAG_ID = "eos_manual_resolution"
# The fields a pre-filled request may carry (a subset of the DAG's params), in the form's order.
FIELDS = ("action", "transactional_id", "producer_id", "epoch", "manifest_uri", "dry_run")
INTEGER_FIELDS = ("producer_id", "epoch")
# Which actions each classification may be offered (the first is the pre-filled one).
ALLOWED_ACTIONS: dict[str, tuple[str, ...]] = {
    "commit-pending": ("commit-from-manifest", "describe"),
    "orphan": ("abort", "describe"),
    "writing": ("describe",),  # its writer's own (writer lease): nothing to resolve while it writes
    "foreign": ("describe",),
}


def request_for(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pre-filled conf for one transaction row of the view (``None``: no action to offer)."""
    kind = str(row.get("kind") or "")
    actions = ALLOWED_ACTIONS.get(kind)
    if not actions:
        return None
    conf: dict[str, Any] = {"action": actions[0], "transactional_id": row["transactional_id"]}
    conf["dry_run"] = True
    if actions[0] == "commit-from-manifest":
        if not row.get("manifest_uri"):
            return {**conf, "action": "describe"}
        conf = {"action": "commit-from-manifest", "manifest_uri": row["manifest_uri"], "dry_run": True}
    elif actions[0] == "abort":
        conf.update(producer_id=row.get("producer_id"), epoch=row.get("producer_epoch"))
    return {k: v for k, v in conf.items() if v is not None}


def resolve_href(conn_id: str, kind: str, conf: Mapping[str, Any]) -> str:
    """The view-relative link to the pre-filled page of one request."""
    return "resolve?" + urlencode({"conn_id": conn_id, "kind": kind, **{k: conf[k] for k in conf}})


def parse_request(kind: str, params: Mapping[str, str]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The request from the link's query, checked against what ``kind`` may be offered.

    Raises ``ValueError`` naming the field: an action the classification does not allow (an
    ``abort`` of a commit-pending transaction, say) is refused here, not only by the DAG.
    """
    actions = ALLOWED_ACTIONS.get(kind)
    if not actions:
        raise ValueError(f"kind {kind!r} is not a classification of the view ({', '.join(ALLOWED_ACTIONS)})")
    conf: dict[str, Any] = {}
    for field in FIELDS:
        raw = params.get(field)
        if raw in (None, ""):
            continue
        if field in INTEGER_FIELDS:
            if not str(raw).isdigit():
                raise ValueError(f"{field} must be a non-negative integer, got {raw!r}")
            conf[field] = int(raw)
        elif field == "dry_run":
            conf[field] = str(raw).lower() in ("true", "1", "on")
        else:
            conf[field] = str(raw)
    action = conf.get("action")
    if action not in actions:
        raise ValueError(
            f"action {action!r} is not offered for a {kind} transaction (allowed: {', '.join(actions)})"
        )
    conf.setdefault("dry_run", True)
    return conf, actions


def resolve_page_body(conn_id: str, kind: str, conf: Mapping[str, Any], actions: tuple[str, ...],
                      api_base: str) -> str:
    """The pre-filled form and the script that submits it to Airflow's REST API."""
    esc = html.escape
    options = "".join(
        f"<option value='{esc(a)}'{' selected' if a == conf.get('action') else ''}>{esc(a)}</option>"
        for a in actions
    )
    inputs = "".join(
        f"<p><label>{esc(label)} <input name='{name}' value='{esc(str(conf.get(name, '')))}' size='60'>"
        f"</label></p>"
        for name, label in (
            ("transactional_id", "Transactional id"),
            ("producer_id", "Producer id"),
            ("epoch", "Producer epoch"),
            ("manifest_uri", "Manifest URI"),
        )
    )
    checked = " checked" if conf.get("dry_run", True) else ""
    connection_note = (
        "" if conn_id == "kafka_eos_default" else
        f"<p class='error'>This view reads connection <code>{esc(conn_id)}</code>; {DAG_ID} acts on its own "
        "(<code>KAFKA_EOS_RESOLUTION_CONN_ID</code>, default <code>kafka_eos_default</code>): check they "
        "name the same cluster.</p>"
    )
    return (
        f"<h2>Trigger {DAG_ID}: {esc(kind)} transaction</h2>"
        f"<p>Pre-filled from the view; read it, edit it if needed, then trigger. The run is created by "
        f"Airflow's REST API as you (Airflow's permissions apply) and the DAG checks the request as its "
        f"own form would. Starts as a dry run. Runbook: see the transaction's row.</p>{connection_note}"
        f"<form id='resolve'><p><label>Action <select name='action'>{options}</select></label></p>{inputs}"
        f"<p><label><input type='checkbox' name='dry_run'{checked}> Dry run (check and report only)"
        "</label></p>"
        f"<p><button type='submit'>Trigger {DAG_ID}</button></p></form><p id='outcome'></p>"
        f"<script>{_script(api_base)}</script>"
    )


def _script(api_base: str) -> str:
    """Posts the form as the DAG run's conf; shows the new run's link or Airflow's refusal."""
    return (
        "const form=document.getElementById('resolve'),out=document.getElementById('outcome');"
        "form.addEventListener('submit',async e=>{e.preventDefault();const conf={};"
        "for(const [k,v] of new FormData(form)){if(v==='')continue;"
        "conf[k]=(k==='producer_id'||k==='epoch')?Number(v):v;}"
        "conf.dry_run=form.dry_run.checked;"
        f"const base={json.dumps(api_base)};"
        f"const r=await fetch(base+'/api/v2/dags/{DAG_ID}/dagRuns',{{method:'POST',credentials:'same-origin',"
        "headers:{'Content-Type':'application/json'},body:JSON.stringify({logical_date:null,conf})});"
        "const data=await r.json().catch(()=>({}));out.textContent='';"
        "if(r.ok){const a=document.createElement('a');"
        f"a.href=base+'/dags/{DAG_ID}/runs/'+encodeURIComponent(data.dag_run_id);"
        "a.textContent='Triggered: '+data.dag_run_id;out.appendChild(a);}"
        "else{out.className='error';out.textContent='Refused by Airflow ('+r.status+'): '"
        "+(typeof data.detail==='string'?data.detail:JSON.stringify(data.detail||data));}});"
    )
