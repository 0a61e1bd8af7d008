"""The same input is never written twice: one claim per input identity, taken before anything is written.

A checkpoint id names *a run's* batch (see ``identity.py``); it cannot tell that two
runs read the same data: a second trigger from the UI form, the CLI or the REST API gets a new
id and, without this module, would write the same input again. So a run that names its input
(``input_id``: a batch name, a file set's digest, a date partition) first takes the input's
*claim*, one small object per input in the manifest store::

    <base>/<pipeline_id>/_inputs/<sha256(input_id)>.json
    {"schema_version": 1, "input_id": ..., "pipeline_id": ..., "checkpoint_id": ...,
     "claimed_by": {run}, "claimed_at_ms": ..., "reprocess_of": ...}

The claim names the one checkpoint that carries the input; :func:`claim_input` is the one rule
for what a run finds there (looked up by name, never by scanning every manifest):

- no claim: create it (create-if-absent, so of two runs starting at the same moment exactly one
  wins; the other re-reads and finds the winner's claim) and write;
- a claim of this same DAG run (a retry, a clear): write, into the claimed checkpoint;
- the claimed checkpoint is COMMITTED or PREPARED: **duplicate**, nothing is written; only an
  explicit ``reprocess`` writes it again (a new checkpoint, the claim moved to it and
  ``reprocess_of`` recorded), and never while the old one is still PREPARED (its owed commit
  would deliver the input a second time);
- the claimed checkpoint is ABORTED (given up): write it afresh, the claim moved to the new
  checkpoint;
- no manifest yet: the claiming run is still writing, or died before preparing anything. While
  it runs (or while that cannot be known) wait, bounded; once it provably no longer runs, take
  the claim over *with the same checkpoint id*, so a straggling attempt of the dead run is
  fenced by the new one (same transactional ids) exactly as a task retry would be.

Every claim transition is a compare-and-set (create-if-absent; replace only if unchanged since
read: ``store_objects.py`` says how each store does it). A store that cannot be read fails the
run (retry later): never "assume new input". No Airflow imports: whether a run still runs is
a callable handed in.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.identity import RunIdentity
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    Manifest,
    ManifestStatus,
    store_exists,
)
from airflow_provider_kafka_eos.kafka.checkpoints.store import ManifestStore
from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import (
    create_object,
    read_object,
    read_versioned,
    replace_if,
)
from airflow_provider_kafka_eos.kafka.errors import (
    InputBusyError,
    ManifestError,
    ManifestStoreError,
    UsageError,
)
from airflow_provider_kafka_eos.kafka.validation import validate_input_id

__all__ = [
    "CLAIMS_FOLDER",
    "ClaimOutcome",
    "InputClaim",
    "InputVerdict",
    "claim_input",
    "claim_uri",
    "claimed_manifest_uri",
    "read_claim",
]

log = logging.getLogger(__name__)

CLAIMS_FOLDER = "_inputs"
CLAIM_SCHEMA_VERSION = 1
RUNBOOK = "duplicate-input"
_FIELDS = {"schema_version", "input_id", "pipeline_id", "checkpoint_id", "claimed_by", "claimed_at_ms",
           "reprocess_of"}


class InputVerdict(str, Enum):
    WRITE = "write"  # this run writes the input, into ClaimOutcome.checkpoint_id
    DUPLICATE = "duplicate_input"  # already written (or prepared) by another run: write nothing


@dataclass(frozen=True)
class InputClaim:
    """Which checkpoint carries an input, and which run claimed it."""

    input_id: str
    pipeline_id: str
    checkpoint_id: int
    claimed_by: RunIdentity | None
    claimed_at_ms: int
    reprocess_of: int | None = None

    def to_json(self) -> bytes:
        return (json.dumps({
            "schema_version": CLAIM_SCHEMA_VERSION,
            "input_id": self.input_id,
            "pipeline_id": self.pipeline_id,
            "checkpoint_id": self.checkpoint_id,
            "claimed_by": self.claimed_by.to_dict() if self.claimed_by is not None else None,
            "claimed_at_ms": self.claimed_at_ms,
            "reprocess_of": self.reprocess_of,
        }, indent=2, sort_keys=True) + "\n").encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes, *, source: str) -> InputClaim:
        """Strict parse: any defect is a ManifestError naming the claim (never "no claim")."""
        try:
            value = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise ManifestError(f"{source}: input claim is not valid JSON", runbook=RUNBOOK) from None
        if not isinstance(value, dict) or value.get("schema_version") != CLAIM_SCHEMA_VERSION:
            raise ManifestError(f"{source}: not an input claim of schema version {CLAIM_SCHEMA_VERSION}",
                                runbook=RUNBOOK)
        unknown = sorted(set(value) - _FIELDS)
        missing = sorted(_FIELDS - set(value))
        if unknown or missing:
            raise ManifestError(f"{source}: input claim has unknown field(s) {unknown} or lacks {missing}",
                                runbook=RUNBOOK)
        checkpoint, at = value["checkpoint_id"], value["claimed_at_ms"]
        reprocess_of = value["reprocess_of"]
        ints_ok = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (checkpoint, at))
        if not ints_ok or not (reprocess_of is None or (isinstance(reprocess_of, int)
                                                        and not isinstance(reprocess_of, bool))):
            raise ManifestError(f"{source}: input claim's checkpoint_id, claimed_at_ms and reprocess_of "
                                "must be integers", runbook=RUNBOOK)
        if not isinstance(value["pipeline_id"], str) or not isinstance(value["input_id"], str):
            raise ManifestError(f"{source}: input claim's pipeline_id and input_id must be strings",
                                runbook=RUNBOOK)
        owner = value["claimed_by"]
        return cls(
            input_id=value["input_id"],
            pipeline_id=value["pipeline_id"],
            checkpoint_id=checkpoint,
            claimed_by=RunIdentity.from_dict(owner, source=source, field="claimed_by") if owner else None,
            claimed_at_ms=at,
            reprocess_of=reprocess_of,
        )


@dataclass(frozen=True)
class ClaimOutcome:
    """What the run must do: write into ``checkpoint_id``, or nothing (a duplicate), and the words."""

    verdict: InputVerdict
    input_id: str
    checkpoint_id: int
    message: str
    claim_uri: str
    manifest_uri: str
    written_by: RunIdentity | None = None  # DUPLICATE: the run whose checkpoint holds the input
    reprocess_of: int | None = None  # WRITE with reprocess: the checkpoint written before

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "input_id": self.input_id,
            "checkpoint_id": self.checkpoint_id,
            "message": self.message,
            "claim_uri": self.claim_uri,
            "manifest_uri": self.manifest_uri,
            "written_by": self.written_by.to_dict() if self.written_by is not None else None,
            "reprocess_of": self.reprocess_of,
        }


def claim_uri(store: ManifestStore, pipeline_id: str, input_id: str) -> str:
    """The claim's object: named by a digest, so any input identity makes a safe object name."""
    digest = hashlib.sha256(input_id.encode("utf-8")).hexdigest()
    return f"{store.base_uri}/{pipeline_id}/{CLAIMS_FOLDER}/{digest}.json"


