"""The broker's topics: names, ids, partition logs, and (with a data directory) their persistence."""

from __future__ import annotations

import json
import os
import re
import uuid

from . import codes
from .log import PartitionLog

# A test broker's own limit (Kafka has none): a typo of a few zeros must not allocate millions of logs.
MAX_PARTITIONS = 1000
_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def _write_json_atomically(path: str, payload: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(payload, fh)
    os.replace(tmp, path)


class TopicManager:
    """Creates, finds and deletes topics; one :class:`PartitionLog` per partition."""

    def __init__(self, data_dir: str | None = None) -> None:
        self._data_dir = data_dir
        self._logs: dict[str, list[PartitionLog]] = {}
        self._ids: dict[str, uuid.UUID] = {}
        if data_dir is not None:
            self._load()

    def _topic_dir(self, name: str, partition: int) -> str | None:
        if self._data_dir is None:
            return None
        return os.path.join(self._data_dir, "logs", f"{name}-{partition}")

    def _catalog_path(self) -> str:
        assert self._data_dir is not None
        return os.path.join(self._data_dir, "topics.json")

    def _load(self) -> None:
        path = self._catalog_path()
        if not os.path.exists(path):
            return
        with open(path) as fh:
            catalog = json.load(fh)
        for name, entry in catalog.items():
            self._ids[name] = uuid.UUID(entry["id"])
            self._logs[name] = [
                PartitionLog(name, p, self._topic_dir(name, p)) for p in range(entry["partitions"])
            ]

    def _save(self) -> None:
        if self._data_dir is None:
            return
        os.makedirs(self._data_dir, exist_ok=True)
        _write_json_atomically(
            self._catalog_path(),
            {
                name: {"id": str(self._ids[name]), "partitions": len(logs)}
                for name, logs in self._logs.items()
            },
        )

    # ------------------------------------------------------------------ interface

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        logs = self._logs.get(topic)
        if logs is None or not 0 <= partition < len(logs):
            return None
        return logs[partition]

    def exists(self, topic: str) -> bool:
        return topic in self._logs

    def names(self) -> list[str]:
        return sorted(self._logs)

    def partitions(self, topic: str) -> list[PartitionLog]:
        return list(self._logs.get(topic, ()))

    def topic_id(self, topic: str) -> uuid.UUID:
        return self._ids.get(topic, uuid.UUID(int=0))

    def name_for_id(self, topic_id: uuid.UUID) -> str | None:
        for name, tid in self._ids.items():
            if tid == topic_id:
                return name
        return None

    @staticmethod
    def validate_name(name: str) -> str | None:
        """Why Kafka would refuse this topic name (Kafka's own words, ``Topic.validate``), or None."""
        if not name:
            return "Topic name is illegal, it can't be empty"
        if name in (".", ".."):
            return "Topic name cannot be \".\" or \"..\""
        if len(name) > 249:
            return f"Topic name is invalid: '{name}' is longer than 249 characters"
        if not _LEGAL_NAME.match(name):
            return (
                f"Topic name is invalid: '{name}' contains one or more characters other than "
                "ASCII alphanumerics, '.', '_' and '-'"
            )
        return None

    def create(self, name: str, partitions: int) -> int:
        """Create a topic; returns a Kafka error code (0 on success)."""
        if self.validate_name(name):
            return codes.INVALID_TOPIC_EXCEPTION
        if name in self._logs:
            return codes.TOPIC_ALREADY_EXISTS
        if not 1 <= partitions <= MAX_PARTITIONS:
            return codes.INVALID_PARTITIONS
        self._ids[name] = uuid.uuid4()
        self._logs[name] = [PartitionLog(name, p, self._topic_dir(name, p)) for p in range(partitions)]
        self._save()
        return codes.NONE

    def delete(self, name: str) -> int:
        logs = self._logs.pop(name, None)
        if logs is None:
            return codes.UNKNOWN_TOPIC_OR_PARTITION
        self._ids.pop(name, None)
        for partition_log in logs:
            partition_log.close()
            directory = self._topic_dir(name, partition_log.partition)
            if directory is not None and os.path.isdir(directory):
                for entry in os.listdir(directory):
                    os.remove(os.path.join(directory, entry))
                os.rmdir(directory)
        self._save()
        return codes.NONE

    def close(self) -> None:
        for logs in self._logs.values():
            for partition_log in logs:
                partition_log.close()
