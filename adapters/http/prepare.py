"""What the definitions imply for an HTTP ingress: the paths it serves (the messages'
fixed paths unless `paths` is given)."""

from __future__ import annotations

from collections.abc import Sequence

from adapters.descriptor import addresses
from gateway.config import EndpointConfig
from gateway.definitions.model import MessageDefinition
from gateway.protocols import ProtocolProfile


def paths(prof: ProtocolProfile, endpoint: EndpointConfig, opts: dict[str, object],
          messages: Sequence[MessageDefinition]) -> None:
    if "paths" not in opts:
        found = addresses(prof, messages)
        if found:
            opts["paths"] = found
