"""One operator action on transactions: validation and execution shared by the CLI and the UI.

``kafka-eos-txn`` and the manual-resolution DAG (Params form) both build a
:class:`~airflow_provider_kafka_eos.kafka.operations.resolution_request.ResolutionRequest`, call its
``validate`` and :func:`run_resolution`, so a user sees the same words and the same safety rules
whichever door they came in by. Each action family has its module: ``resolve_read.py`` (list,
describe, preflight), ``resolve_abort.py``, ``resolve_commit.py``, ``resolve_hanging.py``;
this module only dispatches a validated request to one of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import STANDARD_CHAIN, StoreAccess
from airflow_provider_kafka_eos.kafka.operations.resolution_request import (
    ABORT_CHECKPOINT,
    Progress,
    ResolutionRequest,
    ResolutionResult,
)
from airflow_provider_kafka_eos.kafka.operations.resolve_abort import (
    action_abort,
    action_abort_checkpoint,
)
from airflow_provider_kafka_eos.kafka.operations.resolve_commit import (
    action_commit,
    action_commit_from_manifest,
)
from airflow_provider_kafka_eos.kafka.operations.resolve_hanging import (
    action_abort_partition,
    action_find_hanging,
)
from airflow_provider_kafka_eos.kafka.operations.resolve_read import (
    action_describe,
    action_list,
    action_preflight,
)

if TYPE_CHECKING:  # an action may use any of the facade's operations: its type is the facade
    from airflow_provider_kafka_eos.kafka.admin.transactions import TransactionAdmin


def run_resolution(
    admin: TransactionAdmin,
    request: ResolutionRequest,
    progress: Progress | None = None,
    *,
    config: Any = None,
    access: StoreAccess = STANDARD_CHAIN,
    record_formats: Any = None,
) -> ResolutionResult:
    """Execute a validated request with an open ``TransactionAdmin``.

    ``progress(done, total, label)`` is called during bulk work. ``config`` (the
    ``KafkaClientConfig``, default: the admin's) is used only by ``preflight``, to name the
    principal whose ACLs are checked. ``access``: how this process reaches the manifest store
    (the hook's ``store_access``; the CLI's ``--conn-id``), for every action that reads it.
    """
    request = request.validate()
    with_store = {
        "abort": action_abort,
        ABORT_CHECKPOINT: action_abort_checkpoint,
        "commit-from-manifest": action_commit_from_manifest,
        "find-hanging": action_find_hanging,
        "abort-partition": action_abort_partition,
    }
    if request.action in with_store:
        return with_store[request.action](admin, request, progress, access)
    handler = {
        "list": action_list,
        "describe": action_describe,
        "commit": action_commit,
        "preflight": action_preflight,
    }[request.action]
    if request.action == "preflight":
        return action_preflight(
            admin, request, progress, config if config is not None else getattr(admin, "config", None),
            record_formats=record_formats,
        )
    return handler(admin, request, progress)
