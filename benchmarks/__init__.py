"""Reproducible performance measurements; run with ``./run bench [name ...]``.

Each ``bench_<name>.py`` module exposes ``main(argv: list[str]) -> dict`` that runs one
measurement and returns its numbers; the runner prints them and writes them to
``benchmarks/results/<name>.json`` so a change can be compared with the last run.
Speed goals live here, not in timed tests.
"""
