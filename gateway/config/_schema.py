"""The gateway configuration spec: every key, its type, default, description and example.

Rules that need the loaded definitions (endpoint ids, usages, schemes) are not here but in
`_routes.py` and `_endpoints.py`; this spec covers what the YAML alone can tell.

`deadletter` is required: a gateway that silently logs undeliverable messages loses data
without anyone having decided that. `deadletter: log` states that decision explicitly.
"""

from __future__ import annotations

from gateway.config._addresses import accepted_forms
from gateway.envelope.partitioning import check_policy
from gateway.spec.fields import OPTIONAL, REQUIRED, Field

DEADLETTER_LOG = "log"
PORT_MAX = 65535


def _positive(value: object) -> tuple[str, str] | None:
    if isinstance(value, int) and value <= 0:
        return f"must be greater than 0, not {value}", "use a positive integer such as 256"
    return None


def _not_negative(value: object) -> tuple[str, str] | None:
    if isinstance(value, int) and value < 0:
        return f"must be 0 or more, not {value}", "use 0 (no limit) or a count such as 10"
    return None


def _not_blank(value: object) -> tuple[str, str] | None:
    # An empty path would mean "the config's own directory": never what was meant.
    if isinstance(value, str) and not value.strip():
        return "the path is empty", "write a file, directory or registry URL"
    return None


