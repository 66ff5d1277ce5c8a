"""Client libraries' log lines: at most warning, the same line once per window."""

from __future__ import annotations

import logging

from gateway.observability.logs import ThirdPartyFilter


def _record(name: str, level: int, msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def test_an_error_of_a_client_library_is_a_warning_and_rate_limited() -> None:
    now = [0.0]
    limit = ThirdPartyFilter(window=60.0, clock=lambda: now[0])
    first = _record("aiokafka.conn", logging.ERROR, "Unable connect to %s", "k:9092")
    assert limit.filter(first) is True
    assert first.levelno == logging.WARNING and first.levelname == "WARNING"
    for _ in range(6):  # a reconnect every few seconds: dropped within the window
        now[0] += 2.0
        assert limit.filter(_record("aiokafka.conn", logging.ERROR,
                                    "Unable connect to %s", "k:9092")) is False
    other = _record("aiokafka.conn", logging.ERROR, "another template")
    assert limit.filter(other) is True
    now[0] += 60.0
    later = _record("aiokafka.conn", logging.ERROR, "Unable connect to %s", "k:9092")
    assert limit.filter(later) is True
    assert later.__dict__["suppressed"] == 6


def test_the_gateways_own_lines_pass_untouched() -> None:
    limit = ThirdPartyFilter(window=60.0, clock=lambda: 0.0)
    for _ in range(3):
        record = _record("xrgw.route", logging.ERROR, "dead letter failed")
        assert limit.filter(record) is True
        assert record.levelno == logging.ERROR


def test_info_lines_keep_their_level() -> None:
    limit = ThirdPartyFilter(window=60.0, clock=lambda: 0.0)
    record = _record("nats.aio.client", logging.INFO, "connected")
    assert limit.filter(record) is True and record.levelno == logging.INFO


def test_a_client_line_names_the_endpoint_whose_connect_made_its_task() -> None:
    import asyncio

    from gateway.observability.logs import CLIENT_ENDPOINT

    limit = ThirdPartyFilter(window=60.0, clock=lambda: 0.0)

    async def client_task() -> logging.LogRecord:
        record = _record("aiokafka.conn", logging.ERROR, "Unable connect")
        limit.filter(record)
        return record

    async def scenario() -> logging.LogRecord:
        token = CLIENT_ENDPOINT.set("orders-kafka")
        try:
            task = asyncio.create_task(client_task())  # made inside connect()
        finally:
            CLIENT_ENDPOINT.reset(token)
        return await task

    assert asyncio.run(scenario()).__dict__["endpoint"] == "orders-kafka"
    outside = _record("aiokafka.conn", logging.ERROR, "other")
    limit.filter(outside)
    assert "endpoint" not in outside.__dict__
