"""One operator action on transactions: validation and execution shared by the CLI and the UI.

``kafka-eos-txn`` and the manual-resolution DAG (Params form) both build a
:class:`ResolutionRequest`, call :meth:`ResolutionRequest.validate` and
:func:`run_resolution`, so a user sees the same words and the same safety rules whichever
door they came in by: a commit needs the producer id and epoch from the manifest or
``describe``; every abort first reads the manifest store (``manifest_base_uri``) and refuses
the transactions a PREPARED manifest lists (that would be data loss, invariant 4), unless the
request says ``protect=False``; a dry run runs every check the real action runs. The rules
themselves live in ``kafka/checkpoints/lifecycle.py``; this module only maps requests onto them.

Failures the user must act on raise :class:`~airflow_provider_kafka_eos.kafka.errors.KafkaEosError`
subclasses (their text names the transaction, the cause and the runbook page);
:class:`UsageError` means the request itself is wrong and nothing was sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import UsageError
from airflow_provider_kafka_eos.kafka.validation import (
    validate_prefix,
    validate_topic,
    validate_transactional_id,
)

ACTIONS = (
    "list",
    "describe",
    "abort",
    "commit",
    "commit-from-manifest",
    "find-hanging",
    "preflight",
    "abort-partition",
)
ABORT_CHECKPOINT = "abort-checkpoint"  # internal: abort --manifest URI
TRANSACTION_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "PrepareEpochFence",
)
DEFAULT_HANGING_MIN_AGE_MS = 15 * 60 * 1000
MAX_EPOCH = 32767

Progress = Callable[[int, int, str], None]

# How the CLI names each request field in a message. Another front end (the manual DAG's form)
# passes its own names to ``validate(field_names=...)``: the rules stay here, only words differ.
CLI_FIELD_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "transactional_id": "--transactional-id",
        "producer_id": "--producer-id",
        "epoch": "--epoch",
        "prefixes": "--prefix",
        "states": "--state",
        "min_age_ms": "--min-age",
        "manifest_uri": "--manifest",
        "dry_run": "--dry-run",
        "topics": "--topic",
        "transaction_timeout_ms": "--transaction-timeout-ms",
        "two_phase_commit": "--two-phase-commit",
        "partition": "--partition",
        "force": "--force",
    }
)


def _normalise_state(state: str, name: str = "--state") -> str:
    for known in TRANSACTION_STATES:
        if known.lower() == state.strip().lower():
            return known
    raise UsageError(
        f"{name} {state!r} is not a Kafka transaction state (one of {', '.join(TRANSACTION_STATES)})"
    )


def _short_names(n: Mapping[str, str]) -> tuple[str, str, str, str, str]:
    """The field names most messages use, in a fixed order (keeps the messages on one line each)."""
    return n["transactional_id"], n["producer_id"], n["epoch"], n["manifest_uri"], n["prefixes"]


@dataclass(frozen=True)
class ResolutionRequest:
    """What the user asked for. No secrets: connection settings travel separately."""

    action: str
    transactional_id: str | None = None
    producer_id: int | None = None
    epoch: int | None = None
    prefixes: tuple[str, ...] = ()
    states: tuple[str, ...] = ()
    min_age_ms: int | None = None
    manifest_uri: str | None = None
    dry_run: bool = False
    manifest_base_uri: str | None = None
    protect: bool = True
    # preflight only (optional): the pipeline's output topics and transaction timeout.
    topics: tuple[str, ...] = ()
    transaction_timeout_ms: int | None = None
    two_phase_commit: bool = False  # preflight: the pipeline uses KIP-939 2PC (TWO_PHASE_COMMIT ACL)
    # abort-partition (one of ``topics``) and find-hanging --topic: the partition to act on / scan
    partition: int | None = None
    force: bool = False  # abort-partition: even though the coordinator still owns the transaction

    def validate(self, field_names: Mapping[str, str] | None = None) -> ResolutionRequest:
        """The request, normalised; raises UsageError with the text the user sees.

        ``field_names`` maps request fields (``producer_id``...) to the words the caller's front
        end uses for them; missing ones keep the CLI's flag (``CLI_FIELD_NAMES``).
        """
        n = {**CLI_FIELD_NAMES, **(field_names or {})}
        tid, _, _, mf, px = _short_names(n)
        action = (self.action or "").strip().lower()
        if action not in (*ACTIONS, ABORT_CHECKPOINT):
            raise UsageError(f"unknown action {self.action!r}; choose one of {', '.join(ACTIONS)}")
        txn_id = (self.transactional_id or "").strip() or None
        prefixes = tuple(p for p in (s.strip() for s in self.prefixes) if p)
        if txn_id is not None:
            validate_transactional_id(txn_id, field=n["transactional_id"])
        for prefix in prefixes:
            validate_prefix(prefix, field=n["prefixes"])
        for topic in self.topics:
            validate_topic(topic, field=n["topics"])
        if self.transaction_timeout_ms is not None and self.transaction_timeout_ms <= 0:
            raise UsageError(
                f"{n['transaction_timeout_ms']} must be positive, got {self.transaction_timeout_ms}"
            )
        states = tuple(_normalise_state(s, n["states"]) for s in self.states)
        manifest = (self.manifest_uri or "").strip() or None
        if action == "commit" and manifest and not txn_id:
            action = "commit-from-manifest"
        if action == "abort" and manifest:
            if txn_id or prefixes:
                raise UsageError(
                    f"abort takes {mf} (a whole checkpoint), {tid} or {px}, "
                    "one of them",
                    transactional_id=txn_id,
                )
            action = ABORT_CHECKPOINT
        normalised = replace(
            self,
            action=action,
            transactional_id=txn_id,
            prefixes=prefixes,
            states=states,
            manifest_uri=manifest,
            manifest_base_uri=(self.manifest_base_uri or "").strip() or None,
        )
        normalised._check_targets(n)
        normalised._check_pid_epoch(n)
        normalised._check_partition_abort(n)
        return normalised

    def data_loss_risk(self) -> str | None:
        """Why carrying out this (validated) request may lose data; None when it cannot.

        The one rule the approval step of the manual resolution DAG asks (``operators/approval.py``):
        a dry run changes nothing; an abort that goes around the PREPARED protection aborts batches a
        manifest still owes; giving up a checkpoint (``abort`` with a manifest) loses its batch; forcing
        an abort of a partition's hanging transaction that its coordinator still owns may abort one a
        live producer is about to commit. Everything else (list, describe, commits, a protected abort,
        which refuses every id a PREPARED manifest lists) loses nothing.
        """
        if self.dry_run:
            return None
        what = self.transactional_id or ", ".join(self.prefixes) or "the matching transactions"
        if self.action in ("abort", ABORT_CHECKPOINT) and self.manifest_uri:
            return (f"gives up checkpoint {self.manifest_uri}: its transactions are aborted and it is marked "
                    "ABORTED; its batch is lost unless the input is written again")
        if self.action == "abort" and not self.protect:
            return (f"is an unprotected abort of {what}: transactions listed in PREPARED manifests are "
                    "aborted too, and their checkpoints' batches are lost")
        if self.action == "abort-partition" and self.force:
            where = f"{', '.join(self.topics)}-{self.partition}"
            return (f"is a forced abort of the hanging transaction on {where}: its coordinator still owns "
                    "it, so a live producer's batch may be lost")
        return None

    def _check_partition_abort(self, n: Mapping[str, str]) -> None:
        """abort-partition: one topic, one partition; the producer id and epoch both or neither."""
        _, pid, ep, _, _ = _short_names(n)
        topic, part = n["topics"], n["partition"]
        if self.action != "abort-partition":
            if self.force:
                raise UsageError(f"{n['force']} applies to the abort-partition action only")
            if self.partition is not None and self.action != "find-hanging":
                raise UsageError(f"{part} applies to abort-partition and find-hanging only")
            return
        if len(self.topics) != 1 or self.partition is None:
            raise UsageError(f"abort-partition needs one {topic} and its {part}")
        if self.partition < 0:
            raise UsageError(f"{part} must be >= 0, got {self.partition}")
        if (self.producer_id is None) != (self.epoch is None):
            raise UsageError(
                f"abort-partition takes both {pid} and {ep} (from `find-hanging --topic`), or neither "
                "(then the partition must have exactly one hanging transaction)"
            )

    def _check_targets(self, n: Mapping[str, str]) -> None:
        tid, pid, ep, mf, px = _short_names(n)
        action, txn_id, prefixes, manifest = (
            self.action,
            self.transactional_id,
            self.prefixes,
            self.manifest_uri,
        )
        if self.min_age_ms is not None and self.min_age_ms < 0:
            raise UsageError(f"{n['min_age_ms']} must not be negative, got {self.min_age_ms} ms")
        if action == "commit" and not txn_id:
            raise UsageError(f"commit needs {tid} (or {mf} to commit a whole checkpoint)")
        if action == "commit" and manifest:
            raise UsageError(
                f"commit takes either {tid} with {pid}/{ep}, or {mf}, not both",
                transactional_id=txn_id,
            )
        if action == "commit-from-manifest" and not manifest:
            raise UsageError(f"commit-from-manifest needs {mf} (the checkpoint manifest to commit)")
        if action in ("describe", "abort"):
            if txn_id and prefixes:
                raise UsageError(
                    f"{action} takes either {tid} or {px}, not both", transactional_id=txn_id
                )
            if not txn_id and not prefixes:
                raise UsageError(
                    f"{action} needs {tid}, or {px} for every transaction under a "
                    "prefix" + (f", or {mf} for a whole checkpoint" if action == "abort" else "")
                )
        no_id = ("list", "find-hanging", "preflight", "commit-from-manifest", "abort-partition")
        if action in no_id and txn_id:
            raise UsageError(f"{action} does not take {tid}; use {px} to narrow it down")
        if action == "preflight" and not prefixes:
            raise UsageError(f"preflight needs {px} (the pipeline's transactional-id prefix)")
        if self.two_phase_commit and action != "preflight":
            raise UsageError(f"{n['two_phase_commit']} applies to the preflight action only")
        if action == "abort-partition" and prefixes:
            raise UsageError(f"abort-partition does not take {px}: it acts on one partition")
        dry_run_actions = ("abort", "commit", "commit-from-manifest", ABORT_CHECKPOINT, "abort-partition")
        if self.dry_run and action not in dry_run_actions:
            raise UsageError(f"{n['dry_run']} applies to abort and commit, not {action}")

    def _check_pid_epoch(self, n: Mapping[str, str]) -> None:
        tid, pid, ep, _, _ = _short_names(n)
        txn_id = self.transactional_id
        given = self.producer_id is not None or self.epoch is not None
        single_abort = self.action == "abort" and txn_id is not None
        if given and self.action not in ("commit", "abort-partition") and not single_abort:
            raise UsageError(
                f"{pid} and {ep} only apply to the commit action, or to the abort action "
                f"with {tid} (compare-and-abort)"
            )
        if self.action == "commit" and (self.producer_id is None or self.epoch is None):
            raise UsageError(
                f"commit needs {pid} and {ep} (from the checkpoint manifest or `describe`)",
                transactional_id=txn_id,
            )
        if single_abort and given and (self.producer_id is None or self.epoch is None):
            raise UsageError(
                f"compare-and-abort needs both {pid} and {ep}", transactional_id=txn_id
            )
        if self.producer_id is not None and self.producer_id < 0:
            raise UsageError(f"{pid} must be >= 0, got {self.producer_id}", transactional_id=txn_id)
        if self.epoch is not None and not 0 <= self.epoch <= MAX_EPOCH:
            raise UsageError(f"{ep} must be in 0..{MAX_EPOCH}, got {self.epoch}", transactional_id=txn_id)


@dataclass
class ResolutionResult:
    """Rows for a table (or JSON / XCom), a one-line summary, and whether everything went well."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    summary: str = ""
    ok: bool = True
    columns: tuple[str, ...] = ()
    # Why the answer may be incomplete (a listing the principal cannot fully see); the CLI
    # prints them on stderr and fails with --strict.
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "summary": self.summary, "rows": self.rows, "warnings": self.warnings}




# -- helpers ------------------------------------------------------------------------------










# -- actions ------------------------------------------------------------------------------


































# -- hanging partitions (KIP-664) ---------------------------------------------------------------







