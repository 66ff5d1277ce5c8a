"""What the definitions imply for an HTTP ingress: the paths it serves (the messages'
fixed paths unless `paths` is given)."""

from __future__ import annotations

from adapters.descriptor import addresses
from gateway.ports import AdapterEndpoint
from gateway.protocols import ProtocolProfile


def paths(prof: ProtocolProfile, endpoint: AdapterEndpoint, opts: dict[str, object]) -> None:
    if "paths" not in opts:
        found = addresses(endpoint)
        if found:
            opts["paths"] = found
