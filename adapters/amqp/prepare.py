"""What the definitions imply for an AMQP endpoint: the node (the address's path unless
`node` is given, else the endpoint's id)."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from adapters.descriptor import uri_of
from gateway.config import EndpointConfig
from gateway.definitions.model import MessageDefinition
from gateway.protocols import ProtocolProfile


def node(prof: ProtocolProfile, endpoint: EndpointConfig, opts: dict[str, object],
         messages: Sequence[MessageDefinition]) -> None:
    if "node" not in opts:
        opts["node"] = urlsplit(uri_of(endpoint)).path or endpoint.endpoint_id
