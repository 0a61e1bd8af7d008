"""Checkpoint manifests: the durable vote of the two-phase commit.

Once a PREPARED manifest exists, the batch it lists must commit; so a manifest is written
only whole (local: temp file in the same directory + fsync + ``os.replace``; any other fsspec
URL: one ``pipe`` of the whole object, which object stores apply atomically) and read back
strictly: anything malformed is a :class:`ManifestError` naming the uri and the field, never
a half-understood manifest. The JSON schema and its versioning rules are in
``docs/manifest-format.md``. Manifests hold no secrets (ids, offsets and counts only).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.identity import InputRecord, RunIdentity
from airflow_provider_kafka_eos.kafka.checkpoints.record_schemas import parse_record_formats
from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import (
    STANDARD_CHAIN,
    StoreAccess,
    create_object,
    is_local_uri,
    local_path,
    read_object,
    replace_object,
)
from airflow_provider_kafka_eos.kafka.errors import ManifestError, ManifestStoreError, UsageError
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, reject_unknown, require_field
from airflow_provider_kafka_eos.kafka.validation import (
    validate_prefix,
    validate_topic,
    validate_transactional_id,
)

__all__ = [
    "SUPPORTED_SCHEMA_VERSIONS",
    "Decision",
    "Manifest",
    "ManifestStatus",
    "checkpoint_listing",
    "create_object",
    "find_manifests",
    "is_local_uri",
    "list_pipelines",
    "local_path",
    "manifest_uri",
    "read_manifest",
    "read_manifests",
    "read_object",
    "replace_object",
    "store_exists",
    "store_unreachable",
    "write_manifest",
]

# Version 4 is the first schema a release (0.1.0) writes and the only one this release reads;
# 1-3 existed only in development builds and are refused by name (docs/manifest-format.md).
# Its optional ``record_formats`` (the schema ids a checkpoint's encoded keys/values carry,
# ``record_schemas.py``) is written only when there are some.
SCHEMA_VERSION = 4
SUPPORTED_SCHEMA_VERSIONS = frozenset({SCHEMA_VERSION})
NAMING_STRATEGIES = ("INCREMENTING", "POOLING")
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"  # where a Kafka input's offsets transaction writes
# 1M committables of ~300 bytes; anything larger is not a manifest this provider wrote.
MAX_MANIFEST_BYTES = 512 * 1024 * 1024
_CHECKPOINT_FILE = re.compile(r"^checkpoint-(\d{12,})\.json$")


class ManifestStatus(str, Enum):
    PREPARED = "PREPARED"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"


_FIELDS: dict[str, Any] = {
    "schema_version": int,
    "pipeline_id": str,
    "checkpoint_id": int,
    "transactional_id_prefix": str,
    "naming_strategy": str,
    "topic": str,
    "status": str,
    "committables": list,
    "created_at_ms": int,
    "updated_at_ms": int,
    "commit_report": (dict, type(None)),
    "prepared_by": (dict, type(None)),
    "input": (dict, type(None)),
    "decision": (dict, type(None)),
    "record_formats": (dict, type(None)),
}
_OPTIONAL = {"commit_report", "record_formats"}
DECISIONS = ("commit", "abort")


def _unread_version_step(version: object) -> str:
    """Why a manifest of another schema is refused, and what to do: nothing reads it half."""
    if type(version) is int and version > SCHEMA_VERSION:
        return (f"this release reads schema version {SCHEMA_VERSION} only (written by a newer release? "
                "upgrade the provider before touching this checkpoint)")
    return (f"this release reads schema version {SCHEMA_VERSION} only, and no release wrote another "
            "(versions 1-3 came from development builds before 0.1.0); nothing was changed: resolve its "
            "transactions by hand and move the manifest out of the store")


@dataclass(frozen=True)
class Decision:
    """What was decided for a PREPARED checkpoint before anyone acted on it in Kafka.

    A commit and a give-up of one checkpoint must never both act: each first writes its decision
    into the manifest as a compare-and-set, and only the one whose decision stands touches Kafka
    (``checkpoint.py``). Without it a commit racing a give-up could commit one partition's
    transaction while the give-up aborted another's: a torn checkpoint.
    """

    outcome: str  # "commit" | "abort"
    by: str
    at_ms: int

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "by": self.by, "at_ms": self.at_ms}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str) -> Decision:
        reject_unknown(data, {"outcome", "by", "at_ms"}, source, "decision")
        outcome = require_field(data, "outcome", str, source, "decision.outcome")
        if outcome not in DECISIONS:
            raise ManifestError(
                f"{source}: field 'decision.outcome' must be commit or abort, got {outcome!r}")
        return cls(outcome, require_field(data, "by", str, source, "decision.by"),
                   require_field(data, "at_ms", int, source, "decision.at_ms"))


@dataclass
class Manifest:
    """What one checkpoint of one pipeline prepared, and how far its commit got."""

    pipeline_id: str
    checkpoint_id: int
    transactional_id_prefix: str
    naming_strategy: str  # "INCREMENTING" | "POOLING"
    topic: str
    status: ManifestStatus
    committables: list[Committable]
    created_at_ms: int
    updated_at_ms: int
    schema_version: int = SCHEMA_VERSION  # as read; a manifest is always written in SCHEMA_VERSION
    commit_report: dict | None = None
    prepared_by: RunIdentity | None = None  # None: written outside Airflow
    input: InputRecord | None = None  # None: no input_id given
    decision: Decision | None = None  # None: neither a commit nor a give-up has started
    record_formats: dict[str, Any] | None = None  # topic -> key/value schema ids (None: bytes)
    # Where this manifest lives (set by read_manifest / write_manifest); not part of the JSON.
    uri: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.status = ManifestStatus(self.status)

    @property
    def given_up(self) -> bool:
        """A give-up decided to abort it (recorded before the aborts are sent): it commits no more."""
        return self.decision is not None and self.decision.outcome == "abort"

    @property
    def transactional_ids(self) -> set[str]:
        return {c.transactional_id for c in self.committables}

    @property
    def output_committables(self) -> list[Committable]:
        """The output's transactions: without a Kafka input's offsets transaction (it holds no records)."""
        return [c for c in self.committables
                if any(p.topic != CONSUMER_OFFSETS_TOPIC for p in c.partitions)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "pipeline_id": self.pipeline_id,
            "checkpoint_id": self.checkpoint_id,
            "transactional_id_prefix": self.transactional_id_prefix,
            "naming_strategy": self.naming_strategy,
            "topic": self.topic,
            "status": self.status.value,
            "committables": [c.to_dict() for c in self.committables],
            "created_at_ms": self.created_at_ms,
            "updated_at_ms": self.updated_at_ms,
            "commit_report": self.commit_report,
            "prepared_by": self.prepared_by.to_dict() if self.prepared_by is not None else None,
            "input": self.input.to_dict() if self.input is not None else None,
            "decision": self.decision.to_dict() if self.decision is not None else None,
            **({"record_formats": self.record_formats} if self.record_formats is not None else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "manifest") -> Manifest:
        """Strict parse; ``source`` (the uri) is named in every error."""
        if not isinstance(data, dict):
            raise ManifestError(f"{source}: a manifest must be a JSON object, got {type(data).__name__}")
        if "schema_version" not in data:
            raise ManifestError(f"{source}: required field 'schema_version' is missing")
        version = data["schema_version"]
        if type(version) is not int or version not in SUPPORTED_SCHEMA_VERSIONS:  # not True, not 4.0
            raise ManifestError(f"{source}: field 'schema_version' is {version!r}; "
                                f"{_unread_version_step(version)}")
        reject_unknown(data, set(_FIELDS), source, "")
        values: dict[str, Any] = {}
        for name, kind in _FIELDS.items():
            if name in _OPTIONAL and name not in data:
                continue
            values[name] = require_field(data, name, kind, source, name)
        if values.get("prepared_by") is not None:
            values["prepared_by"] = RunIdentity.from_dict(values["prepared_by"], source=source)
        if values.get("input") is not None:
            values["input"] = InputRecord.from_dict(values["input"], source=source)
        if values.get("decision") is not None:
            values["decision"] = Decision.from_dict(values["decision"], source=source)
        if values.get("record_formats") is not None:
            values["record_formats"] = parse_record_formats(values["record_formats"], source=source)
        for name in ("pipeline_id", "transactional_id_prefix", "topic"):
            if not values[name]:
                raise ManifestError(f"{source}: field {name!r} must not be empty")
        try:  # what Kafka can carry: one rule for every edge (kafka/validation.py)
            validate_prefix(values["transactional_id_prefix"], field="field 'transactional_id_prefix'")
            validate_topic(values["topic"], field="field 'topic'")
            validate_transactional_id(values["pipeline_id"], field="field 'pipeline_id'")
        except UsageError as exc:
            raise ManifestError(f"{source}: {exc.cause}") from None
        if values["checkpoint_id"] < 0:
            raise ManifestError(
                f"{source}: field 'checkpoint_id' must be >= 0, got {values['checkpoint_id']}"
            )
        if values["naming_strategy"] not in NAMING_STRATEGIES:
            raise ManifestError(
                f"{source}: field 'naming_strategy' must be one of {', '.join(NAMING_STRATEGIES)}, "
                f"got {values['naming_strategy']!r}"
            )
        try:
            values["status"] = ManifestStatus(values["status"])
        except ValueError:
            raise ManifestError(
                f"{source}: field 'status' must be one of {', '.join(s.value for s in ManifestStatus)}, "
                f"got {values['status']!r}"
            ) from None
        values["committables"] = [
            Committable.from_dict(c, source=f"{source} committables[{i}]")
            for i, c in enumerate(values["committables"])
        ]
        seen: set[str] = set()
        for c in values["committables"]:
            if c.transactional_id in seen:
                raise ManifestError(f"{source}: transactional id {c.transactional_id!r} is listed twice")
            seen.add(c.transactional_id)
        return cls(**values)

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "manifest") -> Manifest:
        """Parse manifest text; any defect, whatever the bytes, is a ManifestError (nothing else).

        Hardened against hostile input: JSON nested too deep for the parser (100k ``[`` used to
        escape as "unexpected RecursionError"), numbers too long for Python's int conversion,
        invalid UTF-8 and a size beyond :data:`MAX_MANIFEST_BYTES` are ManifestErrors.
        """
        if isinstance(text, (bytes, bytearray)):
            try:
                text = bytes(text).decode("utf-8")
            except UnicodeDecodeError:
                raise ManifestError(f"{source}: manifest is not UTF-8 text") from None
        if len(text) > MAX_MANIFEST_BYTES:
            raise ManifestError(
                f"{source}: manifest is {len(text)} characters, more than the {MAX_MANIFEST_BYTES} allowed"
            )
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ManifestError(
                f"{source}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            ) from None
        except RecursionError:
            raise ManifestError(
                f"{source}: JSON nested too deeply to be a manifest (a manifest needs a handful of levels)"
            ) from None
        except ValueError as exc:  # e.g. an integer beyond sys.get_int_max_str_digits()
            raise ManifestError(f"{source}: not a readable manifest ({exc})") from None
        return cls.from_dict(data, source=source)


def manifest_uri(base_uri: str, pipeline_id: str, checkpoint_id: int) -> str:
    """``<base>/<pipeline_id>/checkpoint-<id:012d>.json`` (zero-padded so names sort by checkpoint)."""
    if not pipeline_id or "/" in pipeline_id:
        raise ManifestError(f"pipeline id {pipeline_id!r} must be non-empty and contain no '/'")
    return f"{base_uri.rstrip('/')}/{pipeline_id}/checkpoint-{checkpoint_id:012d}.json"


def read_manifest(uri: str, *, access: StoreAccess = STANDARD_CHAIN) -> Manifest:
    """Read and validate one manifest; ManifestError naming the uri on any defect (missing included).

    A store that does not answer (an unreachable endpoint, refused credentials, a local folder
    that cannot be read) is a :class:`ManifestStoreError` naming the uri and the store's runbook
    page, whatever the store client raised: the manifest itself may be fine.
    """
    try:
        data = read_object(uri, access=access)
    except ValueError:  # a NUL or an unencodable character in the path
        raise ManifestError(f"{uri!r}: not a usable manifest path") from None
    except OSError as exc:
        raise store_unreachable(uri, exc, "read") from None
    if data is None:
        raise ManifestError(f"{uri}: manifest does not exist")
    return _parse_manifest(uri, data)


def store_unreachable(uri: str, exc: BaseException, verb: str, consequence: str = "") -> ManifestStoreError:
    """The one wording of "the manifest store did not answer" for an object of it (``uri``)."""
    cause = (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) or type(exc).__name__
    return ManifestStoreError(
        f"{uri}: the manifest store cannot be {verb} ({cause}){consequence}. Check that the store's "
        "endpoint answers and that this process has its credentials (the kafka_eos connection's "
        "manifest_store_conn_id, or the store client's standard chain)")


def _parse_manifest(uri: str, data: bytes) -> Manifest:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ManifestError(f"{uri}: manifest is not UTF-8 text") from None
    manifest = Manifest.from_json(text, source=uri)
    manifest.uri = uri
    return manifest


def manifest_bytes(manifest: Manifest, uri: str) -> bytes:
    """The manifest as stored, validated by a round trip: an invalid manifest never reaches storage."""
    text = manifest.to_json()
    Manifest.from_json(text, source=uri)  # refuse to persist what we could not read back
    return text.encode("utf-8")


def write_manifest(uri: str, manifest: Manifest, *, access: StoreAccess = STANDARD_CHAIN) -> None:
    """Write atomically and unconditionally: readers see the previous manifest or this one, never a part.

    Only the job's vote is written this way (its checkpoint is its own: the input claim and
    fencing see to that); every later transition is a compare-and-set (``checkpoint.py``).
    """
    data = manifest_bytes(manifest, uri)
    try:
        replace_object(uri, data, access=access)
    except OSError as exc:
        raise store_unreachable(uri, exc, "written", "; the manifest was not written") from None
    manifest.uri = uri


def find_manifests(
    base_uri: str,
    pipeline_id: str | None = None,
    status: ManifestStatus | str | None = None,
    *,
    access: StoreAccess = STANDARD_CHAIN,
) -> list[tuple[str, Manifest]]:
    """All manifests under ``base_uri`` (one pipeline, or all), sorted by pipeline then checkpoint.

    A malformed manifest raises (naming its uri) rather than being skipped: skipping a
    PREPARED one would let cleanup abort transactions that must be committed.
    """
    wanted = ManifestStatus(status) if status is not None else None
    base = base_uri.rstrip("/")
    pipelines = [pipeline_id] if pipeline_id else _list_dirs(base, access)
    found: list[tuple[str, Manifest]] = []
    for pipeline in sorted(pipelines):
        uris = [uri for _, uri in checkpoint_listing(base, pipeline, access=access)]
        for uri, manifest in zip(uris, _read_manifests(uris, access), strict=True):
            if wanted is None or manifest.status is wanted:
                found.append((uri, manifest))
    return found


def checkpoint_listing(base_uri: str, pipeline_id: str, *,
                       access: StoreAccess = STANDARD_CHAIN) -> list[tuple[int, str]]:
    """A pipeline's ``(checkpoint id, manifest uri)`` from the store's listing alone (no manifest is
    read), ascending by id.

    Numeric order: ids of different lengths (12-digit padded seconds, 16-digit microseconds,
    explicit ones) must not sort as text. Readers that want only the newest few (the console's
    pages) list here and read just those.
    """
    folder = f"{base_uri.rstrip('/')}/{pipeline_id}"
    found = [(int(m.group(1)), f"{folder}/{m.group(0)}")
             for m in map(_CHECKPOINT_FILE.match, list_files(folder, access)) if m]
    return sorted(found)


def read_manifests(uris: list[str], *, access: StoreAccess = STANDARD_CHAIN) -> list[Manifest]:
    """:func:`read_manifest` of each (strict, in order; concurrent GETs on an object store)."""
    return _read_manifests(uris, access)


def list_pipelines(base_uri: str, *, access: StoreAccess = STANDARD_CHAIN) -> list[str]:
    """The folders under the store's base (pipelines, and the provider's own ``_...`` folders)."""
    return sorted(_list_dirs(base_uri.rstrip("/"), access))


def _read_manifests(uris: list[str], access: StoreAccess) -> list[Manifest]:
    """:func:`read_manifest` of each, in order; on an object store the GETs go out concurrently
    (fsspec's bulk ``cat``): one at a time, 10,000 manifests took minutes (docs/benchmarks.md)."""
    if not uris or _is_local(uris[0]):
        return [read_manifest(uri, access=access) for uri in uris]
    fs, _ = access.filesystem(uris[0])
    paths = [access.filesystem(uri)[1] for uri in uris]
    bodies = fs.cat(paths, on_error="return")  # a list in: a dict out, failures as exception values
    manifests = []
    for uri, path in zip(uris, paths, strict=True):
        body = bodies.get(path, FileNotFoundError(path))
        if isinstance(body, FileNotFoundError):
            raise ManifestError(f"{uri}: manifest does not exist")
        if isinstance(body, BaseException):
            raise store_unreachable(uri, OSError(f"{type(body).__name__}: {body}"), "read")
        manifests.append(_parse_manifest(uri, body))
    return manifests


def store_exists(base_uri: str, *, access: StoreAccess = STANDARD_CHAIN) -> bool:
    """Whether a manifest store's base exists (a folder locally; a listable prefix elsewhere).

    Raises OSError / ManifestError when the store cannot be reached; callers name the store.
    """
    if _is_local(base_uri):
        root = _local_path(base_uri)
        if os.path.isdir(root):
            os.listdir(root)  # PermissionError for a store we cannot list
            return True
        return False
    fs, path = _fresh(base_uri, access)
    return bool(fs.exists(path))


# -- storage plumbing (kafka/checkpoints/store_objects.py owns how each store reads and writes) ------------

_is_local = is_local_uri
_local_path = local_path


def _fresh(uri: str, access: StoreAccess) -> tuple[Any, str]:
    """The filesystem with its cached listings of ``uri`` dropped: s3fs (and other fsspec stores)
    keep a listing for the life of the process by default, and a long-lived triggerer or worker
    listing from that cache would miss a PREPARED manifest another process wrote since, and
    abort what it protects."""
    fs, path = access.filesystem(uri)
    fs.invalidate_cache(path)
    return fs, path


def _list_dirs(base: str, access: StoreAccess) -> list[str]:
    if _is_local(base):
        root = _local_path(base)
        if not os.path.isdir(root):
            return []
        return [n for n in os.listdir(root) if os.path.isdir(os.path.join(root, n))]
    fs, path = _fresh(base, access)
    if not fs.exists(path):
        return []
    return [
        e["name"].rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(path, detail=True) if e["type"] == "directory"
    ]


def list_files(folder: str, access: StoreAccess) -> list[str]:
    if _is_local(folder):
        root = _local_path(folder)
        return os.listdir(root) if os.path.isdir(root) else []
    fs, path = _fresh(folder, access)
    if not fs.exists(path):
        return []
    return [
        e["name"].rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(path, detail=True) if e["type"] != "directory"
    ]
