"""InitProducerId for idempotent (non-transactional) producers.

The transaction coordinator (coordinator.py) registers its own InitProducerId, which replaces
this one when present: transactional ids are its business. Without it, this fallback lets
idempotent producers work and refuses transactional ones with a clear error code.
"""

from __future__ import annotations

from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from . import codes
from .api import RequestContext, handles


@handles(InitProducerIdRequest, InitProducerIdResponse, max_version=5)
def init_producer_id(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=codes.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1
        )
    return InitProducerIdResponse(
        throttle_time_ms=0,
        error_code=codes.NONE,
        producer_id=ctx.broker.allocate_producer_id(),
        producer_epoch=0,
    )
