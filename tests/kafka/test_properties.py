"""Property-based tests (hypothesis) of the parsers and validators every edge relies on.

- the manifest parser raises only ManifestError, whatever the bytes;
- CLI parsing and validation never traceback (usage errors exit 2 with one line);
- committables and manifests round-trip through JSON unchanged;
- naming strategies give unique ids per checkpoint, and POOLING stays bounded.

Small ``max_examples`` and no per-example deadline keep them cheap in CI (a few seconds).
"""

from __future__ import annotations

import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_kafka_eos.cli import run as cli_run
from airflow_provider_kafka_eos.kafka.checkpoints.manifest import Manifest, ManifestStatus
from airflow_provider_kafka_eos.kafka.checkpoints.naming import (
    incrementing_id,
    parse_transactional_id,
    pooling_ids,
)
from airflow_provider_kafka_eos.kafka.errors import ManifestError
from airflow_provider_kafka_eos.kafka.protocol.committable import Committable, TopicPartition

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- the manifest parser -------------------------------------------------------------------------

_VALID = {
    "schema_version": 4, "pipeline_id": "orders", "checkpoint_id": 7, "transactional_id_prefix": "orders",
    "naming_strategy": "INCREMENTING", "topic": "orders", "status": "PREPARED",
    "committables": [{
        "transactional_id": "orders-0-7", "producer_id": 4001, "producer_epoch": 3,
        "partitions": [{"topic": "orders", "partition": 0}], "record_count": 10,
        "prepared_at_ms": 1, "transaction_start_ms": 1, "transaction_timeout_ms": 900_000,
        "transaction_version": 2, "end_txn_version": 5,
    }],
    "created_at_ms": 1, "updated_at_ms": 1, "prepared_by": None, "input": None, "decision": None,
}
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def _parse_only_raises_manifest_error(data: bytes | str) -> Manifest | None:
    """Parse; a ManifestError is fine, anything else fails. What parses must be usable on Kafka."""
    try:
        manifest = Manifest.from_json(data, source="fuzz")
    except ManifestError:
        return None
    for name in (manifest.pipeline_id, manifest.transactional_id_prefix, manifest.topic,
                 *manifest.transactional_ids):
        name.encode("utf-8")  # a lone surrogate here used to hang the CLI later
    return manifest


@FAST
@given(st.binary(max_size=400))
def test_manifest_parser_raises_only_manifest_error_for_any_bytes(data):
    _parse_only_raises_manifest_error(data)


@FAST
@given(st.sampled_from(sorted(_VALID)), _json_values)
def test_manifest_parser_with_one_field_replaced_by_any_json(field, value):
    _parse_only_raises_manifest_error(json.dumps({**_VALID, field: value}))


@FAST
@given(st.sampled_from(sorted(_VALID["committables"][0])), _json_values)
def test_manifest_parser_with_one_committable_field_replaced_by_any_json(field, value):
    committable = {**_VALID["committables"][0], field: value}
    _parse_only_raises_manifest_error(json.dumps({**_VALID, "committables": [committable]}))


@FAST
@given(st.text(max_size=200))
def test_manifest_parser_with_any_text(text):
    _parse_only_raises_manifest_error(text)


# JSON string literals mixing plain characters with \uXXXX escapes, lone surrogates included.
_json_strings = st.from_regex(r'"(?:\\u[dD][89abAB][0-9a-fA-F]{2}|\\u00[4-7][0-9a-fA-F]|[a-z0-9-]){1,6}"',
                              fullmatch=True)


_ID_FIELDS = ["pipeline_id", "transactional_id_prefix", "topic", "transactional_id"]


@FAST
@given(st.sampled_from(_ID_FIELDS), _json_strings)
def test_escaped_strings_in_id_fields_parse_only_when_kafka_can_carry_them(field, literal):
    text = json.dumps(_VALID)
    old = '"orders-0-7"' if field == "transactional_id" else f'"{field}": "orders"'
    new = literal if field == "transactional_id" else f'"{field}": {literal}'
    _parse_only_raises_manifest_error(text.replace(old, new))


# -- round trips -----------------------------------------------------------------------------------

_ids = st.text(min_size=1, max_size=40).filter(lambda s: s.encode("utf-8", "surrogatepass") and not any(
    0xD800 <= ord(c) <= 0xDFFF for c in s))
_topics = st.from_regex(r"[a-zA-Z0-9._-]{1,30}", fullmatch=True).filter(lambda t: t not in (".", ".."))


