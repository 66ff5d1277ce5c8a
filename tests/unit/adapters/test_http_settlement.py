"""The HTTP ingress's settlement hook, without a server: a request's `_Pending` hands the
first settlement of its delivery to the handler waiting to answer, and none once the
request was answered without it (504, shutdown, client gone). How each verdict becomes a
status code is checked against a real server in the integration and fuzz tests."""

from __future__ import annotations

import asyncio

import pytest

from adapters.http.consumer import _Pending, _reply_response, _status
from gateway.record import NativeMessage


def test_the_first_settlement_is_the_verdict() -> None:
    async def main() -> None:
        pending = _Pending(asyncio.get_running_loop().create_future())
        assert pending.waiting()
        await pending.settle(False, "poison", False)
        assert not pending.waiting()
        await pending.settle(True, "", False)  # no second word
        assert pending.verdict.result() == (False, "poison", False)
    asyncio.run(main())


def test_a_settlement_after_the_request_was_answered_changes_nothing() -> None:
    async def main() -> None:
        pending = _Pending(asyncio.get_running_loop().create_future())
        pending.abandoned = True  # answered 504 / the client went
        assert not pending.waiting()
        await pending.settle(True, "", False)
        assert not pending.verdict.done()
    asyncio.run(main())


# -- request-reply: the answer a waiting sender gets -------------------------------------
@pytest.mark.parametrize(("status", "expected"), [
    (None, 200), (201, 201), ("202", 202), (404, 404), ("503", 503), (599, 599),
    (200, 200),
    (199, 200), (600, 200), (100, 200), ("1e3", 200), ("٢٠١", 200),  # Arabic-Indic digits
    ("-404", 200), (" 404", 200), ("", 200), (True, 200), (404.0, 200), ([404], 200),
])
def test_a_reply_status_is_a_final_status_code_or_200(status: object, expected: int) -> None:
    """A reply definition's `status` is the response's only when it is a final HTTP
    status (200-599, digits); anything else a service sends is answered 200, not an
    error page for the sender or an exception in the server."""
    assert _status(status) == expected


def test_a_reply_record_becomes_the_response_without_hop_by_hop_headers() -> None:
    """The reply's status, body and headers, except those aiohttp writes for this
    connection itself (a Content-Length of the service's message would be wrong here)."""
    reply = NativeMessage("HTTP", {"status": 202, "headers": [
        {"name": "Content-Type", "value": "application/json"},
        {"name": "ce-id", "value": "r-1"},
        {"name": "Content-Length", "value": "999"},
        {"name": "Connection", "value": "close"},
        {"name": "Transfer-Encoding", "value": "chunked"},
        {"name": "Keep-Alive", "value": "timeout=5"},
        {"name": "Host", "value": "service.internal"},
        {"name": "Date", "value": "Mon, 01 Jan 2024 00:00:00 GMT"},
        {"name": "Server", "value": "service/1.0"},
        {"name": "X-Trace", "value": "a"},
        {"name": "X-Trace", "value": "b"},
    ]}, data={"ok": True})
    response = _reply_response(reply)
    assert response.status == 202
    assert response.body == b'{"ok":true}'
    assert [(name, value) for name, value in response.headers.items()
            if name.lower() != "content-type"] == [
        ("ce-id", "r-1"), ("X-Trace", "a"), ("X-Trace", "b")]
    assert response.headers.getall("Content-Type") == ["application/json"]
    assert _reply_response(NativeMessage("HTTP", {}, payload=b"plain")).status == 200