def read_claim(store: ManifestStore, pipeline_id: str, input_id: str) -> InputClaim | None:
    """The input's claim, None when there is none; ManifestStoreError when the store cannot say."""
    found = _read_versioned_claim(store, pipeline_id, input_id)
    return found[0] if found is not None else None


def claimed_manifest_uri(store: ManifestStore, pipeline_id: str, input_id: str) -> str:
    """The manifest of the checkpoint that carries ``input_id``: how a commit task finds what a job
    started by another operator prepared, with no word from that job (docs/user-guide/own-runner.md).

    ManifestError naming the claim when no job claimed the input, or when the claimed checkpoint
    has no manifest yet (the job is still running, or died before preparing it): nothing to commit.
    """
    input_id = validate_input_id(input_id)
    claim = read_claim(store, pipeline_id, input_id)
    uri = claim_uri(store, pipeline_id, input_id)
    if claim is None:
        raise ManifestError(
            f"pipeline {pipeline_id!r}: no checkpoint holds input {input_id!r} (no claim {uri}): the job did "
            "not run, wrote to another store or pipeline id, or did not name this input. Nothing to commit: "
            "run the job (write_input_exactly_once with this pipeline id and input id), then this task",
            runbook="commit-task-failed")
    manifest_uri = _manifest_uri(store, claim)
    if _manifest_of(store, claim) is None:
        raise ManifestError(
            f"pipeline {pipeline_id!r}: input {input_id!r} is claimed by {_who(claim)} for checkpoint "
            f"{claim.checkpoint_id}, but {manifest_uri} does not exist: the job has not prepared it (still "
            "running, or it failed before its manifest). Nothing to commit: let the job finish (or rerun "
            "it), then retry this task", runbook="commit-task-failed")
    return manifest_uri


