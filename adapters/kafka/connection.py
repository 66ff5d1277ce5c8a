"""What the Kafka consumer and producer share about their connection: the error an
operator reads when connecting fails, and stopping an aiokafka client quietly.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Any

from aiokafka.errors import (  # type: ignore[import-untyped]
    AuthenticationFailedError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)

from adapters.kafka.options import KafkaOptions
from gateway.ports.tls import describe, probe


def _connect_error(opts: KafkaOptions, exc: BaseException) -> str:
    """Why a connect failed, in words that point at the setting to check."""
    if isinstance(exc, (SaslAuthenticationFailed, AuthenticationFailedError, KeyError)) or (
        opts.sasl and isinstance(exc, UnsupportedSaslMechanismError)
    ):
        # aiokafka's SCRAM client raises KeyError('v') on a server-final error message.
        return ("SASL authentication failed (check the endpoint's username/password and "
                "sasl_mechanism)")
    if isinstance(exc, UnsupportedSaslMechanismError):
        return f"{exc} (check sasl_mechanism)"
    cause = exc.__cause__ or exc.__context__
    for candidate in (exc, cause):
        if isinstance(candidate, ssl.SSLError):
            return describe(candidate)
    return repr(exc)


async def explain(opts: KafkaOptions, exc: BaseException) -> str:
    """`_connect_error`, and for a plain "cannot bootstrap" over TLS the handshake's own
    failure (aiokafka only logs it)."""
    text = _connect_error(opts, exc)
    context = opts.security.get("ssl_context")
    if isinstance(context, ssl.SSLContext) and text.startswith(("KafkaConnectionError",
                                                                "TimeoutError")):
        host, _, port = opts.bootstrap[0].rpartition(":")
        why = await probe(host.strip("[]"), int(port), context, 5.0)
        if why is not None:
            return why
    return text


async def stop_quietly(client: Any, timeout: float) -> None:
    """Stop an aiokafka client; a dead broker must not make closing hang or raise."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(timeout):
            await client.stop()
