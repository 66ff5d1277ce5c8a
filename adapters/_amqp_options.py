"""The AMQP 1.0 adapter's option spec: names, types, defaults, and the xRegistry endpoint
options it does not implement. `adapters/amqp.py` reads its options through it; the
config loader validates endpoints with it; docs/configuration.md shows it.
"""

from __future__ import annotations

from gateway.config import Field
from gateway.options import Option, OptionSpec, Side, Unsupported


def _in_flight(value: object) -> tuple[str, str] | None:
    if isinstance(value, int) and not 1 <= value <= 1_000_000:
        return f"must be 1..1000000, not {value}", "write a number such as 64"
    return None


def _seconds(name: str, default: float, description: str, side: Side = "both") -> Option:
    return Option(Field(name, "seconds", description, default=float(default)), side=side)


_AT_LEAST_ONCE = ("xrgw always links at-least-once (sender unsettled, receiver settles "
                  "first); other settle modes would lose or duplicate messages silently")
OPTIONS = OptionSpec(
    protocol="AMQP/1.0",
    options=(
        Option(Field("node", "str",
                     "consumer: source address (required); producer: target of records "
                     "without properties.to. RabbitMQ 3.x: /queue/q, /exchange/x/key, "
                     "/topic/key; RabbitMQ 4.x: /queues/q (default: the URI's path)",
                     example="/queue/orders"), xregistry=True, aliases=("address",)),
        Option(Field("durable", "bool",
                     "producer: header.durable of records without one (xrgw defaults to "
                     "true; the spec's default is false)", default=True),
               side="producer", xregistry=True),
        Option(Field("max_in_flight", "int", "consumer: link credit = unsettled deliveries "
                     "at most", default=64, check=_in_flight), side="consumer"),
        Option(Field("nack_outcome", "enum",
                     "consumer, nack(retry=True): released, or modified (delivery-failed: "
                     "counts the attempt; not RabbitMQ 3.x)", default="released",
                     choices=("released", "modified")), side="consumer"),
        _seconds("heartbeat", 30, "seconds of idle time before the peer is presumed dead"),
        _seconds("connect_timeout", 10, "seconds for TCP + SASL + open + attach"),
        _seconds("publish_timeout", 10, "producer: seconds to wait for the broker's "
                 "disposition", "producer"),
        _seconds("reconnect_max", 10, "producer: longest backoff between reconnect attempts",
                 "producer"),
    ),
    unsupported=(
        Unsupported("link-properties", "xrgw sends no link properties yet"),
        Unsupported("connection-properties", "xrgw sends no connection properties yet"),
        Unsupported("distribution-mode", "xrgw consumes with the broker's default "
                    "distribution mode (move); copy is not offered yet", side="consumer"),
        Unsupported("capabilities", "xrgw asks for no link capabilities"),
        Unsupported("source-filters", "xrgw attaches no source filters; the message "
                    "definitions select messages", side="consumer"),
        Unsupported("dynamic", "xrgw attaches to a named node (node), not a dynamic one"),
        Unsupported("terminus-durability", "xrgw's links use the broker's default terminus "
                    "durability"),
        Unsupported("expiry-policy", "xrgw's links use the broker's default expiry policy"),
        Unsupported("timeout", "use connect_timeout and publish_timeout"),
        Unsupported("sender-settle-mode", _AT_LEAST_ONCE),
        Unsupported("receiver-settle-mode", _AT_LEAST_ONCE),
    ),
)
