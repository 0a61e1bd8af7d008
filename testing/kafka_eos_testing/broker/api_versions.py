"""ApiVersions: derived from the handler registry, plus the finalized ``transaction.version``."""

from __future__ import annotations

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from . import codes
from .api import RequestContext, handles
from .server import advertised_versions

# KIP-890 (transaction.version 2) is a finalized feature a client reads from ApiVersions v3+.
_SUPPORTED_TRANSACTION_VERSIONS = (0, 2)


@handles(ApiVersionsRequest, ApiVersionsResponse, max_version=4)
def api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    keys = [
        ApiVersionsResponse.ApiVersion(api_key=k, min_version=low, max_version=top)
        for k, low, top in advertised_versions(ctx.broker)
    ]
    fields: dict = {"error_code": codes.NONE, "api_keys": keys, "throttle_time_ms": 0}
    if ctx.api_version >= 3:
        level = ctx.broker.config.transaction_version
        fields["supported_features"] = [
            ApiVersionsResponse.SupportedFeatureKey(
                name="transaction.version",
                min_version=_SUPPORTED_TRANSACTION_VERSIONS[0],
                max_version=_SUPPORTED_TRANSACTION_VERSIONS[1],
            )
        ]
        fields["finalized_features_epoch"] = 1
        fields["finalized_features"] = [
            ApiVersionsResponse.FinalizedFeatureKey(
                name="transaction.version", max_version_level=level, min_version_level=level
            )
        ]
    return ApiVersionsResponse(**fields)
