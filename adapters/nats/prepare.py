"""What the definitions imply for a NATS endpoint: the subject filters a consumer
subscribes to (`{x}` -> `*`, unless `subjectfilter` is given), and how an observer
differs (no queue group: it gets a copy of every message)."""

from __future__ import annotations

from adapters.descriptor import filters, strings
from gateway.ports import AdapterEndpoint
from gateway.protocols import ProtocolProfile


def subscription(prof: ProtocolProfile, endpoint: AdapterEndpoint,
                 opts: dict[str, object]) -> None:
    opts["subjectfilter"] = strings(opts.get("subjectfilter")) or strings(
        opts.get("subject")) or filters(endpoint, "*")


def observer(prof: ProtocolProfile, endpoint: AdapterEndpoint, opts: dict[str, object]) -> None:
    opts.pop("queuegroup", None)  # a queue group member would share, not copy
    opts["observe"] = True
