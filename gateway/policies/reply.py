"""`routes[].reply_errors`: what a reply route tells a sender whose protocol has no status
(NATS, MQTT 5) when no conforming answer came for its request (no answer in time, an
answer no reply definition accepts, a request that could not be sent). What each value
does is `gateway.runtime.reply`'s, which applies it.

    none      (default) nothing: the sender's own request timeout tells it
    problem   a problem CloudEvent (`io.xrgw.reply.problem`, an RFC 9457 problem as its
              data) on its reply subject / response topic, with its correlation data

An HTTP sender always gets a status with an RFC 9457 problem body (504, 502).
"""

from __future__ import annotations

from typing import Literal

ReplyErrors = Literal["none", "problem"]
REPLY_ERRORS: tuple[ReplyErrors, ...] = ("none", "problem")

__all__ = ["REPLY_ERRORS", "ReplyErrors"]
