"""The MQTT adapter's option spec (3.1.1 and 5.0): names, types, defaults, and the
xRegistry endpoint options it does not implement. `adapters/mqtt.py` reads its options
through it; the config loader validates endpoints with it; docs/configuration.md shows it.
"""

from __future__ import annotations

from gateway.options import Option, OptionSpec, Unsupported, count, one_or_many, seconds
from gateway.spec.fields import Field


def _qos(value: object) -> tuple[str, str] | None:
    if isinstance(value, int) and value not in (0, 1, 2):
        return f"QoS must be 0, 1 or 2, not {value}", "write qos: 0, 1 or 2"
    return None


def _retain_handling(value: object) -> tuple[str, str] | None:
    if isinstance(value, int) and value not in (0, 1, 2):
        return (f"retain handling must be 0, 1 or 2, not {value}",
                "0: send retained messages at subscribe, 1: only for a new subscription, "
                "2: never")
    return None


#: The MQTT protocol's largest packet: a 4-byte remaining length (268,435,455) plus the
#: fixed header's 5 bytes.
MAX_PACKET_SIZE = 268_435_460

OPTIONS = OptionSpec(
    protocol="MQTT",
    options=(
        Option(Field("topic", "str",
                     "producer: topic of records without a topic_name; consumer: subscribed "
                     "when neither topicfilter nor the definitions give a filter",
                     example="devices/alerts"), xregistry=True),
        Option(one_or_many("topicfilter",
                           "consumer: topic filters to subscribe to (default: derived from "
                           "the definitions' topic_name templates, {x} -> +)", "filter",
                           example="store/+/sales"),
               side="consumer", xregistry=True, aliases=("filters",)),
        Option(Field("qos", "int",
                     "consumer: subscription QoS; producer: QoS of records without a qos "
                     "(xrgw defaults to 1, at-least-once; the spec's default is 0)",
                     default=1, check=_qos), xregistry=True),
        Option(Field("retain", "bool", "producer: retain flag of records without a retain",
                     default=False), side="producer", xregistry=True),
        Option(Field("cleanstart", "bool",
                     "consumer: start a clean session (MQTT 3.1.1: clean session). Off by "
                     "default: the broker keeps the session and redelivers unacknowledged "
                     "messages after a restart; on, messages sent while the gateway is away "
                     "are lost to it. MQTT 3.1.1 with a shared subscription: on by default "
                     "(a 3.1.1 session never expires, and the broker keeps queueing a dead "
                     "member's share into it)", default=False),
               side="consumer", xregistry=True, aliases=("cleansession",)),
        Option(Field("sessionexpiryinterval", "int",
                     "consumer, 5.0: seconds the broker keeps the session after a disconnect. "
                     "With a shared subscription the default is 0: the session ends with the "
                     "connection, so the broker stops giving a dead member new messages and "
                     "(where it can) hands its unacknowledged ones to the others; set it "
                     "only when each replica comes back under its own client id "
                     "(docs/deployment.md, Scaling)", default=86400),
               side="consumer", xregistry=True, aliases=("session_expiry",)),
        Option(Field("sharedsubscriptiongroup", "str",
                     "consumer: subscribe as $share/<group>/<filter> so that several "
                     "gateways share the messages"), side="consumer", xregistry=True),
        Option(Field("retainaspublished", "bool",
                     "consumer, 5.0: keep the retain flag of forwarded messages as published "
                     "(off: the broker clears it on live messages)", default=False),
               side="consumer", xregistry=True),
        Option(Field("retainhandling", "int",
                     "consumer, 5.0: retained messages at subscribe: 0 always, 1 only for a "
                     "new subscription, 2 never", default=0, check=_retain_handling),
               side="consumer", xregistry=True),
        Option(Field("protocol", "enum", "the MQTT version, from the endpoint's protocol",
                     default="5.0", choices=("5.0", "3.1.1")), derived=True),
        seconds("keepalive", 30, "seconds between keepalive pings"),
        count("max_in_flight", 1000,
              "consumer: unsettled deliveries (5.0: also the Receive Maximum)", high=65535),
        seconds("connect_timeout", 10, "seconds for TCP connect + CONNACK"),
        seconds("publish_timeout", 10, "producer: seconds to wait for PUBACK/PUBCOMP",
                 "producer"),
        seconds("reconnect_max", 10, "producer: longest backoff between reconnect attempts",
                 "producer"),
        count("max_packet_size", MAX_PACKET_SIZE,
              "producer: the largest PUBLISH packet the broker takes, in bytes; a larger "
              "message is dead-lettered as too-large before it is sent. An MQTT 5 broker's "
              "own Maximum Packet Size (CONNACK) lowers it; set it for a 3.1.1 broker with a "
              "limit (mosquitto's message_size_limit), which cannot say so",
              side="producer", high=MAX_PACKET_SIZE),
    ),
    unsupported=(
        Unsupported("willtopic", "xrgw publishes no will message (a will is rendered from a "
                    "message definition, willmessage, which the gateway does not do yet)"),
        Unsupported("willmessage", "xrgw publishes no will message"),
        Unsupported("nolocal", "xrgw subscribes and publishes on separate connections, so "
                    "none of its own messages can come back on a subscription",
                    side="consumer"),
    ),
)
