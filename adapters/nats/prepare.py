"""What the definitions imply for a NATS endpoint: the subject filters a consumer
subscribes to (`{x}` -> `*`, unless `subjectfilter` is given), and how an observer
differs (no queue group: it gets a copy of every message)."""

from __future__ import annotations

from collections.abc import Sequence

from adapters.descriptor import filters, strings
from gateway.config import EndpointConfig
from gateway.definitions.model import MessageDefinition
from gateway.protocols import ProtocolProfile


def subscription(prof: ProtocolProfile, endpoint: EndpointConfig,
                 opts: dict[str, object], messages: Sequence[MessageDefinition]) -> None:
    opts["subjectfilter"] = strings(opts.get("subjectfilter")) or strings(
        opts.get("subject")) or filters(prof, messages, "*")


def observer(prof: ProtocolProfile, endpoint: EndpointConfig, opts: dict[str, object],
             messages: Sequence[MessageDefinition]) -> None:
    opts.pop("queuegroup", None)  # a queue group member would share, not copy
    opts["observe"] = True