@st.composite
def committables(draw, tid=None):
    tv = draw(st.sampled_from([1, 2]))
    return Committable(
        transactional_id=tid or draw(_ids),
        producer_id=draw(st.integers(0, 2**63 - 1)),
        producer_epoch=draw(st.integers(0, 32767)),
        partitions=tuple(draw(st.lists(
            st.builds(TopicPartition, _topics, st.integers(0, 10_000)), min_size=1, max_size=4, unique=True,
        ))),
        record_count=draw(st.integers(1, 2**40)),
        prepared_at_ms=draw(st.integers(0, 2**45)),
        transaction_start_ms=draw(st.integers(0, 2**45)),
        transaction_timeout_ms=draw(st.integers(1, 2**31 - 1)),
        transaction_version=tv,
        end_txn_version=5 if tv == 2 else draw(st.integers(0, 4)),
        two_phase=draw(st.booleans()),
    )


@FAST
@given(committables())
def test_committable_round_trips(committable):
    assert Committable.from_dict(json.loads(json.dumps(committable.to_dict()))) == committable


@FAST
@given(
    st.lists(_ids, min_size=0, max_size=5, unique=True).flatmap(
        lambda ids: st.tuples(*[committables(tid=t) for t in ids])
    ),
    st.sampled_from(list(ManifestStatus)),
    st.integers(0, 2**40),
    _topics,
)
def test_manifest_round_trips(items, status, checkpoint, topic):
    manifest = Manifest(
        pipeline_id="orders", checkpoint_id=checkpoint, transactional_id_prefix="orders",
        naming_strategy="INCREMENTING", topic=topic, status=status, committables=list(items),
        created_at_ms=1, updated_at_ms=2,
    )
    again = Manifest.from_json(manifest.to_json())
    assert again == manifest and again.to_json() == manifest.to_json()


# -- the CLI's argument layer ---------------------------------------------------------------------

_OPTIONS = ["--transactional-id", "--producer-id", "--epoch", "--prefix", "--state", "--min-age",
            "--manifest", "--dry-run", "--json", "--topic", "--transaction-timeout-ms", "--timeout",
            "--two-phase-commit", "--strict", "--bootstrap-servers"]
_ACTIONS = ["list", "describe", "abort", "commit", "commit-from-manifest", "find-hanging", "preflight"]
_tokens = st.one_of(
    st.sampled_from(_OPTIONS), st.sampled_from(_ACTIONS), st.text(max_size=12),
    st.sampled_from(["0s", "-1s", "15m", "1e9d", "abc", "\udc80", "x" * 40000, "-5", "99999999999999999999"]),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.sampled_from(_ACTIONS), st.text(max_size=12)), st.lists(_tokens, max_size=8))
def test_cli_parsing_never_tracebacks(command, argv):
    """Any argv (mostly after a real command): exit 0/1/2, one-line error, never an unexpected exception.

    Whatever survives validation talks to a port nothing listens on, with a 300 ms deadline (the
    last ``--timeout`` wins in argparse, so ours is appended).
    """
    out, err = io.StringIO(), io.StringIO()
    env = {"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    try:
        code = cli_run([command, *argv, "--timeout", "300ms"], stdout=out, stderr=err, env=env)
    except SystemExit as exit_:  # argparse's usage errors and --help
        code = exit_.code
    assert code in (0, 1, 2), (command, argv, code, err.getvalue())
    said = err.getvalue()
    assert "unexpected" not in said and "Traceback" not in said, (command, argv, said)


# -- naming strategies ------------------------------------------------------------------------------

_prefixes = st.from_regex(r"[a-z][a-z0-9_.-]{0,15}[a-z0-9]", fullmatch=True)


@FAST
@given(_prefixes, st.integers(1, 64), st.lists(st.integers(0, 10**12), min_size=1, max_size=6, unique=True))
def test_incrementing_ids_are_unique_per_checkpoint_and_parse_back(prefix, partitions, checkpoints):
    ids = [incrementing_id(prefix, p, c) for c in checkpoints for p in range(partitions)]
    assert len(set(ids)) == len(ids)
    for tid in ids:
        parsed = parse_transactional_id(tid)
        assert parsed is not None and parsed.prefix == prefix


@FAST
@given(_prefixes, st.integers(1, 16), st.lists(st.integers(0, 5), max_size=20), st.integers(1, 8))
def test_pooling_is_unique_per_checkpoint_and_bounded(prefix, partitions, prepared_slots, checkpoints):
    """Every checkpoint's ids are distinct and avoid ids still in use (Ongoing or PREPARED);
    reusing freed slots keeps the pool within partitions x (slots in use + 1)."""
    in_use = {f"{prefix}-0-{s}" for s in prepared_slots}  # a PREPARED backlog on partition 0
    seen: set[str] = set()
    for _ in range(checkpoints):
        ids = pooling_ids(prefix, range(partitions), in_use)
        assert len(set(ids.values())) == partitions and not set(ids.values()) & in_use
        seen |= set(ids.values())
        # committed at once: nothing of this checkpoint stays in use
    assert len(seen) <= partitions  # committed checkpoints free their slots: the pool does not grow
    for tid in seen:
        parsed = parse_transactional_id(tid)
        assert parsed.offset <= len(in_use)
