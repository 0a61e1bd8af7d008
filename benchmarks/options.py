"""Command-line options of the benchmarks: ``--name=value`` pairs over a dict of defaults.

One parser for every ``bench_*.py``, so ``./run bench spark_eos --records=100000`` means the
same thing everywhere: a value takes the type of its default, unknown names are ignored (the
harness hands every ``--`` argument to every benchmark it runs).
"""

from __future__ import annotations

from typing import Any


def parse_options(argv: list[str], defaults: dict[str, Any]) -> dict[str, Any]:
    """``defaults`` updated with the ``--key=value`` arguments whose key it has."""
    opts = dict(defaults)
    for arg in argv:
        key, _, value = arg.lstrip("-").partition("=")
        if key in opts:
            opts[key] = type(defaults[key])(value)
    return opts
