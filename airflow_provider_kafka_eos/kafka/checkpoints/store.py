"""The manifest store of a deployment and the PREPARED index read from it.

Reading a store that is not configured, does not exist or cannot be read is a
:class:`ManifestStoreError` naming it, never "no manifests": a mistyped path must not make
PREPARED transactions look like orphans. :func:`prepared_index` maps a transactional id to the
PREPARED manifest that must commit it; the abort plan (``abort_plan.py``) and the sensor's
classification read it.

No Airflow imports: the Spark driver and the CLI use it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kafka_eos.kafka.checkpoints.manifest import (
    Manifest,
    ManifestStatus,
    checkpoint_listing,
    find_manifests,
    is_local_uri,
    list_pipelines,
    local_path,
    manifest_uri,
    read_manifests,
    store_exists,
)
from airflow_provider_kafka_eos.kafka.checkpoints.store_objects import (
    STANDARD_CHAIN,
    StoreAccess,
    create_object,
)
from airflow_provider_kafka_eos.kafka.errors import (
    ManifestError,
    ManifestStoreError,
)

__all__ = [
    "ENV_MANIFEST_BASE_URI",
    "STORE_MARKER",
    "CheckpointPage",
    "ManifestStore",
    "PreparedRef",
    "load_prepared",
    "prepared_index",
]

log = logging.getLogger(__name__)

ENV_MANIFEST_BASE_URI = "KAFKA_EOS_MANIFEST_BASE_URI"
STORE_MARKER = ".kafka-eos-store"


@dataclass(frozen=True)
class CheckpointPage:
    """A page of one pipeline's manifests, newest first, and where it sits: ``newer`` checkpoints
    come before it, ``older`` after it (a pager needs both to know which way it can go)."""

    total: int
    newer: int
    manifests: list[tuple[str, Manifest]]

    @property
    def older(self) -> int:
        return self.total - self.newer - len(self.manifests)


@dataclass(frozen=True)
class ManifestStore:
    """Where a deployment's checkpoint manifests live: ``<base>/<pipeline_id>/checkpoint-<id>.json``.

    ``source`` says where the base URI came from (shown in errors, so a user can fix the right
    setting). ``access`` is how this process reaches it (credentials, endpoint: built by the
    Airflow hook from the connection, by the Spark job from its private file); every read and
    write of the store and of its manifests goes through it.
    """

    base_uri: str
    source: str = "manifest_base_uri"
    access: StoreAccess = field(default=STANDARD_CHAIN, compare=False)

    @classmethod
    def configured(cls, base_uri: str | None, *, source: str = "manifest_base_uri",
                   access: StoreAccess = STANDARD_CHAIN) -> ManifestStore:
        """The store, or :class:`ManifestStoreError` when no base URI was given."""
        base = (base_uri or "").strip()
        if not base:
            raise ManifestStoreError(
                f"no manifest store is configured ({source} is empty): without it, transactions that a "
                "PREPARED manifest lists cannot be told apart from orphans, so nothing is aborted. Set "
                "manifest_base_uri in the kafka_eos connection extra (Airflow), or pass --manifest-base URI "
                f"(or ${ENV_MANIFEST_BASE_URI}) to kafka-eos-txn"
            )
        return cls(base.rstrip("/") or base, source, access)

    def uri(self, pipeline_id: str, checkpoint_id: int) -> str:
        return manifest_uri(self.base_uri, pipeline_id, checkpoint_id)

    def create(self) -> None:
        """Make the base exist (writers only: a reader never creates what it expected to find).

        On an object store a prefix exists only while an object is under it, so a writer's first
        run on a new prefix puts the marker ``<base>/.kafka-eos-store`` there (created only if
        absent); readers keep refusing a prefix nobody wrote to, which is what a typo looks like.
        """
        if is_local_uri(self.base_uri):
            try:
                os.makedirs(local_path(self.base_uri), exist_ok=True)
            except OSError as exc:  # a file in the way, no permission: named like every store failure
                raise self._unreadable(f"{type(exc).__name__}: {exc}") from None
            return
        try:
            if not store_exists(self.base_uri, access=self.access):
                create_object(f"{self.base_uri}/{STORE_MARKER}", b"kafka-eos manifest store\n",
                              access=self.access)
        except Exception as exc:  # a missing bucket, refused credentials, an unreachable endpoint
            raise self._unreadable(f"{type(exc).__name__}: {exc}") from None

    def check(self) -> None:
        """Raise :class:`ManifestStoreError` unless the store exists and can be listed."""
        try:
            exists = store_exists(self.base_uri, access=self.access)
        except Exception as exc:  # any failure to answer (a store client's own types too): refuse
            raise self._unreadable(f"{type(exc).__name__}: {exc}") from None
        if not exists:
            raise self._unreadable("it does not exist")

    def manifests(
        self, pipeline_id: str | None = None, status: ManifestStatus | None = None
    ) -> list[tuple[str, Manifest]]:
        """Every manifest (of one pipeline / one status); strict: a bad store or manifest raises."""
        self.check()
        try:
            return find_manifests(self.base_uri, pipeline_id, status, access=self.access)
        except ManifestError:
            raise
        except Exception as exc:  # OSError, or a store client's own type for an unreachable endpoint
            raise self._unreadable(f"{type(exc).__name__}: {exc}") from None

    def pipelines(self) -> list[str]:
        """The pipelines with a folder in the store (the provider's own ``_...`` folders left out)."""
        self.check()
        return [p for p in self._guarded(list_pipelines, self.base_uri, access=self.access)
                if not p.startswith(("_", "."))]

    def newest(self, pipeline_id: str, limit: int, before: int | None = None) -> CheckpointPage:
        """One page of a pipeline's manifests, newest first: at most ``limit`` with an id below
        ``before`` (from the newest, when None), and where the page sits among all of them.

        Only the page's manifests are read (the ids come from the listing), so a pipeline of
        10,000 checkpoints costs one listing and ``limit`` reads, not 10,000.
        """
        self.check()
        listing = self._guarded(checkpoint_listing, self.base_uri, pipeline_id, access=self.access)
        newest_first = [(cid, uri) for cid, uri in reversed(listing)]
        newer = sum(1 for cid, _ in newest_first if before is not None and cid >= before)
        page = [uri for _, uri in newest_first[newer:newer + limit]]
        manifests = self._guarded(read_manifests, page, access=self.access)
        return CheckpointPage(total=len(listing), newer=newer,
                              manifests=list(zip(page, manifests, strict=True)))

    def _guarded(self, read: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return read(*args, **kwargs)
        except ManifestError:
            raise
        except Exception as exc:  # OSError, or a store client's own type for an unreachable endpoint
            raise self._unreadable(f"{type(exc).__name__}: {exc}") from None

    def prepared(self) -> dict[str, PreparedRef]:
        """:func:`prepared_index` of this store (raises when the store cannot be read).

        Its reader is an abort deciding what it may touch, so its error says what the abort did.
        """
        try:
            return prepared_index(self.manifests(status=ManifestStatus.PREPARED))
        except ManifestStoreError as err:
            raise ManifestStoreError(
                f"{err.cause}. Nothing was aborted: without the store, transactions that a PREPARED "
                "manifest lists cannot be told apart from orphans; or pass --unprotected / "
                "protect=False if you accept losing prepared batches"
            ) from None

    def _unreadable(self, why: str) -> ManifestStoreError:
        """The store's own failure, for every reader (a listing, a write, an abort's protection)."""
        return ManifestStoreError(
            f"manifest store {self.base_uri} ({self.source}) cannot be read: {why}. Fix the store "
            "location (the kafka_eos connection's manifest_base_uri, or --manifest-base) or its credentials"
        )


@dataclass(frozen=True)
class PreparedRef:
    """Where a prepared transaction is recorded: the manifest that must commit it."""

    manifest_uri: str
    pipeline_id: str
    checkpoint_id: int
    producer_id: int
    producer_epoch: int


def prepared_index(manifests: Iterable[tuple[str, Manifest]]) -> dict[str, PreparedRef]:
    """Transactional id -> its PREPARED manifest; the one rule for "which ids are protected".

    COMMITTED and ABORTED manifests cast no vote that is still owed, so they protect nothing; nor
    does a PREPARED one whose give-up was decided (its abort stopped half way: finishing it is right).
    """
    index: dict[str, PreparedRef] = {}
    for uri, manifest in manifests:
        if manifest.status is not ManifestStatus.PREPARED or manifest.given_up:
            continue
        for c in manifest.committables:
            index.setdefault(
                c.transactional_id,
                PreparedRef(
                    uri, manifest.pipeline_id, manifest.checkpoint_id, c.producer_id, c.producer_epoch
                ),
            )
    return index


def load_prepared(
    base_uri: str | None,
    *,
    protect: bool = True,
    source: str = "manifest_base_uri",
    access: StoreAccess = STANDARD_CHAIN,
) -> dict[str, PreparedRef]:
    """The PREPARED index an abort must respect.

    ``protect=True`` (the default everywhere): the store must be configured and readable, else
    :class:`ManifestStoreError`. ``protect=False`` is the explicit way around: the store is read if
    it can be (to label what is being lost), and an unreadable one is logged loudly and ignored.
    """
    if protect:
        return ManifestStore.configured(base_uri, source=source, access=access).prepared()
    log.warning(
        "UNPROTECTED abort: transactions listed in PREPARED manifests may be aborted (their batches are lost)"
    )
    try:
        return ManifestStore.configured(base_uri, source=source, access=access).prepared()
    except ManifestError as exc:
        log.warning("UNPROTECTED abort: the manifest store is not consulted (%s)", exc)
        return {}
