"""Old module paths that still work: where each module went when the package was given its layers.

Users' DAGs, the docs and pickled or serialized values name modules by path
(``airflow_provider_kafka_eos.kafka.transactions.TransactionAdmin``, ``operators.lineage``...).
Each old path below is an alias of the module that now holds the code: importing it returns
that very module object (so ``mock.patch`` on an old path patches the real code), and no file
is left at the old path (so a change made to a moved file on another branch follows the file
through git's rename detection instead of landing on a shim).

Why a table and not a file per old path: one place says where everything went, and the
folders show only the new layout. New code imports the new paths; this table only grows when
a module moves, and an entry leaves only with a major release.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

__all__ = ["MOVED", "install"]

_P = "airflow_provider_kafka_eos"
_K = f"{_P}.kafka"
_O = f"{_P}.operators"

#: old module path -> the module that holds its code now
MOVED: dict[str, str] = {
    # protocol: bytes on the wire, connections, the values the coordinator speaks in
    f"{_K}.wire": f"{_K}.protocol.wire",
    f"{_K}.lanes": f"{_K}.protocol.lanes",
    f"{_K}.coordinator_answers": f"{_K}.protocol.coordinator_answers",
    f"{_K}.committable": f"{_K}.protocol.committable",
    f"{_K}.transaction_types": f"{_K}.protocol.transaction_types",
    f"{_K}.connection_security": f"{_K}.protocol.connection_security",
    # admin: the coordinator and the cluster, one module per API behind the TransactionAdmin facade
    f"{_K}.transactions": f"{_K}.admin.transactions",
    f"{_K}.end_txn": f"{_K}.admin.end_txn",
    f"{_K}.fencing": f"{_K}.admin.fencing",
    f"{_K}.commit_rules": f"{_K}.admin.commit_rules",
    f"{_K}.lso": f"{_K}.admin.lso",
    f"{_K}.capabilities": f"{_K}.admin.capabilities",
    f"{_K}.acl_check": f"{_K}.admin.acl_check",
    # producers: the pre-commit half of the two-phase commit
    f"{_K}.producer": f"{_K}.producers.librdkafka",
    f"{_K}.arrow_producer": f"{_K}.producers.arrow",
    f"{_K}.record_batch": f"{_K}.producers.record_batch",
    f"{_K}.partitioner": f"{_K}.producers.partitioner",
    f"{_K}.compression": f"{_K}.producers.compression",
    f"{_K}.producer_config": f"{_K}.producers.producer_config",
    # checkpoints: the vote (manifest), its store and life, whose run it is, ids, restore, abort
    f"{_K}.manifest": f"{_K}.checkpoints.manifest",
    f"{_K}.checkpoint": f"{_K}.checkpoints.lifecycle",
    f"{_K}.checkpoint_identity": f"{_K}.checkpoints.identity",
    f"{_K}.naming": f"{_K}.checkpoints.naming",
    f"{_K}.abort_strategies": f"{_K}.checkpoints.abort_strategies",
    f"{_K}.restore": f"{_K}.checkpoints.restore",
    f"{_K}.checkpoint_listing": f"{_K}.checkpoints.listing",
    f"{_K}.input_claims": f"{_K}.checkpoints.input_claims",
    f"{_K}.store_objects": f"{_K}.checkpoints.store_objects",
    # operations: what an operator (a person) runs: classify, findings, resolution, preflight
    f"{_K}.classify": f"{_K}.operations.classify",
    f"{_K}.findings_store": f"{_K}.operations.findings_store",
    f"{_K}.resolution": f"{_K}.operations.resolution",
    f"{_K}.preflight": f"{_K}.operations.preflight",
    # Airflow side: modules that were in operators/ without being operators
    f"{_O}.assets": f"{_P}.assets.events",
    f"{_O}.lineage": f"{_P}.assets.lineage",
    f"{_O}.metrics": f"{_P}.tasks.metrics",
    f"{_O}.fail_now": f"{_P}.tasks.fail_now",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path of :data:`MOVED` and loads it as the module at its new path."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # a placeholder, replaced in sys.modules by exec_module

    def exec_module(self, module: ModuleType) -> None:
        # The import system returns what sys.modules holds under the old name after this call,
        # so the old name becomes the new module itself (its __spec__ and __name__ untouched).
        sys.modules[module.__name__] = importlib.import_module(MOVED[module.__name__])


_finder = _Alias()


def install() -> None:
    """Put the alias finder on ``sys.meta_path`` (once; the packages whose modules moved call it)."""
    if _finder not in sys.meta_path:
        sys.meta_path.append(_finder)
