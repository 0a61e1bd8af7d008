"""ClusterCapabilities parsing: real kafka-python response objects, decoded from real bytes."""

from __future__ import annotations

import json

from kafka.protocol.admin import DescribeConfigsResponse
from kafka.protocol.metadata import ApiVersionsResponse

from airflow_provider_kafka_eos.kafka.admin.capabilities import ClusterCapabilities

Res = DescribeConfigsResponse.DescribeConfigsResult
Entry = Res.DescribeConfigsResourceResult


def _api_versions(spans: dict[int, tuple[int, int]], tv: int | None = None) -> ApiVersionsResponse:
    """Encode then decode v3, so the parser sees what a broker would send."""
    features = []
    if tv is not None:
        features = [
            ApiVersionsResponse.FinalizedFeatureKey(
                name="transaction.version", max_version_level=tv, min_version_level=tv
            )
        ]
    response = ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=a, max_version=b)
            for k, (a, b) in spans.items()
        ],
        finalized_features=features,
    )
    return ApiVersionsResponse.decode(response.encode(version=3), version=3)


def _configs(values: dict[str, str], error_code: int = 0) -> DescribeConfigsResponse:
    entries = [
        Entry(
            name=k,
            value=v,
            read_only=False,
            is_default=False,
            is_sensitive=False,
            config_source=5,
            synonyms=[],
        )
        for k, v in values.items()
    ]
    result = Res(
        error_code=error_code, error_message=None, resource_type=4, resource_name="1", configs=entries
    )
    return DescribeConfigsResponse(results=[result])


KAFKA_4_1 = {22: (0, 5), 26: (0, 5), 61: (0, 0), 65: (0, 0), 66: (0, 2)}
KAFKA_3_6 = {22: (0, 4), 26: (0, 3), 61: (0, 0), 65: (0, 0), 66: (0, 0)}


def test_kafka_4_with_tv2_commits_with_end_txn_v5_and_filters_server_side():
    caps = ClusterCapabilities.from_responses(
        _api_versions(KAFKA_4_1, tv=2),
        _configs({"transaction.max.timeout.ms": "600000", "transaction.two.phase.commit.enable": "false"}),
        broker_id=1,
    )
    assert caps.transaction_version == 2 and caps.tv2
    assert caps.end_txn_version == 5
    assert caps.list_duration_filter and caps.list_pattern_filter
    assert caps.transaction_max_timeout_ms == 600000
    assert caps.two_phase_commit_enabled is False
    assert not caps.two_phase_commit_advertised


def test_tv1_cluster_with_end_txn_v5_served_still_commits_with_v4():
    caps = ClusterCapabilities.from_responses(_api_versions(KAFKA_4_1, tv=1))
    assert not caps.tv2
    assert caps.end_txn_version == 4


def test_old_cluster_without_features_or_filters():
    caps = ClusterCapabilities.from_responses(_api_versions(KAFKA_3_6))
    assert caps.transaction_version == 0
    assert caps.end_txn_version == 3
    assert caps.can_list_transactions and not caps.list_duration_filter and not caps.list_pattern_filter
    assert caps.transaction_max_timeout_ms is None
    assert caps.effective_max_timeout_ms() == (900000, True)


def test_2pc_is_advertised_only_with_init_producer_id_v6():
    spans = dict(KAFKA_4_1)
    spans[22] = (0, 6)
    caps = ClusterCapabilities.from_responses(
        _api_versions(spans, tv=2), _configs({"transaction.two.phase.commit.enable": "true"})
    )
    assert caps.two_phase_commit_advertised and caps.two_phase_commit_enabled is True


def test_refused_describe_configs_is_reported_not_guessed():
    caps = ClusterCapabilities.from_responses(_api_versions(KAFKA_4_1, tv=2), _configs({}, error_code=31))
    assert caps.transaction_max_timeout_ms is None
    assert "CLUSTER_AUTHORIZATION_FAILED (31)" in (caps.config_error or "")  # named as in every message
    assert "broker configs unavailable" in caps.render()


def test_render_and_json_name_every_ability():
    caps = ClusterCapabilities.from_responses(
        _api_versions(KAFKA_4_1, tv=2), _configs({"transaction.max.timeout.ms": "900000"}), broker_id=3
    )
    text = caps.render()
    for needle in ("ListTransactions", "v0-v2", "EndTxn", "commit uses v5", "TV2", "900000 ms (15 min)"):
        assert needle in text
    data = json.loads(caps.to_json())
    assert data["end_txn_version"] == 5
    assert data["api_versions"]["ListTransactions"] == [0, 2]
    assert data["transaction_max_timeout_ms"] == 900000
    assert data["two_phase_commit_enabled"] is None
