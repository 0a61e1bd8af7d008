"""The package's layers, read from the code's own imports (docs/architecture.md draws them).

Every ``import`` of the package counts, also inside functions and under ``TYPE_CHECKING``: a cycle
through a type hint is still two modules that cannot be understood apart.
"""

from __future__ import annotations

import ast
from pathlib import Path

import airflow_provider_kafka_eos

ROOT = Path(airflow_provider_kafka_eos.__file__).parent
PACKAGE = "airflow_provider_kafka_eos"
# kafka/'s floors, from the ground up: a module may import its own floor and those below.
KAFKA_FLOORS = {
    "kafka": 0,  # the modules directly in kafka/: errors, config, validation and their helpers
    "kafka.protocol": 1,
    "kafka.admin": 2, "kafka.producers": 2, "kafka.checkpoints": 2, "kafka.registry": 2,
    "kafka.operations": 3,
}
SIBLINGS_APART = {"kafka.admin", "kafka.producers", "kafka.checkpoints"}  # each is handed the others


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime_modules() -> dict[str, Path]:
    return {
        _module_name(p): p
        for p in ROOT.rglob("*.py")
        if "testing" not in p.relative_to(ROOT).parts and "__pycache__" not in p.parts
    }


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The package modules ``path`` imports (``from X import y`` counts X, and X.y when y is a module)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], base]).rstrip(".")
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for target in targets:
            if target in known and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _runtime_modules()
    known = set(modules)
    graph = {}
    for name, path in modules.items():
        edges = _imports(path, name, known)
        # a package's __init__ is passed through on the way to its modules: not an edge of its own
        graph[name] = {e for e in edges if modules[e].name != "__init__.py"}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _layer(module: str) -> str | None:
    short = module[len(PACKAGE) + 1:]
    for prefix in sorted(KAFKA_FLOORS, key=len, reverse=True):
        if short == prefix or short.startswith(prefix + "."):
            return prefix
    return None


def test_the_runtime_package_has_no_import_cycle():
    assert _cycles(_graph()) == []


def test_kafka_imports_no_higher_floor_and_no_sibling():
    wrong = []
    for module, targets in _graph().items():
        here = _layer(module)
        if here is None:
            continue
        for target in targets:
            there = _layer(target)
            if there is None:
                # kafka/ may use the package's top-level helpers (runbook), nothing Airflow
                if target not in (f"{PACKAGE}.runbook", PACKAGE):
                    wrong.append(f"{module} -> {target} (outside kafka/)")
                continue
            if KAFKA_FLOORS[there] > KAFKA_FLOORS[here]:
                wrong.append(f"{module} -> {target} (up from {here} to {there})")
            elif here != there and here in SIBLINGS_APART and there in SIBLINGS_APART:
                wrong.append(f"{module} -> {target} (sideways, {here} to {there})")
    assert wrong == []


def _room(module: str) -> str:
    """The room a module stands in, as the import picture draws the package: each top-level
    sub-package or module is one room; the package's own ``__init__`` (its identity) is one."""
    short = module[len(PACKAGE) + 1:]
    return short.split(".", 1)[0] if short else "__init__"


def _room_graph() -> dict[str, set[str]]:
    """Room -> the rooms it imports; the package's ``__init__`` counts (it defines the identity)."""
    modules = _runtime_modules()
    known = set(modules)
    rooms: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = _room(name)
        rooms.setdefault(here, set()).update(r for r in map(_room, _imports(path, name, known)) if r != here)
    return rooms


def test_no_import_runs_back_up_between_the_packages_rooms():
    """Rooms stand on floors above all they import; an import from a lower room to a higher one is
    a loop between rooms (runbook -> the package's identity -> hooks -> kafka -> runbook was one:
    ``get_provider_info`` in ``__init__`` read the hooks). So: no loop between rooms, and the
    identity, which everything may read, imports nothing."""
    graph = _room_graph()
    assert graph["__init__"] == set()
    assert _cycles(graph) == []


def test_the_graph_sees_imports_inside_functions_and_type_checking():
    """The reader must not be blind to the imports the rules are about (a test that cannot fail
    would prove nothing): the facade's lazy and eager imports are both seen."""
    graph = _graph()
    facade = f"{PACKAGE}.kafka.admin.transactions"
    assert f"{PACKAGE}.kafka.admin.end_txn" in graph[facade]
    assert f"{PACKAGE}.kafka.protocol.wire" in graph[facade]
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    rooms = _room_graph()
    assert "runbook" in rooms["kafka"] and "__init__" in rooms["runbook"] and "kafka" in rooms["hooks"]


# The test double's import path, and the one it had inside the runtime package.
TEST_DOUBLE = ("kafka_eos_testing", f"{PACKAGE}.testing")


def test_no_runtime_module_imports_the_test_double():
    """The test double (kafka_eos_testing: embedded broker, launchers, pytest plugin) serves tests only:
    production code never imports it, so it lives in its own distribution, outside the runtime wheel."""
    wrong = []
    for name, path in _runtime_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            wrong += [f"{name} -> {t}" for t in targets if t.startswith(TEST_DOUBLE)]
    assert wrong == []


def _error_classes_outside_errors_py() -> list[str]:
    """Classes of the runtime package, outside ``kafka/errors.py``, that derive from one of its errors."""
    errors_path = ROOT / "kafka" / "errors.py"
    ours = {n.name for n in ast.walk(ast.parse(errors_path.read_text())) if isinstance(n, ast.ClassDef)}
    found = []
    for name, path in _runtime_modules().items():
        if path == errors_path:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
            if bases & ours:
                found.append(f"{name}.{node.name}")
    return found


def test_every_provider_error_class_lives_in_kafka_errors():
    """One file answers "which errors can the provider raise, and which runbook page does each
    name": a ``KafkaEosError`` subclass defined anywhere else is a second list."""
    assert _error_classes_outside_errors_py() == []
