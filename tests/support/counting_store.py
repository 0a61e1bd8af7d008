"""A manifest store whose listings are counted: "one listing of a pipeline per checkpoint write"
(issue 36) is checked through it, on the writer's path and on the Kafka input's plan."""

from __future__ import annotations

import uuid
from collections import Counter

import fsspec
from fsspec.implementations.memory import MemoryFileSystem


class CountingStore(MemoryFileSystem):
    """The manifest store's boundary, counted: fsspec's in-memory filesystem under its own protocol,
    recording every listing (``ls``) by folder. Real fsspec code paths (the ones an object store
    takes), no stand-in for the provider's own logic."""

    protocol = "kafkaeoscounting"
    listings: Counter = Counter()

    def ls(self, path, detail=True, **kwargs):
        type(self).listings[self._strip_protocol(path).rstrip("/")] += 1
        return super().ls(path, detail=detail, **kwargs)

    @classmethod
    def fresh_base(cls) -> str:
        """A new store base URI under the counting protocol (registered on first use)."""
        fsspec.register_implementation(cls.protocol, cls, clobber=True)
        return f"{cls.protocol}://store-{uuid.uuid4().hex}"

    @classmethod
    def listed(cls, base: str, pipeline_id: str) -> int:
        """How often the pipeline's folder under ``base`` was listed since the last ``clear``."""
        return cls.listings[cls._strip_protocol(f"{base}/{pipeline_id}").rstrip("/")]
