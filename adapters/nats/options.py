"""The NATS adapter's option spec: names, types, defaults. `adapters/nats/` reads its
options through it; the config loader validates endpoints with it; docs/configuration.md
shows it. Every xRegistry NATS endpoint option is implemented.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from adapters.nats.credentials import check_creds_file, check_seed_file
from gateway.ports import EndpointSettings
from gateway.ports.options import Field, Option, OptionSpec, count, extend, one_or_many, seconds
from gateway.ports.schemes import check_scheme
from gateway.ports.tls import client_context
from gateway.protocols import NATS, profile

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
        # Twice a route's default window (`routes[].inflight`, 4096): with a
        # max_ack_pending only as large as the window, the server stopped whenever the
        # route held a full window and sent the next messages only as each batch was
        # acked, in small steps; with room for one window more it sends ahead into the
        # buffer. `../shared/bench` nats-kafka, 6 and 8 reps (bench/README.md): the NATS
        # server's CPU per message 3.3 -> 1.6 and 2.9 -> 2.0 µs (a plain bridge's: 2.1 and
        # 2.0, with a window of 10,000).
        count("max_in_flight", 8192, "consumer: unsettled deliveries (JetStream: also the "
               "max_ack_pending of a created consumer); keep it above the route's "
               "`inflight`, so that the server sends ahead while the route waits on its "
               "oldest batch"),
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


@OPTIONS.typed
@dataclass(frozen=True)
class NatsValues:
    """The options as read (`OPTIONS.read_into`), one field per option of the spec."""

    subject: str | None
    subjectfilter: str | list[str] | None
    queuegroup: str | None
    stream: str | None
    durable: str | None
    observe: bool
    jetstream: bool
    max_in_flight: int
    ack_wait: float
    nak_delay: float
    pending_msgs_limit: int
    pending_bytes_limit: int
    connect_timeout: float
    reconnect_wait: float
    publish_timeout: float
    reconnect_max: float
    creds_file: str | None
    nkey_seed_file: str | None



_URIS = profile(NATS).endpoint.uris


@dataclass(frozen=True)
class NatsOptions(NatsValues):
    """The adapter's settings: the options as read, and what it derives from them and
    from the endpoint's address."""

    servers: tuple[str, ...]
    subjects: tuple[str, ...]
    tls: ssl.SSLContext | None

    @classmethod
    def parse(cls, settings: EndpointSettings) -> NatsOptions:
        """Read the options (`adapters/nats/options.py`); raises ValueError naming the
        bad one."""
        servers = tuple(s.strip() for s in settings.uri.split(",") if s.strip())
        schemes = {urlsplit(server).scheme for server in servers}
        for scheme in sorted(schemes):
            check_scheme(scheme, _URIS)
        secure_schemes = {s for s in schemes if _URIS.is_tls(s)}
        if secure_schemes and secure_schemes != schemes:
            raise ValueError("uri: mixes tls:// and nats:// servers; use tls:// for all")
        secure = bool(secure_schemes) or settings.tls is not None
        opts = OPTIONS.read_into(NatsValues, settings.options)
        for name in ("creds_file", "nkey_seed_file", "stream", "durable", "queuegroup"):
            if getattr(opts, name) == "":
                raise ValueError(f"{name}: expected a non-empty string, got ''")
        # Read and checked as the client will sign with them (also by `xrgw validate`).
        if opts.creds_file is not None:
            check_creds_file(opts.creds_file)
        if opts.nkey_seed_file is not None:
            check_seed_file(opts.nkey_seed_file)
        raw_subjects = opts.subjectfilter or ()
        return extend(
            cls, opts,
            servers=servers or ("nats://127.0.0.1:4222",),
            subjects=(raw_subjects,) if isinstance(raw_subjects, str) else tuple(raw_subjects),
            jetstream=opts.jetstream or opts.stream is not None,
            tls=client_context(settings.tls) if secure else None,
        )
