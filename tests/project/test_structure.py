"""The runtime package's size and privacy rules, read from the code (docs/architecture.md, "Structure").

In ``airflow_provider_kafka_eos/`` (not ``testing/``, the test double's own distribution):

- no module over 600 lines: a module that grows past it mixes concerns; split it at a seam (store /
  plan / transitions, one action family, one stage), not at a line count;
- no function over 80 lines (signature and docstring included): extract the step with a name;
- no ``from x import _y`` of another module's private name: a name another module needs is public
  (no underscore), or it stays where it is used. Private names move freely; an import of one would
  pin them.

Each rule is a function of (module name, source) so that the last test can show each one failing on
a source written to break it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import airflow_provider_kafka_eos

ROOT = Path(airflow_provider_kafka_eos.__file__).parent
PACKAGE = "airflow_provider_kafka_eos"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def _runtime_sources() -> dict[str, str]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if "testing" in rel.parts or "__pycache__" in rel.parts:
            continue
        parts = [PACKAGE, *rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path.read_text()
    return found


def _is_package(name: str) -> bool:
    return (ROOT.parent / name.replace(".", "/") / "__init__.py").exists()


def too_long_module(name: str, source: str) -> list[str]:
    lines = len(source.splitlines())
    return [f"{name}: {lines} lines"] if lines > MAX_MODULE_LINES else []


def too_long_functions(name: str, source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            length = node.end_lineno - start + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{name}.{node.name} (line {node.lineno}): {length} lines")
    return found


def private_imports(name: str, source: str, *, is_package: bool = False) -> list[str]:
    """``from <a module of the package> import _name`` in ``name`` (relative imports resolved)."""
    package = name if is_package else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            base = ".".join([*parts[: len(parts) - node.level + 1], base]).rstrip(".")
        if base != PACKAGE and not base.startswith(PACKAGE + "."):
            continue
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__") and base != name:
                found.append(f"{name} (line {node.lineno}): from {base} import {alias.name}")
    return found


def test_no_runtime_module_is_over_600_lines():
    found = [f for name, source in _runtime_sources().items() for f in too_long_module(name, source)]
    assert found == [], "split these at a seam: " + "; ".join(found)


def test_no_runtime_function_is_over_80_lines():
    found = [f for name, source in _runtime_sources().items() for f in too_long_functions(name, source)]
    assert found == [], "extract a named step from: " + "; ".join(found)


def test_no_runtime_module_imports_another_modules_private_name():
    found = [
        f
        for name, source in _runtime_sources().items()
        for f in private_imports(name, source, is_package=_is_package(name))
    ]
    assert found == [], "make these public where they are defined, or keep them there: " + "; ".join(found)


def test_each_rule_fails_on_a_source_that_breaks_it():
    """The rules are not vacuous: each one names the module, function or import that breaks it."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))  # + the def line: 81 lines
    long_function = f"def step():\n{body}\n"
    assert too_long_functions(f"{PACKAGE}.x", long_function) == [f"{PACKAGE}.x.step (line 1): 81 lines"]
    assert too_long_functions(f"{PACKAGE}.x", "def step():\n    return 1\n") == []

    long_module = "\n".join(f"X{i} = {i}" for i in range(MAX_MODULE_LINES + 1))
    assert too_long_module(f"{PACKAGE}.x", long_module) == [f"{PACKAGE}.x: 601 lines"]
    assert too_long_module(f"{PACKAGE}.x", long_module.rsplit("\n", 1)[0]) == []

    name = f"{PACKAGE}.kafka.admin.verdict"
    absolute = f"from {PACKAGE}.kafka.protocol.transaction_types import _holder, holder_text\n"
    relative = "from ..protocol.transaction_types import _state\n"
    assert private_imports(name, absolute) == [
        f"{name} (line 1): from {PACKAGE}.kafka.protocol.transaction_types import _holder"
    ]
    assert private_imports(name, relative) == [
        f"{name} (line 1): from {PACKAGE}.kafka.protocol.transaction_types import _state"
    ]
    assert private_imports(name, "from typing import _T\nfrom __future__ import annotations\n") == []
