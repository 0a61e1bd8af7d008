"""Every core handler answers a default request at every version it advertises, and the answer encodes.

In-process (no sockets): builds kafka-python's default request for each version, round-trips it
through the wire format, runs the handler and encodes its response at that version. This catches
responses built with a field name or shape that some version cannot encode, which a client
would only see as a dropped connection.
"""

from __future__ import annotations

import asyncio
import inspect

import pytest

from kafka_eos_testing.broker.api import HANDLERS, RequestContext
from kafka_eos_testing.broker.broker import CORE_HANDLER_MODULES, Broker, BrokerConfig
from kafka_eos_testing.broker.server import advertised_versions

# Every core handler module the broker loads, so a new one is covered without editing this
# list; SASL's handlers need a connection mid-handshake and are covered by test_core_sasl.py.
CORE_MODULES = set(CORE_HANDLER_MODULES) - {"sasl"}
_BROKER = Broker(BrokerConfig())
CASES = [
    pytest.param(key, version, id=f"{HANDLERS[key].request_class.__name__}-v{version}")
    for key, low, top in advertised_versions(_BROKER)
    if HANDLERS[key].handler.__module__.rsplit(".", 1)[1] in CORE_MODULES
    for version in range(low, top + 1)
]


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_default_request_gets_an_encodable_response(api_key, version):
    registration = HANDLERS[api_key]
    request = registration.request_class(version=version)
    if api_key == 0:  # Produce: acks=0 means "no response"; ask for one
        request.acks = 1
    wire = request.encode(version=version)
    decoded = registration.request_class.decode(wire, version=version)

    async def run():
        ctx = RequestContext(
            broker=_BROKER, api_key=api_key, api_version=version, correlation_id=1, client_id="test"
        )
        result = registration.handler(ctx, decoded)
        return await asyncio.wait_for(result, 5) if inspect.isawaitable(result) else result

    response = asyncio.run(run())
    assert isinstance(response, registration.response_class)
    assert len(response.encode(version=version)) > 0
