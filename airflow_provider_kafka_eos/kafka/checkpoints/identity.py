"""Which run a checkpoint belongs to, and what a run that finds someone's checkpoint must do.

A checkpoint id is the name of one batch of a pipeline: the job that finds a usable manifest
for its checkpoint writes nothing. That is right for a *retry or a clear of the same run* (its
records are already prepared or committed) and wrong for a *different run* that happens to map
to the same id: its records would silently never be written. So every manifest records the
run that prepared it (:class:`RunIdentity`), and :func:`reuse_verdict` is the one rule that
decides, for a run and the existing manifest of its checkpoint:

- ``SAME_RUN``: the same DAG run (another try, or a clear): reuse it, as always;
- ``DUPLICATE``: another run of the *same input*: the user asked for dedupe by input with an
  explicit checkpoint id, or both runs have the same logical date (Airflow keeps logical dates
  unique per DAG, so a second run for one is a re-created run of the same data interval).
  Nothing is written, and the run says so ("duplicate of run X, nothing written");
- ``CONFLICT``: a different run with nothing proving it read the same input (two manual runs
  with the same ``run_after``, a manifest from another DAG or from outside Airflow): refused
  with a :class:`CheckpointConflictError`, because succeeding would lose this run's records.

A checkpoint also records the *input* it carries (:class:`InputRecord`, the user's input
identity: a batch name, a file set's digest, a date partition). Which checkpoint holds an
input is decided before anything is written, by the claim in ``kafka/checkpoints/input_claims.py``.

No Airflow imports: the Spark job writes the identity it is given into the manifest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import Any, Protocol

from airflow_provider_kafka_eos.kafka.checkpoints.kafka_input import KafkaInput
from airflow_provider_kafka_eos.kafka.errors import CheckpointConflictError, ManifestError, UsageError
from airflow_provider_kafka_eos.kafka.validation import validate_input_id

__all__ = [
    "CheckpointConflictError",
    "InputRecord",
    "RecordedCheckpoint",
    "Reuse",
    "ReuseVerdict",
    "RunIdentity",
    "checkpoint_id_from_datetime",
    "reuse_verdict",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def checkpoint_id_from_datetime(value: datetime) -> int:
    """Microseconds since the Unix epoch (full precision of a datetime; exact, no float rounding).

    Microseconds keep two runs triggered within the same second apart, stay increasing with
    time, and are always larger than the whole-second ids of releases before schema version 2
    (so a pipeline's checkpoint ids keep increasing across the upgrade). 1.8e15 fits a JSON
    number exactly (below 2**53).
    """
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)  # Airflow's naive datetimes are UTC
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


@dataclass(frozen=True)
class RunIdentity:
    """The Airflow run (and try) that prepared a checkpoint; ``logical_date`` is ISO-8601 or None."""

    dag_id: str
    run_id: str
    try_number: int | None = None
    logical_date: str | None = None

    def same_run(self, other: RunIdentity | None) -> bool:
        return other is not None and (self.dag_id, self.run_id) == (other.dag_id, other.run_id)

    def describe(self) -> str:
        text = f"run {self.run_id!r} of DAG {self.dag_id!r}"
        return text + (f" (try {self.try_number})" if self.try_number is not None else "")

    def to_dict(self) -> dict[str, Any]:
        return {"dag_id": self.dag_id, "run_id": self.run_id, "try_number": self.try_number,
                "logical_date": self.logical_date}

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "manifest", field: str = "prepared_by") -> RunIdentity:
        if not isinstance(data, Mapping):
            raise ManifestError(
                f"{source}: field {field!r} must be an object or null, got {type(data).__name__}")
        known = {"dag_id", "run_id", "try_number", "logical_date"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ManifestError(f"{source}: unknown field {unknown[0]!r} in {field!r} "
                                f"(known: {', '.join(sorted(known))})")
        for name in ("dag_id", "run_id"):
            if not isinstance(data.get(name), str) or not data[name]:
                raise ManifestError(f"{source}: field {field}.{name} must be a non-empty string")
        try_number = data.get("try_number")
        if try_number is not None and (isinstance(try_number, bool) or not isinstance(try_number, int)
                                       or try_number < 0):
            raise ManifestError(f"{source}: field {field}.try_number must be an int >= 0 or null, "
                                f"got {try_number!r}")
        logical_date = data.get("logical_date")
        if logical_date is not None and not isinstance(logical_date, str):
            raise ManifestError(f"{source}: field {field}.logical_date must be a string or null")
        return cls(data["dag_id"], data["run_id"], try_number, logical_date)


@dataclass(frozen=True)
class InputRecord:
    """The input a checkpoint carries, as its manifest records it (schema version 3).

    ``reprocess_of``: the checkpoint that had already written this input when a run wrote it
    again on purpose (``reprocess=True``); None for a first write.
    """

    id: str
    reprocess_of: int | None = None
    # Schema 4: the Kafka offset ranges the checkpoint reads (None: the input is not Kafka).
    kafka: KafkaInput | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "reprocess_of": self.reprocess_of}
        if self.kafka is not None:
            data["kafka"] = self.kafka.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "manifest", field: str = "input") -> InputRecord:
        if not isinstance(data, Mapping):
            raise ManifestError(
                f"{source}: field {field!r} must be an object or null, got {type(data).__name__}")
        unknown = sorted(set(data) - {"id", "reprocess_of", "kafka"})
        if unknown:
            raise ManifestError(
                f"{source}: unknown field {unknown[0]!r} in {field!r} (known: id, kafka, reprocess_of)")
        try:
            ident = validate_input_id(data.get("id"), field=f"field {field}.id")
        except UsageError as exc:
            raise ManifestError(f"{source}: {exc.cause}") from None
        reprocess_of = data.get("reprocess_of")
        if reprocess_of is not None and (isinstance(reprocess_of, bool) or not isinstance(reprocess_of, int)
                                         or reprocess_of < 0):
            raise ManifestError(f"{source}: field {field}.reprocess_of must be a checkpoint id (int >= 0) or "
                                f"null, got {reprocess_of!r}")
        kafka = data.get("kafka")
        if kafka is not None:
            kafka = KafkaInput.from_dict(kafka, source=source, field=f"{field}.kafka")
        return cls(ident, reprocess_of, kafka)


class Reuse(str, Enum):
    SAME_RUN = "same_run"
    DUPLICATE = "duplicate"
    CONFLICT = "conflict"


@dataclass(frozen=True)
class ReuseVerdict:
    """What a run must do with the existing manifest of its checkpoint, and the words to say it."""

    reuse: Reuse
    message: str

    def raise_if_conflict(self) -> None:
        if self.reuse is Reuse.CONFLICT:
            raise CheckpointConflictError(self.message)


class RecordedCheckpoint(Protocol):
    """What the reuse rule reads of a checkpoint's manifest (a ``manifest.Manifest``): a Protocol,
    so the identity, which the manifest format records, does not import the format back."""

    @property
    def checkpoint_id(self) -> int: ...

    @property
    def prepared_by(self) -> RunIdentity | None: ...

    @property
    def status(self) -> Enum: ...


def reuse_verdict(
    existing: RecordedCheckpoint, uri: str, run: RunIdentity | None, *, explicit_checkpoint: bool
) -> ReuseVerdict:
    """The rule (see the module docstring): same run, duplicate of the same input, or conflict.

    ``run`` is the run now asking (None outside Airflow: the writer called directly, which
    keeps the old meaning of a checkpoint id, "this batch": a duplicate). ``explicit_checkpoint``
    says the user chose the checkpoint id (dedupe by input) instead of deriving it from the run.
    """
    checkpoint = existing.checkpoint_id
    owner = existing.prepared_by
    status = existing.status.value
    if run is not None and run.same_run(owner):
        return ReuseVerdict(Reuse.SAME_RUN, (
            f"checkpoint {checkpoint} is already {status} ({uri}), prepared by try "
            f"{'?' if owner.try_number is None else owner.try_number} of this run: nothing written again"))
    by = owner.describe() if owner is not None else "a writer that recorded no run (outside Airflow, or an " \
        "older release)"
    duplicate = ReuseVerdict(Reuse.DUPLICATE, (
        f"checkpoint {checkpoint} is a duplicate of {by}: it is already {status} ({uri}), nothing written"))
    if run is None or explicit_checkpoint:
        return duplicate
    if owner is not None and run.logical_date is not None and owner.dag_id == run.dag_id \
            and owner.logical_date == run.logical_date:
        return duplicate
    return ReuseVerdict(Reuse.CONFLICT, (
        f"{run.describe()} maps to checkpoint {checkpoint}, which {by} already prepared ({status}, {uri}); "
        "nothing says the two runs read the same input, so succeeding would silently drop this run's "
        "records. Nothing was written for this run. Trigger it again (a new run gets a new checkpoint id), "
        "or pass checkpoint_id explicitly if both runs really are the same batch"))
