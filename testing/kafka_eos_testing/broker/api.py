"""The seam between the broker's network layer and the modules that answer requests.

Each API module registers its handlers here with :func:`handles`; the server decodes a
request with kafka-python's schema classes, looks the handler up by API key, and encodes
whatever the handler returns with the same version. ApiVersions is derived from this table,
so the broker never advertises an API nobody implements.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage

ANONYMOUS = "User:ANONYMOUS"


@dataclass
class RequestContext:
    """What a handler may know about the request besides its body."""

    broker: Any  # the running Broker (see server.py); typed Any to keep this module import-light
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    principal: str = ANONYMOUS
    connection: Any = None  # per-connection state (SASL progress); owned by server.py
    extras: dict[str, Any] = field(default_factory=dict)

    def authorized(self, operation: str, resource_type: str, name: str) -> bool:
        """True when the connection's principal may do ``operation`` on the resource.

        Operation and resource type use Kafka's names: ``WRITE``, ``DESCRIBE``, ``READ``,
        ``ALTER``, ``CLUSTER_ACTION``, ``TWO_PHASE_COMMIT``...; ``TOPIC``, ``GROUP``,
        ``TRANSACTIONAL_ID``, ``CLUSTER`` (name ``kafka-cluster``). Without an authorizer
        configured everything is allowed, as on a Kafka broker without ``authorizer.class.name``.
        """
        authorizer = getattr(self.broker, "authorizer", None)
        if authorizer is None:
            return True
        return authorizer.authorize(self.principal, operation, resource_type, name)


HandlerResult = Union["ApiMessage", Awaitable["ApiMessage"], None]
Handler = Callable[[RequestContext, "ApiMessage"], HandlerResult]


@dataclass(frozen=True)
class Registration:
    request_class: type
    response_class: type
    min_version: int
    max_version: int
    handler: Handler


HANDLERS: dict[int, Registration] = {}


def handles(
    request_class: type, response_class: type, *, min_version: int = 0, max_version: int | None = None
):
    """Register ``fn(ctx, request)`` as the handler of ``request_class``'s API key.

    ``max_version`` caps what ApiVersions advertises (defaults to the schema's maximum).
    A handler returns the response object (sync or async), or ``None`` when Kafka sends no
    response (Produce with acks=0).
    """

    def register(fn: Handler) -> Handler:
        top = request_class.max_version if max_version is None else max_version
        HANDLERS[request_class.API_KEY] = Registration(request_class, response_class, min_version, top, fn)
        return fn

    return register
