"""The NATS adapter's option spec: names, types, defaults. `adapters/nats.py` reads its
options through it; the config loader validates endpoints with it; docs/configuration.md
shows it. Every xRegistry NATS endpoint option is implemented.
"""

from __future__ import annotations

from gateway.options import Option, OptionSpec, count, one_or_many, seconds
from gateway.spec.fields import Field

OPTIONS = OptionSpec(
    protocol="NATS",
    options=(
        Option(Field("subject", "str",
                     "producer: subject of records without a subject; consumer: subscribed "
                     "when neither subjectfilter nor the definitions give one",
                     example="orders.created"), xregistry=True),
        Option(one_or_many("subjectfilter",
                           "consumer: subjects to subscribe to, wildcards allowed (`a.*.c`, "
                           "`a.>`); default: derived from the definitions' subject templates "
                           "({x} -> *). In JetStream mode the filter of a newly created "
                           "consumer", "subject"),
               side="consumer", xregistry=True, aliases=("subjects",)),
        Option(Field("queuegroup", "str",
                     "consumer: core queue group / JetStream deliver group, so that several "
                     "gateways share the messages"), side="consumer", xregistry=True),
        Option(Field("stream", "str", "consumer: consume this JetStream stream (JetStream "
                     "mode); absent = core subscriptions"), side="consumer"),
        Option(Field("durable", "str", "consumer, JetStream: durable consumer name, created "
                     "as a push consumer if missing (default from stream and subjects)"),
               side="consumer"),
        Option(Field("observe", "bool", "consumer: shadow mode (`routes[].observe`): no "
                     "queue group; JetStream: an ephemeral consumer of new messages with ack "
                     "policy none instead of the durable", default=False), derived=True),
        Option(Field("jetstream", "bool", "producer: publish through JetStream (wait for "
                     "the PubAck)", default=False), side="producer"),
        count("max_in_flight", 4096, "consumer: unsettled deliveries (JetStream: also the "
               "max_ack_pending of a created consumer)"),
        seconds("ack_wait", 30, "consumer, JetStream: seconds until an unacked delivery is "
                 "redelivered (for a created consumer)", "consumer"),
        seconds("nak_delay", 0, "consumer, JetStream: seconds before a nacked message comes "
                 "again (0 = at once)", "consumer"),
        count("pending_msgs_limit", 65536, "consumer: messages nats-py buffers before "
               "dropping"),
        count("pending_bytes_limit", 64 * 1024 * 1024, "consumer: bytes nats-py buffers "
               "before dropping"),
        seconds("connect_timeout", 10, "seconds for the first connection"),
        seconds("reconnect_wait", 1, "seconds between nats-py's reconnect attempts"),
        seconds("publish_timeout", 10, "producer: seconds to wait for the flush / PubAck; "
                 "a core flush unanswered this long reconnects (the link is presumed dead)",
                 "producer"),
        seconds("reconnect_max", 10, "producer: longest backoff between attempts to connect "
                 "when there is no client at all", "producer"),
        Option(Field("creds_file", "str", "a .creds file (user JWT + NKey seed); read and "
                     "checked by xrgw validate; relative to the config file")),
        Option(Field("nkey_seed_file", "str", "a file holding a user NKey seed (SU...); "
                     "xrgw validate reads and checks it; relative to the config file")),
    ),
)
