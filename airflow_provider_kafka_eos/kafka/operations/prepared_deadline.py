"""The verdict of a pipeline run's transaction deadline: which checkpoints are PREPARED, how long
their transactions have been open, how long the broker still waits for their commit.

Airflow's deadline alert (``tasks/deadline.py``) fires when a pipeline run was not done a fraction
of the transaction timeout after it was queued. A checkpoint is prepared after its run was queued,
so at that moment every checkpoint still PREPARED has used *at most* that fraction of its timeout;
whatever it has used, it is the one moment an operator can still commit it before the broker
aborts it (``transaction_start_ms + transaction_timeout_ms``, the manifest holds both). So every
PREPARED checkpoint of the pipeline is named, this run's first, with the time its transactions
have been open and the time left; none PREPARED means the run is slow and nothing is at risk yet.

Read only and free of Airflow: the manifests are handed in, nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone

from airflow_provider_kafka_eos import runbook
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import Manifest, ManifestStatus

__all__ = ["AT_RISK_PAGE", "LOST_PAGE", "DeadlineVerdict", "PreparedCheckpoint", "judge_prepared"]

AT_RISK_PAGE = "commit-pending-transaction"  # commit it now, before the broker aborts it
LOST_PAGE = "data-loss"  # past its transaction deadline: the broker aborted it


@dataclass(frozen=True)
class PreparedCheckpoint:
    """One PREPARED checkpoint, timed by its transaction that the broker aborts first."""

    checkpoint_id: int
    uri: str | None
    prepared_by_run: str | None  # None: written outside Airflow
    this_run: bool
    transactions: int
    open_ms: int  # now - that transaction's start (coordinator clock, as the manifest recorded it)
    timeout_ms: int
    left_ms: int  # its deadline - now; <= 0: the broker has aborted it (or does within 10 s)

    def describe(self, now_ms: int) -> str:
        """One line an operator acts on: which checkpoint, whose, how far gone, and what to run."""
        whose = ("this run" if self.this_run else
                 f"run {self.prepared_by_run!r}" if self.prepared_by_run else "written outside Airflow")
        which = f"checkpoint {self.checkpoint_id} ({whose}, {self.transactions} transaction(s))"
        at = _iso(now_ms + self.left_ms)
        where = self.uri or "(manifest uri unknown)"
        if self.left_ms <= 0:
            return (f"{which} is still PREPARED but past its transaction deadline {at}: the broker has "
                    f"aborted it and its batch is lost unless written again. Manifest: {where}. "
                    f"Next step: {runbook.reference(LOST_PAGE)}")
        used = (f"open {_seconds(self.open_ms)} of its {_seconds(self.timeout_ms)} transaction timeout "
                f"({100 * self.open_ms / self.timeout_ms:.0f} %)")
        return (f"{which} is PREPARED and not committed, {used}: the broker aborts it at {at} "
                f"(in {_seconds(self.left_ms)}) and its batch is lost. Manifest: {where}. Next step: commit "
                f"it now (clear the run's commit task, or kafka-eos-txn commit --manifest {where}); "
                f"{runbook.reference(AT_RISK_PAGE)}")


@dataclass(frozen=True)
class DeadlineVerdict:
    """What the deadline found for ``pipeline_id`` at ``now_ms``: at risk when anything is PREPARED."""

    pipeline_id: str
    run_id: str | None
    now_ms: int
    prepared: tuple[PreparedCheckpoint, ...]
    given_up: tuple[int, ...] = ()  # PREPARED manifests a give-up decided to abort (being aborted)

    @property
    def at_risk(self) -> bool:
        return bool(self.prepared)

    @property
    def pages(self) -> tuple[str, ...]:
        """The runbook pages the verdict names (none when nothing is at risk)."""
        return tuple(dict.fromkeys(AT_RISK_PAGE if c.left_ms > 0 else LOST_PAGE for c in self.prepared))

    def message(self, deadline_text: str) -> str:
        """The alert's text; ``deadline_text`` says which deadline passed (the caller knows its setting)."""
        run = f"run {self.run_id!r}" if self.run_id else "a run"
        head = f"pipeline {self.pipeline_id!r}: {run} passed its deadline ({deadline_text})"
        if not self.prepared:
            aborting = (f"; checkpoint(s) {', '.join(map(str, self.given_up))} are being given up "
                        "(aborted)" if self.given_up else "")
            return (f"{head}, but no checkpoint of the pipeline is PREPARED: nothing is at risk yet, the run "
                    f"is slow (its job may still be writing; transactions it left open without a manifest "
                    f"are what eos_cleanup's lingering-transaction sensor reports){aborting}")
        lines = [f"{head} and {len(self.prepared)} checkpoint(s) of the pipeline are PREPARED, not "
                 "committed:"]
        lines += [f"  - {c.describe(self.now_ms)}" for c in self.prepared]
        return "\n".join(lines)


def judge_prepared(manifests: Iterable[Manifest], *, pipeline_id: str, run_id: str | None,
                   now_ms: int) -> DeadlineVerdict:
    """The PREPARED checkpoints among ``manifests`` (one pipeline's), this run's first, then by time left.

    A PREPARED manifest a give-up already decided to abort is not at risk (its batch is being given
    up on purpose); one without transactions has nothing the broker could abort.
    """
    prepared: list[PreparedCheckpoint] = []
    given_up: list[int] = []
    for manifest in manifests:
        if manifest.status is not ManifestStatus.PREPARED:
            continue
        if manifest.given_up:
            given_up.append(manifest.checkpoint_id)
            continue
        if not manifest.committables:
            continue
        first = min(manifest.committables, key=lambda c: c.deadline_ms)
        owner = manifest.prepared_by.run_id if manifest.prepared_by is not None else None
        prepared.append(PreparedCheckpoint(
            checkpoint_id=manifest.checkpoint_id, uri=manifest.uri, prepared_by_run=owner,
            this_run=run_id is not None and owner == run_id, transactions=len(manifest.committables),
            open_ms=now_ms - first.transaction_start_ms, timeout_ms=first.transaction_timeout_ms,
            left_ms=first.deadline_ms - now_ms,
        ))
    prepared.sort(key=lambda c: (not c.this_run, c.left_ms, c.checkpoint_id))
    return DeadlineVerdict(pipeline_id, run_id, now_ms, tuple(prepared), tuple(sorted(given_up)))


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.0f} s"


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
