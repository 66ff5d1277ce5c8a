"""The NATS adapter's option spec: names, types, defaults. `adapters/nats.py` reads its
options through it; the config loader validates endpoints with it; docs/configuration.md
shows it. Every xRegistry NATS endpoint option is implemented.
"""

from __future__ import annotations

from gateway.config import Field
from gateway.options import Option, OptionSpec, Side


def _positive(value: object) -> tuple[str, str] | None:
    if isinstance(value, int) and value < 1:
        return f"must be at least 1, not {value}", "write a number such as 64"
    return None


def _seconds(name: str, default: float, description: str, side: Side = "both") -> Option:
    return Option(Field(name, "seconds", description, default=float(default)), side=side)


def _count(name: str, default: int, description: str) -> Option:
    return Option(Field(name, "int", description, default=default, check=_positive),
                  side="consumer")


_SUBJECT = Field("subject", "str", "a subject, wildcards allowed")
OPTIONS = OptionSpec(
    protocol="NATS",
    options=(
        Option(Field("subject", "str",
                     "producer: subject of records without a subject; consumer: subscribed "
                     "when neither subjectfilter nor the definitions give one",
                     example="orders.created"), xregistry=True),
        Option(Field("subjectfilter", "union",
                     "consumer: subjects to subscribe to, wildcards allowed (`a.*.c`, `a.>`); "
                     "default: derived from the definitions' subject templates ({x} -> *). "
                     "In JetStream mode the filter of a newly created consumer",
                     variants=(Field("subjectfilter", "str", "one subject"),
                               Field("subjectfilter", "list", "subjects", item=_SUBJECT))),
               side="consumer", xregistry=True, aliases=("subjects",)),
        Option(Field("queuegroup", "str",
                     "consumer: core queue group / JetStream deliver group, so that several "
                     "gateways share the messages"), side="consumer", xregistry=True),
        Option(Field("stream", "str", "consumer: consume this JetStream stream (JetStream "
                     "mode); absent = core subscriptions"), side="consumer"),
        Option(Field("durable", "str", "consumer, JetStream: durable consumer name, created "
                     "as a push consumer if missing (default from stream and subjects)"),
               side="consumer"),
        Option(Field("jetstream", "bool", "producer: publish through JetStream (wait for "
                     "the PubAck)", default=False), side="producer"),
        _count("max_in_flight", 64, "consumer: unsettled deliveries (JetStream: also the "
               "max_ack_pending of a created consumer)"),
        _seconds("ack_wait", 30, "consumer, JetStream: seconds until an unacked delivery is "
                 "redelivered (for a created consumer)", "consumer"),
        _seconds("nak_delay", 0, "consumer, JetStream: seconds before a nacked message comes "
                 "again (0 = at once)", "consumer"),
        _count("pending_msgs_limit", 65536, "consumer: messages nats-py buffers before "
               "dropping"),
        _count("pending_bytes_limit", 64 * 1024 * 1024, "consumer: bytes nats-py buffers "
               "before dropping"),
        _seconds("connect_timeout", 10, "seconds for the first connection"),
        _seconds("reconnect_wait", 1, "seconds between nats-py's reconnect attempts"),
        _seconds("publish_timeout", 10, "producer: seconds to wait for the flush / PubAck",
                 "producer"),
        _seconds("reconnect_max", 10, "producer: longest backoff between attempts to connect "
                 "when there is no client at all", "producer"),
        Option(Field("creds_file", "str", "a .creds file (user JWT + NKey seed); needs the "
                     "nkeys package; relative to the config file")),
        Option(Field("nkey_seed_file", "str", "a file holding a user NKey seed (SU...); needs "
                     "the nkeys package; relative to the config file")),
    ),
)
