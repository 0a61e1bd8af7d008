"""The launcher's own error, apart so that every module of the launcher can raise it."""

from __future__ import annotations


class KafkaStartError(RuntimeError):
    """A node did not start (or the cluster did not become ready); every node has been stopped."""
