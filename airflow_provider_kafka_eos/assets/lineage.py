"""Where the provider's data goes, in the names OpenLineage and Airflow Assets both use.

OpenLineage names a Kafka dataset ``namespace = kafka://<first bootstrap host:port>``,
``name = <topic>``; an Airflow Asset for the same topic is ``kafka://host:port/topic``, so a
downstream DAG, a lineage backend and a person reading either see one name for one topic.

``operator_lineage`` builds the OpenLineage provider's ``OperatorLineage`` for
``get_openlineage_facets_on_complete``; without that provider installed it returns ``None`` and
nothing else changes (the provider is optional).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["kafka_asset_uri", "kafka_namespace", "operator_lineage"]


def kafka_namespace(bootstrap_servers: str) -> str:
    """``kafka://host:port`` of the first bootstrap server (a ``PLAINTEXT://`` style prefix dropped)."""
    first = next((s.strip() for s in str(bootstrap_servers).split(",") if s.strip()), "")
    if not first:
        raise ValueError("bootstrap.servers is empty: cannot name the Kafka dataset")
    host_port = first.split("://", 1)[-1]
    return f"kafka://{host_port}"


def kafka_asset_uri(bootstrap_servers: str, topic: str) -> str:
    """The Asset URI of a topic: ``kafka://host:port/topic``."""
    return f"{kafka_namespace(bootstrap_servers)}/{topic}"


def operator_lineage(
    *, inputs: Iterable[tuple[str, str]] = (), outputs: Iterable[tuple[str, str]] = ()
) -> Any:
    """``OperatorLineage`` from ``(namespace, name)`` pairs; ``None`` without the OpenLineage provider."""
    try:
        from airflow.providers.common.compat.openlineage.facet import Dataset
        from airflow.providers.openlineage.extractors import OperatorLineage
    except ImportError:
        return None
    return OperatorLineage(
        inputs=[Dataset(namespace=ns, name=name) for ns, name in inputs],
        outputs=[Dataset(namespace=ns, name=name) for ns, name in outputs],
    )


class KafkaLineageMixin:
    """``get_openlineage_facets_on_complete`` for operators that learn their datasets while running.

    ``execute`` calls ``set_lineage(outputs=[(namespace, name)], inputs=[...])``; the OpenLineage
    provider (when installed) asks for the facets after the task completed.
    """

    _lineage_inputs: tuple[tuple[str, str], ...] = ()
    _lineage_outputs: tuple[tuple[str, str], ...] = ()

    def set_lineage(
        self, *, outputs: Iterable[tuple[str, str]] = (), inputs: Iterable[tuple[str, str]] = ()
    ) -> None:
        self._lineage_outputs = tuple(outputs)
        self._lineage_inputs = tuple(inputs)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return operator_lineage(inputs=self._lineage_inputs, outputs=self._lineage_outputs)
