"""What the definitions imply for an AMQP endpoint: the node (the address's path unless
`node` is given, else the endpoint's id)."""

from __future__ import annotations

from urllib.parse import urlsplit

from adapters.descriptor import uri_of
from gateway.ports import AdapterEndpoint
from gateway.protocols import ProtocolProfile


def node(prof: ProtocolProfile, endpoint: AdapterEndpoint, opts: dict[str, object]) -> None:
    if "node" not in opts:
        opts["node"] = urlsplit(uri_of(endpoint)).path or endpoint.endpoint_id
