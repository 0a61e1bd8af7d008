"""The lingering scan's findings, bounded for XCom; the full list in a JSON file a person can read.

XCom rows live in Airflow's metadata database (and a deferred sensor's trigger event too), so a
scan over 50,000 open transactions must not push 50,000 findings there. The sensor pushes
:func:`xcom_payload`: the counts, the first ``limit`` findings of each list, how many were left
out, and ``findings_uri``: the whole :meth:`Findings.to_dict` written by :func:`write_findings`
as one JSON file beside the manifests (``<base>/_lingering-findings/findings-<ms>-<hash>.json``).
:meth:`Findings.from_dict` reads that file back when it is handed a truncated payload, so the
abort operator and the cleanup DAG act on every finding, not only on the first ``limit``.
No Airflow imports.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import store_unreachable
from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import (
    STANDARD_CHAIN,
    StoreAccess,
    read_object,
    replace_object,
)
from airflow_provider_kafka_eos.kafka.errors import ManifestError

__all__ = ["FINDINGS_DIR", "XCOM_MAX_FINDINGS", "read_findings", "write_findings", "xcom_payload"]

FINDINGS_DIR = "_lingering-findings"
XCOM_MAX_FINDINGS = 100  # per list (transactions, LSO stalls): ~30 KB of XCom at most


def write_findings(base_uri: str, findings: Any, full: Mapping[str, Any] | None = None, *,
                   access: StoreAccess = STANDARD_CHAIN) -> str:
    """Write the whole findings as JSON under ``base_uri``; returns the file's URI.

    The name holds the poll time and a hash of the content, so a retried write of the same
    findings lands on the same file, and two polls never overwrite each other. Atomic, like a
    manifest: a reader sees the whole file or none.
    """
    # Compact JSON (50,000 findings: ~25 MB; ``python -m json.tool`` pretty-prints it).
    data = json.dumps(full if full is not None else findings.to_dict(), separators=(",", ":")).encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()[:12]
    uri = f"{base_uri.rstrip('/')}/{FINDINGS_DIR}/findings-{findings.checked_at_ms}-{digest}.json"
    try:
        replace_object(uri, data, access=access)
    except OSError as exc:
        raise store_unreachable(uri, exc, "written", "; the findings file was not written") from None
    return uri


def read_findings(uri: str, *, access: StoreAccess = STANDARD_CHAIN) -> dict[str, Any]:
    """The full findings dict written by :func:`write_findings`; ManifestError naming the file."""
    try:
        raw = read_object(uri, access=access)
        if raw is None:
            raise FileNotFoundError(uri)
        data = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise ManifestError(
            f"{uri}: the lingering-transaction findings file is gone; run the sensor again",
            runbook="troubleshooting",
        ) from None
    except OSError as exc:  # the store did not answer: the store's failure, named as such
        raise store_unreachable(uri, exc, "read", "; run the sensor again once it answers") from None
    except ValueError as exc:
        raise ManifestError(
            f"{uri}: the lingering-transaction findings file cannot be read ({exc}); run the sensor again",
            runbook="troubleshooting",
        ) from None
    if not isinstance(data, dict):
        raise ManifestError(
            f"{uri}: not a findings file (a JSON object was expected)", runbook="troubleshooting"
        )
    return data


def xcom_payload(
    findings: Any,
    *,
    limit: int = XCOM_MAX_FINDINGS,
    findings_uri: str | None = None,
    full: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``findings.to_dict()`` with each list cut to ``limit`` entries.

    ``omitted`` counts what was cut per list; ``findings_uri`` names the file with all of them
    (None when there was nowhere to write it: the task log's table is then the full record).
    ``full`` is ``findings.to_dict()`` when the caller already has it.
    """
    if limit < 0:
        raise ValueError(f"limit must not be negative, got {limit}")
    full = dict(findings.to_dict() if full is None else full)
    omitted = {}
    for key in ("transactions", "lso_stalls"):
        entries = full[key]
        omitted[key] = max(0, len(entries) - limit)
        full[key] = entries[:limit]
    full["omitted"] = omitted
    full["findings_uri"] = findings_uri
    return full


def resolve(data: Mapping[str, Any], *, access: StoreAccess = STANDARD_CHAIN) -> Mapping[str, Any]:
    """The full findings for a payload: itself, or the file it names when lists were cut."""
    omitted = data.get("omitted") or {}
    uri = data.get("findings_uri")
    if uri and any(int(n or 0) > 0 for n in omitted.values()):
        return read_findings(str(uri), access=access)
    return data
