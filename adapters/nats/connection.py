"""Opening a NATS connection and explaining why it failed: the servers shown without
credentials, authentication errors told apart, waiting for a reconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import nats.errors
import nats.js.errors

from adapters.nats.bounded import within
from adapters.nats.client import Callback, Client
from adapters.nats.options import NatsOptions
from gateway.ports import EndpointSettings, NotConnected
from gateway.ports.tls import describe

log = logging.getLogger("adapters.nats")  # the name it had before the package split


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


async def open_client(
    settings: EndpointSettings,
    opts: NatsOptions,
    error_cb: Callable[[Exception], Awaitable[None]],
    changed_cb: Callback,
) -> Client:
    """A connected client that reconnects on its own; raises NotConnected."""
    client = Client()
    extra: dict[str, Any] = {}
    if settings.username:
        extra["user"] = settings.username
        extra["password"] = settings.password or ""
    elif settings.password:
        extra["token"] = settings.password
    if opts.creds_file:
        extra["user_credentials"] = opts.creds_file
    if opts.nkey_seed_file:
        extra["nkeys_seed"] = opts.nkey_seed_file
    if opts.tls is not None:
        client.require_tls = True
        extra["tls"] = opts.tls
        extra["tls_hostname"] = urlsplit(opts.servers[0]).hostname
    # nats-py retries a refused first connect until the timeout; what the server said
    # (e.g. "authorization violation") is only passed to the error callback.
    errors: list[Exception] = []

    async def first_errors(exc: Exception) -> None:
        # Keep the telling one: a refused login or certificate is followed by broken
        # pipes. One only: reconnects may go on for long.
        if not client.is_connected and (
            not errors or not _is_telling(errors[0]) or _is_telling(exc)
        ):
            errors[:] = [exc]
        await error_cb(exc)

    try:
        # nats-py retries the first connect forever when reconnecting is unlimited;
        # the bound turns that into one bounded attempt (`within`: nats-py can swallow
        # a single cancellation).
        await within(
            opts.connect_timeout,
            client.connect(
                list(opts.servers),
                name=settings.client_id or "xrgw",
                error_cb=first_errors,
                disconnected_cb=changed_cb,
                reconnected_cb=changed_cb,
                closed_cb=changed_cb,
                allow_reconnect=True,
                max_reconnect_attempts=-1,
                reconnect_time_wait=opts.reconnect_wait,  # type: ignore[arg-type]
                connect_timeout=max(1, round(opts.connect_timeout)),
                **extra,
            ),
        )
    except (TimeoutError, OSError, nats.errors.Error) as exc:
        with contextlib.suppress(Exception):
            await client.close()
        # TLS 1.3: a refused client certificate arrives after our side of the handshake,
        # so connect() itself may fail with a broken pipe while the callback got the alert.
        telling = errors and (isinstance(exc, TimeoutError) or _is_telling(errors[0]))
        cause = errors[-1] if telling else exc
        raise NotConnected(
            f"cannot connect to {', '.join(shown(s) for s in opts.servers)}: {_why(cause)}"
        ) from None
    return client


def shown(server: str) -> str:
    """A server URL without its `user:password@` / `token@` part (errors are logged)."""
    scheme, sep, rest = server.rpartition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}"


def _is_auth_error(exc: BaseException) -> bool:
    return isinstance(exc, nats.errors.AuthorizationError) or (
        "authorization violation" in str(exc).lower())


def _is_telling(exc: BaseException) -> bool:
    """Says why the server refused us (not just that the connection broke)."""
    return _is_auth_error(exc) or isinstance(exc, ssl.SSLError)


def _why(exc: BaseException) -> str:
    text = str(exc).strip().strip("'\"")
    if _is_auth_error(exc):
        return "authorization violation (check the endpoint's credentials)"
    if isinstance(exc, ssl.SSLError) or "ssl" in text.lower():
        return describe(exc)
    if isinstance(exc, nats.errors.Error) and text:
        return text
    return repr(exc)


async def await_reconnect(client: Client, timeout: float) -> None:
    """Wait for nats-py's own reconnect; raises NotConnected when it does not happen."""
    deadline = time.monotonic() + timeout
    while not client.is_connected:
        if client.is_closed or time.monotonic() >= deadline:
            raise NotConnected("not connected (nats-py is reconnecting)")
        await asyncio.sleep(0.05)
