"""How the provider reads a transaction coordinator's answers: the error codes it acts on,
which of them are retried (and the backoff between tries), and the error a refusal becomes.

One owner for these rules, shared by describe/list
(:mod:`~airflow_provider_kafka_eos.kafka.admin.transactions`), EndTxn
(:mod:`~airflow_provider_kafka_eos.kafka.admin.end_txn`) and fencing
(:mod:`~airflow_provider_kafka_eos.kafka.admin.fencing`). No I/O besides the backoff sleep.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from airflow_provider_kafka_eos.kafka.errors import (
    AuthorizationError,
    KafkaEosError,
    UnsupportedCapabilityError,
)
from airflow_provider_kafka_eos.kafka.protocol.error_codes import (
    CLUSTER_AUTHORIZATION_FAILED,
    CONCURRENT_TRANSACTIONS,
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR,
    REQUEST_TIMED_OUT,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    UNSUPPORTED_VERSION,
    error_name,
)

# The coordinator answers that are retried (the codes: protocol/error_codes.py).
RETRIABLE = frozenset(
    {
        NOT_COORDINATOR,
        COORDINATOR_LOAD_IN_PROGRESS,
        COORDINATOR_NOT_AVAILABLE,
        CONCURRENT_TRANSACTIONS,
        REQUEST_TIMED_OUT,
    }
)


@dataclass
class Retry:
    """Deadline + exponential backoff for retriable coordinator answers."""

    deadline: float
    backoff_s: float = 0.02
    max_backoff_s: float = 0.5
    attempts: int = field(default=0)

    def wait(self) -> bool:
        """Back off before the next attempt; False when the deadline would pass."""
        self.attempts += 1
        delay = min(self.max_backoff_s, self.backoff_s * (2 ** min(self.attempts - 1, 10)))
        if time.monotonic() + delay > self.deadline:
            return False
        time.sleep(delay)  # a backoff between protocol retries, not a synchronisation wait
        return True


def error_for_code(tid: str | None, code: int, api: str) -> KafkaEosError:
    """The error a non-retriable coordinator answer ``code`` to ``api`` stands for."""
    if code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        describe_only = api in ("DescribeTransactions", "FindCoordinator", "ListTransactions")
        return authorization_error(tid, "DESCRIBE" if describe_only else "WRITE", api)
    if code == CLUSTER_AUTHORIZATION_FAILED:
        return AuthorizationError(f"{api} was refused with {error_name(code)}", transactional_id=tid)
    if code == UNSUPPORTED_VERSION:
        return UnsupportedCapabilityError(
            f"{api} is not supported by the cluster ({error_name(code)})", transactional_id=tid
        )
    return KafkaEosError(
        f"{api} failed with {error_name(code)}", transactional_id=tid, runbook="troubleshooting"
    )


def authorization_error(tid: str | None, operation: str, api: str) -> AuthorizationError:
    """TRANSACTIONAL_ID_AUTHORIZATION_FAILED: the ACL ``operation`` the principal lacks."""
    resource = f"TransactionalId:{tid}" if tid else "the TransactionalId resource"
    return AuthorizationError(
        f"{api} was refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED: the principal needs {operation} on "
        f"{resource} (e.g. a prefixed ACL on the pipeline's transactional-id prefix)",
        transactional_id=tid,
    )
