"""The connection's certificate and key files, carried to the executors inside the job.

A client config names its CA, client certificate, key (and CRL / PKCS12 keystore) by path on the
machine that read the connection; an executor on another host has no such path, and a shared
mount of a private key is what platform teams avoid. So the driver reads each file once
(:func:`carry`) and the bytes travel inside the task closure Spark ships to its executors, as the
password does (never argv, never a Spark conf, never a log). Each task writes them into a fresh
0700 folder as 0600 files (:func:`materialised`), points the config at those, and removes the
folder when the task ends. Both client libraries then read ordinary files, as they must
(kafka-python takes no inline PEM).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_kafka_eos.kafka.errors import ConfigError

__all__ = ["FILE_KEYS", "CarriedConfig", "carry", "materialised"]

# librdkafka keys naming a file the client reads at connect time.
FILE_KEYS = (
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.crl.location",
    "ssl.keystore.location",
)
_MAX_BYTES = 1 << 20  # certificates and keys are kilobytes; a megabyte means a wrong path


@dataclass(frozen=True)
class CarriedConfig:
    """A client config whose file settings travel as their contents (repr hides both)."""

    settings: dict[str, Any] = field(repr=False)
    files: dict[str, bytes] = field(repr=False)

    def __repr__(self) -> str:
        return f"CarriedConfig(files={sorted(self.files)})"


def carry(config: Mapping[str, Any], *, source: str = "connection") -> CarriedConfig:
    """Read every file the config names (on the driver). A directory (``ssl.ca.location`` may be
    one for librdkafka) cannot travel: refused naming the key."""
    settings = dict(config)
    files: dict[str, bytes] = {}
    for key in FILE_KEYS:
        path = settings.get(key)
        if not path or (key == "ssl.ca.location" and str(path) == "probe"):
            continue  # "probe": librdkafka looks in the executor's own system CA paths
        path = str(path)
        if os.path.isdir(path):
            raise ConfigError(
                f"{source}: key {key!r} is the directory {path}; the Spark executors get the file's "
                "contents, so name one PEM file (concatenate the CA certificates into it)"
            )
        try:
            size = os.path.getsize(path)
            if size > _MAX_BYTES:
                raise ConfigError(f"{source}: key {key!r}: {path} is {size} bytes, not a certificate or key")
            with open(path, "rb") as handle:
                files[key] = handle.read()
        except OSError as exc:
            raise ConfigError(
                f"{source}: key {key!r}: {path} cannot be read ({exc.strerror}); nothing was written"
            ) from None
        del settings[key]
    return CarriedConfig(settings, files)


@contextlib.contextmanager
def materialised(carried: CarriedConfig) -> Iterator[dict[str, Any]]:
    """On the executor: the config with each carried file written to a private folder (removed on exit)."""
    if not carried.files:
        yield dict(carried.settings)
        return
    folder = tempfile.mkdtemp(prefix="kafka-eos-client-")  # 0700
    try:
        settings = dict(carried.settings)
        for key, content in carried.files.items():
            path = os.path.join(folder, key.replace(".", "-"))
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(content)
            settings[key] = path
        yield settings
    finally:
        shutil.rmtree(folder, ignore_errors=True)
