"""HTTP: requests addressed by path; header names ignore case; path and query arrive
percent-encoded; one request may carry a batch of CloudEvents."""

from __future__ import annotations

from gateway.protocols.profile import (
    DefinitionRules,
    EndpointRules,
    Exclusion,
    FieldRef,
    FieldSpec,
    Identity,
    IdentityPart,
    Metadata,
    Observing,
    ProtocolProfile,
    RequestReply,
    Spelling,
    UriSchemes,
    ValueFormat,
)

HTTP = "HTTP"

_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z"  # RFC 9110 token
_METHOD = ValueFormat(_TOKEN, "an HTTP method", "write a method token such as GET, POST or PUT")
_HEADER_NAME = ValueFormat(_TOKEN, "an HTTP header name",
                           "use a token: letters, digits and -, e.g. Content-Type")
_STATUS = ValueFormat(r"[1-5][0-9][0-9]\Z", "an HTTP status code",
                      'write a three-digit code between 100 and 599, e.g. "200"')

HTTP_OBSERVING = Observing(
    "ingress answers 202 Accepted and forwards nothing")

HTTP_PROFILE = ProtocolProfile(
    name=HTTP,
    family=HTTP,
    version="",
    spelling=Spelling((HTTP, "HTTPS")),
    definitions=DefinitionRules(
        (
            FieldSpec("path", "scalar", "uritemplate"),
            FieldSpec("method", "scalar", "string", value_format=_METHOD),
            FieldSpec("status", "scalar", "string", value_format=_STATUS),
            FieldSpec("headers", "list", "string", case_insensitive_names=True,
                      name_format=_HEADER_NAME),
            FieldSpec("query", "map", "string"),
        ),
        exclusive=(Exclusion("method", "status",
                             "keep method for requests or status for responses"),),
    ),
    # `status`: an answer's (request-reply: the response of an HTTP egress call).
    record_fields={"method": "string", "path": "string", "query": "strmap",
                   "headers": "pairs", "status": "string"},
    endpoint=EndpointRules(
        ("method", "headers", "query", "apikeyname", "apikeyin", "plainscheme",
         "plainusernamefield", "plainpasswordfield"),
        UriSchemes(("http", "https"), "https://host/path", tls=("https",), listens=True),
        subscriber_consumer=False,
    ),
    address=FieldRef("path"),
    percent_encoded=("path", "query"),
    # No `ordering`: independent requests, no unit of order to key outputs by.
    identity=Identity("http", (IdentityPart(FieldRef("headers", "idempotency-key"),
                                            "non-empty"),)),
    metadata=Metadata("headers", "pairs", ignore_case=True, text_values=True),
    content_type=FieldRef("headers", "content-type"),
    batches=True,
    rendered_defaults={"method": "POST"},  # the spec's default method
    request_reply=RequestReply("the response to the request", status="status"),
    observe=HTTP_OBSERVING,
)