def _read_versioned_claim(
    store: ManifestStore, pipeline_id: str, input_id: str
) -> tuple[InputClaim, str] | None:
    """The claim and its version in the store (what a compare-and-set of it is conditioned on)."""
    uri = claim_uri(store, pipeline_id, input_id)
    try:
        found = read_versioned(uri, access=store.access)
    except (OSError, ManifestError) as exc:
        raise _unreadable(store, uri, exc) from None
    if found is None:
        return None
    data, version = found
    claim = InputClaim.from_json(data, source=uri)
    if claim.input_id != input_id or claim.pipeline_id != pipeline_id:
        raise ManifestError(
            f"{uri}: the claim names input {claim.input_id!r} of pipeline {claim.pipeline_id!r}, not "
            f"{input_id!r} of {pipeline_id!r}; it was changed by hand", runbook=RUNBOOK)
    return claim, version


def claim_input(
    store: ManifestStore,
    *,
    pipeline_id: str,
    input_id: str,
    checkpoint_id: int,
    run: RunIdentity | None,
    reprocess: bool = False,
    run_is_active: Callable[[RunIdentity], bool | None] = lambda _run: None,
    timeout_s: float = 300.0,
    poll_s: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> ClaimOutcome:
    """Decide, before anything is written, whether this run writes ``input_id`` (see the module doc).

    ``checkpoint_id`` is the checkpoint this run would prepare for a new input. ``run_is_active``
    answers whether a claiming run still runs (True / False, or None when it cannot be known,
    which counts as running). A claim held by a running run whose checkpoint has no manifest yet
    is waited for, polling every ``poll_s`` up to ``timeout_s``; then :class:`InputBusyError`
    (nothing written; a retry finds the outcome).
    """
    ask = _Ask(store, pipeline_id, validate_input_id(input_id), checkpoint_id, run, reprocess)
    deadline = clock() + timeout_s
    while True:
        found = _read_versioned_claim(store, pipeline_id, ask.input_id)
        if found is None:
            outcome = ask.claim_new()
        else:
            claim, version = found
            outcome = ask.decide(claim, version, run_is_active)
            if outcome is _WAIT:
                if clock() >= deadline:
                    raise ask.busy(claim, timeout_s)
                log.info("input %r is being written by %s (checkpoint %d): waiting for its manifest",
                         ask.input_id, _who(claim), claim.checkpoint_id)
                sleep(max(0.0, min(poll_s, deadline - clock())))
                continue
        if outcome is not None:
            return outcome
        # None: another run changed the claim between our read and our write; read it again


_WAIT = object()  # the claim's run may still be preparing: wait and read again


@dataclass(frozen=True)
class _Ask:
    """One run asking to write one input: the steps of :func:`claim_input`, each one case of the rule.

    Each step returns the outcome, None when another run moved the claim meanwhile (read again),
    or ``_WAIT``.
    """

    store: ManifestStore
    pipeline_id: str
    input_id: str
    checkpoint_id: int
    run: RunIdentity | None
    reprocess: bool

    @property
    def uri(self) -> str:
        return claim_uri(self.store, self.pipeline_id, self.input_id)

    def claim_new(self) -> ClaimOutcome | None:
        _note_first_claim(self.store, self.pipeline_id)
        mine = InputClaim(self.input_id, self.pipeline_id, self.checkpoint_id, self.run, _now_ms())
        if not _create(self.store, self.uri, mine):
            return None  # another run created it first: read its claim
        if self.reprocess:
            log.warning("reprocess asked for input %r, but no checkpoint holds it yet: writing it once",
                        self.input_id)
        return _write(mine, self.store, self.uri,
                      f"input {self.input_id!r} is new: checkpoint {self.checkpoint_id} writes it")

    def decide(self, claim: InputClaim, version: str, run_is_active: Callable[[RunIdentity], bool | None]
               ) -> ClaimOutcome | object | None:
        if self.run is not None and self.run.same_run(claim.claimed_by):
            return _write(claim, self.store, self.uri, f"input {self.input_id!r} was claimed by this run "
                                                       f"(an earlier try): checkpoint {claim.checkpoint_id} "
                                                       "carries it")
        manifest = _manifest_of(self.store, claim)
        status = manifest.status if manifest is not None else None
        if status in (ManifestStatus.COMMITTED, ManifestStatus.PREPARED) and not self.reprocess:
            return _duplicate(self.store, self.uri, claim, manifest)
        if status is ManifestStatus.PREPARED:  # reprocess, but the earlier write is still owed a commit
            raise UsageError(
                f"reprocess of input {self.input_id!r} refused: checkpoint {claim.checkpoint_id} "
                f"({_manifest_uri(self.store, claim)}) is PREPARED, so its commit would deliver the input "
                "too. Let its commit task (or the cleanup DAG) commit it, or give it up with kafka-eos-txn "
                "abort --manifest URI, then reprocess. Nothing was written", runbook=RUNBOOK)
        if status is not None:  # COMMITTED with reprocess, or ABORTED: a fresh checkpoint writes it
            return self.write_afresh(claim, version, status)
        # A claim without a manifest: its run is still writing, or died before preparing anything.
        owner = claim.claimed_by
        if (run_is_active(owner) if owner is not None else None) is False:
            return self.take_over(claim, version)
        return _WAIT

    def write_afresh(self, claim: InputClaim, version: str, status: ManifestStatus) -> ClaimOutcome | None:
        committed = status is ManifestStatus.COMMITTED
        replacement = InputClaim(self.input_id, self.pipeline_id, self.checkpoint_id, self.run, _now_ms(),
                                 reprocess_of=claim.checkpoint_id if committed else claim.reprocess_of)
        if not _replace(self.store, self.uri, version, replacement):
            return None
        if committed:
            log.warning("REPROCESS: input %r was written by checkpoint %d (%s); writing it again as "
                        "checkpoint %d on request (reprocess=True); the manifest records it",
                        self.input_id, claim.checkpoint_id, _who(claim), self.checkpoint_id)
            why = f"reprocess of checkpoint {claim.checkpoint_id}"
        else:
            why = f"checkpoint {claim.checkpoint_id}, which held it, was given up (ABORTED)"
        return _write(replacement, self.store, self.uri,
                      f"input {self.input_id!r}: {why}; checkpoint {self.checkpoint_id} writes it")

    def take_over(self, claim: InputClaim, version: str) -> ClaimOutcome | None:
        """The claiming run no longer runs and prepared nothing: its checkpoint id, so a straggling
        attempt of it is fenced by this run's producers."""
        takeover = InputClaim(self.input_id, self.pipeline_id, claim.checkpoint_id, self.run, _now_ms(),
                              reprocess_of=claim.reprocess_of)
        if not _replace(self.store, self.uri, version, takeover):
            return None
        log.warning("input %r was claimed by %s, which is no longer running and prepared nothing: taking "
                    "its checkpoint %d over (any attempt of it still writing is fenced)",
                    self.input_id, _who(claim), claim.checkpoint_id)
        return _write(takeover, self.store, self.uri,
                      f"input {self.input_id!r}: took checkpoint {claim.checkpoint_id} over from "
                      f"{_who(claim)}, which prepared nothing")

    def busy(self, claim: InputClaim, timeout_s: float) -> InputBusyError:
        """Waited long enough; Airflow said the claiming run is queued or running (or could not say)."""
        return InputBusyError(
            f"input {self.input_id!r} is claimed by {_who(claim)} for checkpoint {claim.checkpoint_id} "
            f"({self.uri}), which has not prepared it yet and is not known to have stopped (Airflow says "
            f"it is queued or running, or could not be asked); waited {timeout_s:.0f} s. Nothing "
            "was written: this task fails so that its retry finds the outcome (a duplicate once that run "
            "prepares it, or a takeover once it has stopped)")


# -- steps ---------------------------------------------------------------------------------------


def _write(claim: InputClaim, store: ManifestStore, uri: str, message: str) -> ClaimOutcome:
    return ClaimOutcome(InputVerdict.WRITE, claim.input_id, claim.checkpoint_id, message, uri,
                        _manifest_uri(store, claim), reprocess_of=claim.reprocess_of)


def _duplicate(store: ManifestStore, uri: str, claim: InputClaim, manifest: Manifest) -> ClaimOutcome:
    owner = manifest.prepared_by or claim.claimed_by
    when = _iso(manifest.updated_at_ms)
    state = (f"committed at {when}" if manifest.status is ManifestStatus.COMMITTED
             else f"prepared at {when}; its commit task commits it")
    message = (f"input {claim.input_id!r} was already written by {_who(claim, owner)} (checkpoint "
               f"{claim.checkpoint_id}, {state}); nothing written. To write it again on purpose, run with "
               "reprocess=True")
    return ClaimOutcome(InputVerdict.DUPLICATE, claim.input_id, claim.checkpoint_id, message, uri,
                        _manifest_uri(store, claim), written_by=owner)


def _manifest_of(store: ManifestStore, claim: InputClaim) -> Manifest | None:
    """The claimed checkpoint's manifest; None when it does not exist (yet)."""
    uri = _manifest_uri(store, claim)
    try:
        data = read_object(uri, access=store.access)
    except (OSError, ManifestError) as exc:
        raise _unreadable(store, uri, exc) from None
    if data is None:
        return None
    manifest = Manifest.from_json(data, source=uri)  # parsed from the one read, not fetched twice
    manifest.uri = uri
    return manifest


def _create(store: ManifestStore, uri: str, claim: InputClaim) -> bool:
    try:
        return create_object(uri, claim.to_json(), access=store.access)
    except (OSError, ManifestError) as exc:
        raise _unreadable(store, uri, exc) from None


def _replace(store: ManifestStore, uri: str, version: str, new: InputClaim) -> bool:
    """Compare-and-set: write ``new`` only if the claim is still the one read (``version``)."""
    try:
        return replace_if(uri, new.to_json(), version, access=store.access)
    except OSError as exc:
        raise _unreadable(store, uri, exc) from None


def _note_first_claim(store: ManifestStore, pipeline_id: str) -> bool:
    """Say once per pipeline that checkpoints from before input identities are not checked."""
    folder = f"{store.base_uri}/{pipeline_id}/{CLAIMS_FOLDER}"
    try:
        if not store_exists(folder, access=store.access):
            log.info("pipeline %s: first input claim (%s); checkpoints written without an input identity "
                     "are treated as unknown input and not checked for duplicates", pipeline_id, folder)
    except (OSError, ManifestError):
        pass  # the claim's own write reports an unreachable store
    return True


def _manifest_uri(store: ManifestStore, claim: InputClaim) -> str:
    return store.uri(claim.pipeline_id, claim.checkpoint_id)


def _who(claim: InputClaim, owner: RunIdentity | None = None) -> str:
    run = owner or claim.claimed_by
    return run.describe() if run is not None else "a writer that recorded no run"


def _unreadable(store: ManifestStore, uri: str, exc: Exception) -> ManifestStoreError:
    return ManifestStoreError(
        f"manifest store {store.base_uri} ({store.source}): input claim {uri} cannot be read or "
        f"written ({exc}). Nothing was written: without the claim this run cannot know whether its input "
        "was already written. Retry once the store is reachable")  # the store's runbook page


def _now_ms() -> int:
    return int(time.time() * 1000)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
