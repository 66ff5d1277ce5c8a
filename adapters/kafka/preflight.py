"""`validate --connect` for Kafka: the topics the endpoint names exist."""

from __future__ import annotations

from adapters._preflight import Finding, listed
from gateway.ports import AdapterEndpoint, Producer


async def kafka_topics(producer: Producer, endpoint: AdapterEndpoint) -> list[Finding]:
    """The Kafka topics the endpoint names exist (the producer's `topic`, a consumer's
    `topics`); a missing one is a warning: the broker may create it on first use
    (auto.create.topics.enable), or the route will wait for it."""
    client = getattr(getattr(producer, "_client", None), "client", None)
    opts = getattr(producer, "_opts", None)
    named = {str(t) for t in (getattr(opts, "topic", None),
                              *listed(endpoint.options.get("topics"))) if t}
    if client is None or not named:
        return []
    cluster = await client.fetch_all_metadata()
    existing = set(cluster.topics())
    out = []
    for topic in sorted(named):
        if topic in existing:
            out.append(Finding("destination", "ok", f"topic {topic} exists"))
        else:
            out.append(Finding("destination", "warning",
                               f"topic {topic} does not exist; it is created on first use "
                               "only if the broker auto-creates topics",
                               f"create the topic {topic}, or check the topic name"))
    return out
