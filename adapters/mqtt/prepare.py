"""What the definitions imply for an MQTT endpoint: the topic filters a consumer
subscribes to (`{x}` -> `+`, unless `topicfilter` is given; shared subscriptions), the
protocol version (one adapter speaks 3.1.1 and 5.0), and how an observer differs."""

from __future__ import annotations

from adapters.descriptor import filters, strings
from gateway.ports import AdapterEndpoint
from gateway.protocols import ProtocolProfile


def version(prof: ProtocolProfile, endpoint: AdapterEndpoint, opts: dict[str, object]) -> None:
    opts["protocol"] = prof.version  # one adapter speaks 3.1.1 and 5.0


def subscription(prof: ProtocolProfile, endpoint: AdapterEndpoint,
                 opts: dict[str, object]) -> None:
    topic_filters = strings(opts.get("topicfilter")) or filters(
        endpoint, "+") or strings(opts.get("topic"))
    group = opts.get("sharedsubscriptiongroup")
    if group:
        topic_filters = [f"$share/{group}/{f}" for f in topic_filters]
    opts["topicfilter"] = topic_filters
    version(prof, endpoint, opts)


def observer(prof: ProtocolProfile, endpoint: AdapterEndpoint, opts: dict[str, object]) -> None:
    opts.pop("sharedsubscriptiongroup", None)  # a plain subscription gets every message
    opts["cleanstart"] = True
    opts["sessionexpiryinterval"] = 0
