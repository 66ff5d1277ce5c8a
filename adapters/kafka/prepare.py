"""What the definitions imply for a Kafka endpoint: the topics a consumer reads (the
messages' fixed topics unless `topics` is given), its default group, and how an
observer differs (a group of its own, starting at the end)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from adapters.descriptor import addresses, strings
from gateway.config import EndpointConfig
from gateway.definitions.model import MessageDefinition
from gateway.protocols import ProtocolProfile


def subscription(prof: ProtocolProfile, endpoint: EndpointConfig,
                 opts: dict[str, object], messages: Sequence[MessageDefinition]) -> None:
    topics = strings(opts.get("topics")) or strings(opts.get("topic")) or [
        t for t in addresses(prof, messages) if "{" not in t]
    opts["topics"] = list(dict.fromkeys(topics))
    opts.setdefault("consumergroup", f"xrgw-{endpoint.endpoint_id}")


def observer(prof: ProtocolProfile, endpoint: EndpointConfig, opts: dict[str, object],
             messages: Sequence[MessageDefinition]) -> None:
    opts["consumergroup"] = f"xrgw-observe-{endpoint.endpoint_id}-{uuid.uuid4().hex[:8]}"
    opts["autooffsetreset"] = opts.get("observeoffset") or "latest"
