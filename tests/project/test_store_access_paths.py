"""Every runtime call that reaches the manifest store hands it the store's access (issue 35).

The store functions take ``access=`` (``kafka/checkpoints/store_objects.StoreAccess``) with the
store client's standard chain as the default, which is right for local paths, tests and a CLI
without ``--conn-id``. In the runtime package and the example DAGs the default is never taken
silently: a call that leaves ``access`` out reaches an S3 store without the connection's
credentials (issue 35's cleanup DAG failed with NoCredentialsError that way). A pure AST check.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STORE_CALLS = frozenset({
    "read_manifest", "write_manifest", "find_manifests", "store_exists", "commit_checkpoint",
    "abort_checkpoint", "mark_aborted", "load_prepared", "read_object", "read_versioned", "create_object",
    "replace_if", "replace_object", "read_plan", "record_plan", "plans_without_manifest", "claim_basis",
    "read_findings", "write_findings", "scan", "run_resolution",
})


def _calls_without_access(path: Path, root: Path = ROOT) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = getattr(func, "id", None) or getattr(func, "attr", None)
        if name in STORE_CALLS and not any(k.arg in ("access", None) for k in node.keywords):
            found.append(f"{path.relative_to(root)}:{node.lineno}: {name}(...) without access=")
    return found


def test_runtime_store_calls_hand_over_the_stores_access():
    files = [*sorted((ROOT / "airflow_provider_kafka_eos").rglob("*.py")),
             *sorted((ROOT / "dags").glob("*.py"))]
    assert len(files) > 50
    missing = [line for path in files for line in _calls_without_access(path)]
    assert missing == [], "\n".join(missing)


def test_the_check_sees_a_call_that_forgets_it(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("commit_checkpoint(admin, uri, committed_by='x')\nread_manifest(uri, access=a)\n")
    assert _calls_without_access(probe, tmp_path) == ["probe.py:1: commit_checkpoint(...) without access="]