def split_hostport(text: str) -> tuple[str, int] | None:
    """`host:port` or `[v6]:port` -> (host, port), None when malformed."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > PORT_MAX:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def _http_url(value: object) -> tuple[str, str] | None:
    if isinstance(value, str) and not value.lower().startswith(("http://", "https://")):
        return (f"'{value}' is not an http:// or https:// URL",
                "write the registry's base URL, e.g. https://registry.example.com")
    return None


#: JSON Schema of `_one_password`: not both of a value and its file.
_ONE_PASSWORD_SCHEMA = {"not": {"anyOf": [{"required": ["password", "password_file"]},
                                          {"required": ["username", "username_file"]}]}}
_POSITIVE_SCHEMA = {"minimum": 1}


def _positive_seconds(value: object) -> tuple[str, str] | None:
    if isinstance(value, (int, float)) and value <= 0:
        return f"must be longer than 0, not {value}", "use a duration such as 5s"
    return None


def _hostport(value: object) -> tuple[str, str] | None:
    if isinstance(value, str) and split_hostport(value) is None:
        return (f"'{value}' is not host:port",
                "write host:port, e.g. 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:9464")
    return None


def _distinct_listeners(value: object) -> tuple[str, str] | None:
    if not isinstance(value, dict):
        return None
    listen, health = value.get("listen"), value.get("health_listen")
    # Port 0 (any free port, as tests use) never clashes.
    if health == listen and not str(listen).endswith(":0"):
        return ("health_listen is the same address as listen",
                "give health_listen another port (e.g. 0.0.0.0:9465), or leave it out")
    return None


def _partition_key(value: object) -> tuple[str, str] | None:
    problem = check_policy(value) if isinstance(value, str) else None
    if problem is not None:
        return problem, "write source, none, or a template such as {storeid}"
    return None


def _backoffs(value: object) -> tuple[str, str] | None:
    if isinstance(value, dict):
        low, high = value.get("initial_backoff"), value.get("max_backoff")
        if isinstance(low, float) and isinstance(high, float) and high < low:
            return ("max_backoff is shorter than initial_backoff",
                    "make max_backoff at least as long as initial_backoff")
    return None


def _one_password(value: object) -> tuple[str, str] | None:
    if isinstance(value, dict):
        for key in ("username", "password"):
            if value.get(key) is not None and value.get(f"{key}_file") is not None:
                return (f"both {key} and {key}_file are given",
                        f"keep one: {key}_file for a secret file, {key} for a value")
    return None


_URL_SOURCE = Field(
    "registry", "object", "An xRegistry registry, polled for changes.",
    fields=(
        Field("url", "str", "Registry base URL (read via GET <url>/export).", REQUIRED,
              "https://registry.example.com", check=_http_url,
              schema={"pattern": "^[Hh][Tt][Tt][Pp][Ss]?://"}),
        Field("poll", "duration", "How often to poll; changes swap in atomically.", 30.0, "30s"),
        Field("headers", "map", "HTTP headers for the registry requests (e.g. Authorization).",
              OPTIONAL, {"Authorization": "Bearer ${REGISTRY_TOKEN}"},
              item=Field("header", "str", "Header value.", secret=True), advanced=True),
        Field("ca_file", "str", "CA bundle (PEM) that verifies an https registry; default: "
              "the system CAs. Relative paths start at the config file's directory.",
              OPTIONAL, "registry-ca.pem", advanced=True),
    ),
)

_DEFINITIONS = Field(
    "definitions", "list",
    "xRegistry documents: files, directories (not recursive) or registries. Relative paths "
    "are resolved against the config file's directory.",
    REQUIRED, ["store.xreg.json", "https://registry.example.com",
               {"url": "https://registry.example.com", "poll": "30s"}],
    item=Field("source", "union", "A file/directory path or a registry.",
               variants=(Field("path", "str", "File or directory path, or a registry's "
                               "base URL (http:// or https://, polled every 30s; the "
                               "mapping form sets poll, headers and ca_file).",
                               check=_not_blank, schema={"minLength": 1}),
                         _URL_SOURCE)),
    non_empty=True,
)

_RETRY = Field(
    "retry", "object", "Retries of a send that failed for a transient reason (broker "
    "unreachable, timeout, HTTP 5xx/429). A permanent rejection is dead-lettered at once, a "
    "message over an output's size limit as too-large before it is sent.",
    {},
    fields=(
        Field("attempts", "int", "Sends in total, the first included, before a message whose "
              "sends keep failing transiently is dead-lettered as undeliverable; 0 (the "
              "default): no limit, the route holds the message and retries until the output "
              "is back (back-pressure: intake stops, the route reports itself stalled after "
              "stall_after). Why no limit: a rolling broker restart, a leader election or a "
              "cluster upgrade takes seconds to minutes, and a budget shorter than that "
              "dead-letters good messages that then need a re-drive.", 0, 10,
              check=_not_negative, schema={"minimum": 0}),
        Field("initial_backoff", "duration", "Wait before the first retry; doubles per retry.",
              0.2, "200ms"),
        Field("max_backoff", "duration", "Longest wait between retries; a receiver's "
              "Retry-After (HTTP) lengthens a wait up to this.", 10.0, "10s"),
    ),
    check=_backoffs, advanced=True,
)

_ROUTE = Field(
    "route", "object", "One consumer endpoint feeding one or more producer endpoints.",
    fields=(
        Field("from", "str", "Id of an xRegistry endpoint with usage consumer or subscriber.",
              REQUIRED, "store-mqtt"),
        Field("to", "list", "Ids of xRegistry endpoints with usage producer.", REQUIRED,
              ["events-kafka"], item=Field("endpoint", "str", "Producer endpoint id."),
              non_empty=True),
        Field("mode", "enum", "CloudEvents binding mode of the outputs.", "binary", "structured",
              choices=("binary", "structured")),
        Field("messagegroups", "list",
              "Message groups to match; default: the consumer endpoint's groups and messages.",
              OPTIONAL, ["store"], item=Field("group", "str", "Message group id.")),
        Field("deliver", "enum",
              "cloudevent renders a CloudEvent; native renders a native message from the "
              "producer endpoint's message definitions.", "cloudevent", "native",
              choices=("cloudevent", "native")),
        Field("ambiguity", "enum",
              "When several definitions match one message: take the first declared, or "
              "dead-letter the message.", "first", "deadletter",
              choices=("first", "deadletter"), advanced=True),
        Field("schema", "enum",
              "Payload schemas of the definitions (dataschema, dataschemauri): off ignores "
              "them; tiebreak lets them decide between equally specific definitions; "
              "enforce also dead-letters a body that fails its definition's schema (reason "
              "invalid-data).", "tiebreak", "enforce",
              choices=("off", "tiebreak", "enforce")),
        Field("partitionkey", "str",
              "Key of records sent to outputs that partition by key (Kafka) when the event "
              "has no partitionkey: source (the source's unit of order: MQTT topic, NATS "
              "subject, Kafka key, AMQP group-id or subject), none (keyless), or a template "
              "filled from the match context such as {storeid}.", "source", "{storeid}",
              check=_partition_key),
        Field("inflight", "int", "Messages read and not yet settled on this route (the "
              "window: up to four batches of a quarter of it are in flight at once; the "
              "source adapter's `max_in_flight` bounds it too).", 4096, 4096,
              check=_positive, schema=_POSITIVE_SCHEMA, advanced=True),
        _RETRY,
        Field("stall_after", "duration",
              "How long trouble may last before the route reports itself stalled (not ready "
              "in /readyz, xrgw_route_stalled{route,cause} = 1, one log line with the error): "
              "an output failing, the dead letter held, reads from the source failing, or "
              "messages in flight with none settled. Shorter trouble (a reconnect, a broker "
              "restart) is ordinary back-pressure.", 30.0, "30s",
              check=_positive_seconds, advanced=True),
        Field("reply", "bool",
              "Request-reply: send each message as a request to the (one) output and carry "
              "its answer back to the sender (HTTP response; NATS reply subject; MQTT 5 "
              "response topic with the correlation data; AMQP reply-to with the "
              "correlation-id; Kafka reply-topic header with the correlation header). "
              "Needs an HTTP, core NATS, MQTT 5, AMQP 1.0 or Kafka source and output (a "
              "Kafka output its reply_topic, an AMQP output its reply_address); see "
              "docs/request-reply.md.", False, True),
        Field("reply_timeout", "duration",
              "Reply routes: how long a request waits for its answer; then HTTP senders "
              "get 504 and the request is dead-lettered as no-reply (not sent again).",
              5.0, "5s", check=_positive_seconds),
        Field("reply_definitions", "list",
              "Reply routes: the message definitions an answer must conform to, as message "
              "group ids (every definition of the group) or definition ids (group/message); "
              "matched as requests are. A conforming answer is rendered for the sender by "
              "the definition of the sender's protocol paired with the one that matched "
              "(HTTP status and headers, MQTT 5 properties, NATS headers); any other is "
              "dead-lettered as nonconforming-reply and the sender is told of a failure. "
              "Default: none (every answer is passed on as it came).", [],
              ["quotes.replies"], item=Field("definition", "str",
                                             "Message group id or group/message id.")),
        Field("reply_errors", "enum",
              "Reply routes: what a NATS or MQTT 5 sender (no status to get) is told when "
              "no conforming answer came (timeout, non-conforming answer, request not "
              "sent): none (its own timeout tells it) or problem (a problem CloudEvent on "
              "its reply subject / response topic). HTTP senders always get 504 / 502 "
              "with an RFC 9457 problem.", "none", "problem", choices=("none", "problem")),
        Field("observe", "bool", "Shadow mode: consume, match and render as usual, publish "
              "and dead-letter nothing, and take nothing from the endpoint's real consumers "
              "(an observing subscription of its own; see docs/operations.md). The "
              "conformance report (`/conformance`, `xrgw report`) shows what the catalog "
              "catches. `xrgw run --observe` observes on every route.", False, True),
        Field("redact", "list", "Field paths whose values the conformance report, the "
              "status page, log lines and dead-letter explanations never show (samples, "
              "failed checks, `explain`, details): `data.` paths into the body, else record "
              "fields (`topic_name`, `headers.x-api-key`); `*` matches any key. The "
              "`authorization`, `proxy-authorization`, `cookie` and `set-cookie` headers "
              "are always hidden.", [],
              ["data.card.number", "headers.x-api-key"],
              item=Field("path", "str", "Dot-separated field path.")),
    ),
)

_TLS = Field(
    "tls", "object", "TLS settings; relative paths are resolved against the config "
    "file's directory. A client (every producer, and consumers of a broker) verifies the "
    "server with ca_file and presents cert_file/key_file; a listener (the HTTP ingress) "
    "serves cert_file/key_file as its server certificate and, with ca_file, requires "
    "client certificates signed by that CA (mutual TLS).", OPTIONAL,
    fields=(
        Field("ca_file", "str", "Client: CA bundle (PEM) that verifies the server (default: "
              "the system CAs). HTTP ingress: the CA client certificates must be signed "
              "by (mutual TLS).", OPTIONAL, "ca.pem"),
        Field("cert_file", "str", "Client: client certificate (PEM). HTTP ingress: the "
              "server certificate (PEM), required for https://.", OPTIONAL, "client.pem"),
        Field("key_file", "str", "Private key (PEM) of cert_file.", OPTIONAL, "client.key"),
        Field("insecure", "bool", "Client: skip server verification (tests only).", False,
              False),
    ),
)

_OVERRIDE = Field(
    "endpoint", "object", "Deployment settings for one endpoint of the definitions.",
    fields=(
        Field("uri", "str",
              "Address, replacing the definition's protocoloptions.endpoints: "
              f"{accepted_forms()}.", OPTIONAL, "mqtt://127.0.0.1:1883"),
        Field("username", "str", "User name (Kafka: turns SASL on; HTTP ingress: with "
              "password, HTTP Basic is required).", OPTIONAL, "${MQTT_USER}"),
        Field("password", "str", "Password or token; prefer password_file. HTTP ingress: "
              "callers must send it (Authorization: Bearer, or Basic with username).",
              OPTIONAL, "${MQTT_PASSWORD}", secret=True),
        Field("username_file", "str", "File whose content (stripped) is the user name.",
              OPTIONAL, "/run/secrets/mqtt_user"),
        Field("password_file", "str", "File whose content (stripped) is the password.",
              OPTIONAL, "/run/secrets/mqtt"),
        Field("client_id", "str", "Client id (MQTT) or client name.", OPTIONAL, "xrgw-1"),
        _TLS,
        Field("options", "map", "Merged over the endpoint's protocoloptions (override wins); "
              "checked against the adapter's options, see Endpoint options per protocol.",
              OPTIONAL, {"qos": 1}, item=Field("option", "any", "Protocol option value.")),
    ),
    check=_one_password, schema=_ONE_PASSWORD_SCHEMA,
)

CONFIG_SPEC = Field(
    "config", "object", "The xrgw gateway configuration.",
    fields=(
        _DEFINITIONS,
        Field("routes", "list", "What flows from where to where.", REQUIRED,
              item=_ROUTE, non_empty=True),
        Field("deadletter", "str",
              "Producer endpoint for messages that cannot be delivered, or `log` to only log "
              "and count them (an explicit choice to lose them; the source is told: "
              "nack never-again, so an HTTP sender gets 400 with the reason, not 202).",
              REQUIRED, "dlq-kafka",
              hint="add deadletter: <id of a producer endpoint>, or deadletter: log to only "
                   "log and count messages that cannot be delivered"),
        Field("admin", "object", "The admin HTTP server: /metrics, /healthz, /readyz, and "
              "the pages with message samples (/conformance, /, the /tap stream); see "
              "docs/operations.md.",
              {},
              fields=(Field("listen", "str", "host:port to listen on.", "127.0.0.1:9464",
                            "0.0.0.0:9464", check=_hostport,
                            schema={"pattern": r"^.+:[0-9]{1,5}$"}),
                      Field("health_listen", "str",
                            "host:port of a second listener that serves only /healthz and "
                            "/readyz, for HTTP probes from outside the pod while `listen` "
                            "stays on loopback (sidecars); default: none.", OPTIONAL,
                            "0.0.0.0:9465", check=_hostport,
                            schema={"pattern": r"^.+:[0-9]{1,5}$"}, advanced=True),
                      Field("readiness", "enum",
                            "What /readyz requires: all (every endpoint of every route "
                            "connected and every route running), sources (each route's "
                            "source connected and every route running; a down output holds "
                            "messages at the source, the HTTP ingress answers 503), none "
                            "(ready once started: for a sidecar, whose pod must not leave "
                            "its Service because a remote broker is down). Liveness "
                            "(/healthz) is always about the process only.", "all",
                            "sources", choices=("all", "sources", "none")),
                      Field("pages", "enum",
                            "Where the pages that show message samples (`/conformance`, the "
                            "status page `/`, the `xrgw tap` stream `/tap`) are served: "
                            "`auto` on `listen` when it is a "
                            "loopback address, else only on `pages_listen`; `listen` on "
                            "`listen` whatever its address (opt-in); `off` nowhere. "
                            "/metrics, /healthz and /readyz are always on `listen`.",
                            "auto", "listen", choices=("auto", "listen", "off")),
                      Field("pages_listen", "str",
                            "host:port of the separate listener of the sample-bearing pages "
                            "when `listen` is not on loopback (`pages: auto`); reach it with "
                            "`kubectl port-forward`.", "127.0.0.1:9466", "127.0.0.1:9466",
                            check=_hostport, schema={"pattern": r"^.+:[0-9]{1,5}$"},
                            advanced=True),
                      Field("token_file", "str",
                            "File holding a bearer token the sample-bearing pages then "
                            "require (`Authorization: Bearer <token>`, compared in constant "
                            "time; `xrgw report --token-file`, `xrgw tap --token-file`). "
                            "Default: none.", OPTIONAL,
                            "/run/secrets/xrgw/admin-token", advanced=True)),
              check=_distinct_listeners),
        Field("schema_fetch", "object",
              "Where schema documents at URLs (a definition's `dataschemauri`, a schema "
              "version's `schemaurl`) may be fetched from, for routes with `schema: "
              "enforce`. A registry-served document reaches only its registry's origin and "
              "the `allow` list, never `file://`; documents read from local files reach "
              "any http(s) URL and local files. Redirects stay on the same origin.", {},
              fields=(
                  Field("allow", "list", "URL prefixes (scheme://host[:port]/path) that "
                        "any document may fetch schemas from.", [],
                        ["https://schemas.example.com/"],
                        item=Field("prefix", "str", "An http(s) URL prefix.")),
                  Field("proxy", "str", "HTTP proxy for schema fetches; default: none "
                        "(the HTTP_PROXY / HTTPS_PROXY environment is ignored).", OPTIONAL,
                        "http://proxy.internal:3128"),
                  Field("timeout", "duration", "Longest time one fetch may take, start to "
                        "end (a slow answer is cut off).", 10.0, "10s"),
              ), advanced=True),
        Field("log", "object", "Logging.", {},
              fields=(
                  Field("level", "enum", "Lowest level logged.", "info", "debug",
                        choices=("debug", "info", "warning", "error")),
                  Field("format", "enum", "Line format.", "json", "text", choices=("json", "text")),
              )),
        Field("shutdown", "object", "Graceful shutdown.", {},
              fields=(Field("grace", "duration", "Time to finish in-flight messages.", 30.0,
                            "30s"),)),
        Field("endpoints", "map", "Deployment overrides, keyed by endpoint id.", OPTIONAL,
              item=_OVERRIDE),
    ),
)
