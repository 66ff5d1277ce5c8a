"""HTTP webhook ingress (consumer) and egress (producer), with aiohttp.

Options: `adapters/http/options.py` (one spec: names, xRegistry spellings, types,
defaults; rendered in docs/configuration.md).

Security (consumer). `https://` (or a `tls` block) serves TLS with `tls.cert_file` and
`tls.key_file`; with `tls.ca_file` every client must present a certificate signed by
that CA (mutual TLS: the handshake fails otherwise). A `password` requires
`Authorization: Bearer <password>` on every request (with a `username` too: HTTP Basic
with both); a missing or wrong one gets 401 with `WWW-Authenticate` and nothing else,
before the path, method or body is looked at. The comparison takes constant time. Error
bodies never carry exception text, broker answers or configuration: 503 says only to
retry, 400 for a nack(retry=False) gives the caller's reason (first line). The token is
never logged, and once a request is authenticated its `Authorization` header is dropped
from the record: the credential reaches no output, dead letter or report.

Security (producer). `https://` (or a `tls` block, which turns `http://` into `https://`)
verifies the server against `tls.ca_file` (default: the
system CAs) and its host name, with `tls.cert_file`/`key_file` as client certificate.
`username` + `password` -> HTTP Basic; a `password` alone -> `Authorization: Bearer`.

Consumer. `connect()` binds a server to the URI's host and port (`http://127.0.0.1:0`
takes an ephemeral port; `port` and `url` tell which). Each accepted request becomes one
Delivery (`read_batch` hands out every request received so far, in arrival order), and
the request waits for its settlement, so the HTTP status *is* the settlement: ack -> 202
Accepted; nack(retry=True) -> 503 with Retry-After (the sender retries); nack(retry=False)
-> 400 with an RFC 9457 problem body whose `detail` is the reason; no settlement within
`settle_timeout` -> 504 (a later settlement is ignored, and the Delivery reports itself
`abandoned`: the route stops retrying it, since the sender sends it again). A
CloudEvents batch is one request and so one record; the core splits it. Settling costs
no I/O of its own: it wakes the request's handler, which writes the answer on the
request's connection.

Held (`Admission`): the route listens from the start but holds the ingress while its
outputs are not connected yet; every request then gets 503 + Retry-After, before its
body is read, instead of a refused connection.

Back-pressure: at most `max_in_flight` requests are admitted (body being read, queued or
delivered and unsettled); one more is answered 503 at once, before its body is read, so
memory stays within `max_in_flight * max_body_bytes`. A declared Content-Length over the
limit is refused with 413 before reading; a chunked body is read until it passes the
limit. Either way the connection is closed after the answer.

Connections (`adapters/http/server.py`): a request head must arrive whole within
`header_timeout` (slowloris connections are closed), an idle kept-alive connection is
closed after `keepalive_timeout`, at most `max_connections` are held (one more is
answered 503 and closed unread), and aiohttp's own 400 answers never quote the request.

Producer. Each record is sent with its method (default POST) to the endpoint URI with the
record's `path` appended. `submit()` starts a request per record at once, up to
`concurrency` in flight (then it waits for answers: back-pressure), each on a kept-alive
connection of the session's pool (`connect()` only opens the session; connections are
made as needed and reused), and returns; the Confirmation gathers the answers. HTTP has
no order to keep: requests of a batch may arrive in any order. One request per record
and submit: the route owns retries (`routes[].retry`). 2xx -> delivered; 408, 429, 5xx,
timeouts and connection errors -> failed, retryable, with the answer's `Retry-After`
(seconds) as `Outcome.retry_after` for the route to honour; 413 -> too large (dead-lettered
as `too-large`); other statuses -> failed, not retryable (redirects are not followed).
Once a request has failed because the endpoint could not be reached, the requests of
that batch not yet sent fail at once with the same reason instead of each waiting for
its own connection error.
"""

from __future__ import annotations

from adapters.descriptor import Adapter, nothing
from adapters.http import prepare
from adapters.http.consumer import HttpConsumer
from adapters.http.options import OPTIONS, HttpOptions
from adapters.http.producer import HttpProducer
from gateway.protocols import HTTP

__all__ = ["ADAPTER", "HttpConsumer", "HttpOptions", "HttpProducer"]

#: This package's entry in the adapter factory (`adapters/registry.py`).
ADAPTER = Adapter(
    family=HTTP,
    options=OPTIONS,
    consumer=HttpConsumer,
    producer=HttpProducer,
    prepare_consumer=prepare.paths,
    # HTTP ingress: the observing route acknowledges (202) and forwards nothing.
    prepare_observer=nothing,
)
