"""What the definitions imply for a Kafka endpoint: the topics a consumer reads (the
messages' fixed topics unless `topics` is given), its default group, and how an
observer differs (a group of its own, starting at the end)."""

from __future__ import annotations

import uuid

from adapters.descriptor import strings
from gateway.ports import AdapterEndpoint
from gateway.protocols import ProtocolProfile


def subscription(prof: ProtocolProfile, endpoint: AdapterEndpoint,
                 opts: dict[str, object]) -> None:
    topics = strings(opts.get("topics")) or strings(opts.get("topic")) or [
        a.text for a in endpoint.addresses if a.fixed]
    opts["topics"] = list(dict.fromkeys(topics))
    opts.setdefault("consumergroup", f"xrgw-{endpoint.endpoint_id}")


def observer(prof: ProtocolProfile, endpoint: AdapterEndpoint, opts: dict[str, object]) -> None:
    opts["consumergroup"] = f"xrgw-observe-{endpoint.endpoint_id}-{uuid.uuid4().hex[:8]}"
    opts["autooffsetreset"] = opts.get("observeoffset") or "latest"
