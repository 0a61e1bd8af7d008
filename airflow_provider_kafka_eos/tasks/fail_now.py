"""Which of our errors fail a task at once instead of burning its retries.

A wrong argument, a missing connection or an unknown config key gives the same error on every
try: retrying only delays the message by ``retries x retry_delay`` and, for a pipeline, eats
into the prepared transactions' timeout. Those errors become Airflow's fail-now exception
(same text, the original chained as its cause); everything else (a broker that did not answer,
a coordinator that was busy) keeps the task's retries. This module is the one place that
decides which errors are deterministic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from airflow_provider_kafka_eos.kafka.errors import (
    ConfigError,
    KafkaEosError,
    SpeculativeExecutionError,
    UsageError,
)

__all__ = ["FAIL_NOW_ERRORS", "fail_now_exception", "fail_now_on_usage_errors", "raises_fail_now"]

# Deterministic: the same input gives the same error on every try.
FAIL_NOW_ERRORS: tuple[type[KafkaEosError], ...] = (UsageError, ConfigError, SpeculativeExecutionError)

F = TypeVar("F", bound=Callable[..., Any])


def fail_now_exception() -> type[Exception]:
    """Airflow's "fail without retrying" exception (the Task SDK's; older releases kept it in core)."""
    try:
        from airflow.sdk.exceptions import AirflowFailException
    except ImportError:  # pragma: no cover - Airflow < 3.1
        from airflow.exceptions import AirflowFailException  # type: ignore[no-redef]
    return AirflowFailException


@contextmanager
def fail_now_on_usage_errors() -> Iterator[None]:
    """Turn a deterministic error into the fail-now exception; let every other error through."""
    try:
        yield
    except FAIL_NOW_ERRORS as err:
        raise fail_now_exception()(str(err)) from err


def raises_fail_now(method: F) -> F:
    """Decorator form for ``execute`` / ``execute_complete``."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with fail_now_on_usage_errors():
            return method(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
