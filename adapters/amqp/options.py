"""The AMQP 1.0 adapter's option spec: names, types, defaults, and the xRegistry endpoint
options it does not implement. `adapters/amqp.py` reads its options through it; the
config loader validates endpoints with it; docs/configuration.md shows it.
"""

from __future__ import annotations

from gateway.options import Option, OptionSpec, Unsupported, count, seconds
from gateway.spec.fields import Field

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
        Option(Field("terminus-durability", "enum",
                     "durability of the link's terminus (consumer: source, producer: "
                     "target). RabbitMQ 3.x declares the queue of a /queue/NAME address "
                     "from it: durable for configuration or unsettled-state, transient "
                     "(erased by a broker restart) for none, and refuses an attach whose "
                     "durability differs from an existing queue's. auto: configuration for "
                     "a /queue/ address, none otherwise (a durable terminus on /exchange/ or "
                     "/topic/ makes RabbitMQ leave a durable queue behind at every attach)",
                     default="auto",
                     choices=("auto", "none", "configuration", "unsettled-state")),
               xregistry=True),
        Option(Field("expiry-policy", "enum",
                     "when the broker may forget the link's terminus (AMQP 1.0 3.5.6; "
                     "RabbitMQ 3.x ignores it)", default="session-end",
                     choices=("link-detach", "session-end", "connection-close", "never")),
               xregistry=True),
        count("max_in_flight", 1000, "consumer: link credit = unsettled deliveries at most",
              high=1_000_000),
        Option(Field("nack_outcome", "enum",
                     "consumer, nack(retry=True): released, or modified (delivery-failed: "
                     "counts the attempt; not RabbitMQ 3.x)", default="released",
                     choices=("released", "modified")), side="consumer"),
        seconds("heartbeat", 30, "seconds of idle time before the peer is presumed dead"),
        seconds("connect_timeout", 10, "seconds for TCP + SASL + open + attach"),
        seconds("publish_timeout", 10, "producer: seconds to wait for the broker's "
                 "disposition", "producer"),
        seconds("reconnect_max", 10, "producer: longest backoff between reconnect attempts",
                 "producer"),
        Option(Field("allow_plain_without_tls", "bool",
                     "SASL PLAIN (a user name and password) over amqp:// to a host other "
                     "than loopback sends the password in clear text and is refused unless "
                     "this is true; use amqps:// or a tls block instead", default=False)),
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
        Unsupported("timeout", "use connect_timeout and publish_timeout"),
        Unsupported("sender-settle-mode", _AT_LEAST_ONCE),
        Unsupported("receiver-settle-mode", _AT_LEAST_ONCE),
    ),
)
