"""`xrgw tap` without a route: the filter, the exact sampler, the bounded queue that
drops and counts, the redacted line, the terminal text, the `/tap` endpoint behind the
sample pages' listener and token, and saved tap lines read back by `xrgw diff --replay`.
(Against a running gateway with real brokers: tests/integration/test_tap.py.)"""

from __future__ import annotations

import asyncio
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from gateway.catalogdiff.records import read_replay
from gateway.convert import Converter
from gateway.json.text import utf8_json
from gateway.observability.admin import AdminServer
from gateway.observability.metrics import Metrics
from gateway.record import NativeMessage
from gateway.redaction.redactor import Redactor
from gateway.tap.client import TapError, read_tap, tap_url
from gateway.tap.filter import FilterError, Sampler, TapFilter
from gateway.tap.hub import Entry, TapHub
from gateway.tap.item import Tapped
from gateway.tap.line import message_line
from gateway.tap.text import render_line
from tests.unit.core.defs import CASHIER

TOKEN = "Bearer supersecret-token-123"
CARD = "4111-1111-1111-1111"
KEY = "k3y-of-the-sender"
ROUTE = "store-mqtt->events"
CONVERTER = Converter([CASHIER])


def record(topic: str = "/store/1/cashierdesk/2", **data: Any) -> NativeMessage:
    return NativeMessage.from_json({
        "protocol": "MQTT/5.0", "topic_name": topic,
        "user_properties": [{"name": "eventType", "value": "sale"},
                            {"name": "authorization", "value": TOKEN},
                            {"name": "x-api-key", "value": KEY}],
        "data": {"card": CARD, **data}})


def tapped(rec: NativeMessage, reason: str | None = None) -> Tapped:
    conversion = CONVERTER.convert(rec)
    return Tapped(rec, conversion, reason if reason else conversion.reason)


MATCHED = tapped(record())
MISSED = tapped(record("/store/1/desk/2"))


# -- filter and sampler -------------------------------------------------------------------

def test_filter_reads_the_query_and_refuses_what_it_cannot_follow() -> None:
    f = TapFilter.from_query([("route", "store-*,other"), ("outcome", "unmatched"),
                              ("definition", "cashierdesk"), ("sample", "0.1"),
                              ("limit", "5")])
    assert f.routes == ("store-*", "other") and f.outcomes == ("unmatched",)
    assert f.sample == Fraction(1, 10) and f.limit == 5
    for bad in ({"outcome": "lost"}, {"sample": "0"}, {"sample": "2"}, {"sample": "x"},
                {"limit": "0"}, {"limit": "many"}):
        with pytest.raises(FilterError):
            TapFilter.from_query(bad)


def test_filter_by_route_definition_and_outcome() -> None:
    f = TapFilter(routes=("store-mqtt",))
    assert f.wants_route(ROUTE) and not f.wants_route("orders->events")
    assert TapFilter(routes=("*->events",)).wants_route(ROUTE)
    # a miss is wanted for the definition nearest to it; the last part of an xid will do
    by_definition = TapFilter(definitions=("cashierdesk",))
    assert by_definition.wants(MATCHED) and by_definition.wants(MISSED)
    assert not TapFilter(definitions=("/messagegroups/g/messages/other",)).wants(MISSED)
    assert TapFilter(outcomes=("matched",)).wants(MATCHED)
    assert not TapFilter(outcomes=("matched",)).wants(MISSED)
    assert TapFilter(outcomes=("dead-lettered",)).wants(MISSED)
    assert TapFilter(outcomes=("unmatched",)).wants(MISSED)
    assert not TapFilter(outcomes=("invalid-data",)).wants(MISSED)
    # a matched message dead-lettered later (its send failed) counts as dead-lettered
    undeliverable = tapped(record(), "undeliverable")
    assert TapFilter(outcomes=("undeliverable",)).wants(undeliverable)
    assert not TapFilter(outcomes=("matched",)).wants(undeliverable)


@pytest.mark.parametrize(("rate", "offered", "taken"),
                         [(Fraction(1, 4), 40, 10), (Fraction(1, 3), 10, 4),
                          (Fraction(1), 7, 7), (Fraction(7, 100), 1000, 70)])
def test_sampler_takes_exactly_the_rate_starting_with_the_first(
        rate: Fraction, offered: int, taken: int) -> None:
    sampler = Sampler(rate)
    picks = [sampler.take() for _ in range(offered)]
    assert picks[0] and sum(picks) == taken


# -- the hub: one attribute per batch, bounded queues ------------------------------------------

def test_hub_attached_only_while_a_tap_is_open_and_reads_nothing_it_does_not_want() -> None:
    hub = TapHub()
    assert hub.attached is False
    sub = hub.subscribe(TapFilter(routes=("orders",)))
    assert hub.attached is True

    def never() -> Any:
        raise AssertionError("read although no tap wants the route")
        yield  # pragma: no cover

    hub.offer_batch(ROUTE, never(), Redactor())
    hub.unsubscribe(sub)
    assert hub.attached is False


def test_a_full_queue_drops_and_counts_instead_of_waiting() -> None:
    metrics = Metrics(CollectorRegistry())
    hub = TapHub(metrics.registry)
    sub = hub.subscribe(TapFilter(), capacity=3)
    hub.offer_batch(ROUTE, [MATCHED] * 5, Redactor())
    hub.offer_batch(ROUTE, [MISSED] * 2, Redactor())
    assert len(sub.queue) == 3 and sub.dropped == 4
    assert metrics.registry.get_sample_value("xrgw_tap_dropped_total",
                                             {"route": ROUTE}) == 4
    assert metrics.registry.get_sample_value("xrgw_tap_open") == 1
    assert len(sub.take()) == 3 and not sub.queue
    hub.offer_batch(ROUTE, [MISSED], Redactor())
    assert len(sub.queue) == 1  # room again once the reader took them


def test_limit_stops_queueing_and_sampling_applies_after_the_filter() -> None:
    hub = TapHub()
    sub = hub.subscribe(TapFilter(outcomes=("unmatched",), sample=Fraction(1, 2), limit=3))
    hub.offer_batch(ROUTE, [MATCHED, MISSED] * 10, Redactor())
    assert sub.accepted == 3 and sub.full and sub.dropped == 0
    assert all(e.item.reason == "unmatched" for e in sub.queue)
    assert not hub.wants(ROUTE)


# -- the line -----------------------------------------------------------------------------

def entry(item: Tapped, redact: tuple[str, ...] = ("data.card",
                                                    "user_properties.x-api-key")) -> Entry:
    from datetime import UTC, datetime
    return Entry(ROUTE, datetime.now(UTC), item, Redactor(redact), False)


def test_matched_line_holds_record_definition_and_cloudevent_redacted() -> None:
    line = message_line(entry(MATCHED))
    text = utf8_json(line)
    assert line["outcome"] == "matched" and line["definition"] == CASHIER.xid
    assert line["cloudevent"]["type"] == "sale"
    assert line["record"]["data"]["card"] == "***"
    assert line["cloudevent"]["data"]["card"] == "***"
    for secret in (CARD, KEY, TOKEN, "supersecret-token-123"):
        assert secret not in text
    # the record itself is untouched (redaction works on a copy)
    assert MATCHED.record.data == {"card": CARD}
    assert ("authorization", TOKEN) in MATCHED.record.pairs("user_properties")


def test_missed_line_explains_with_the_nearest_definition() -> None:
    line = message_line(entry(MISSED))
    assert line["outcome"] == "dead-lettered" and line["reason"] == "unmatched"
    assert line["definition"] is None and line["nearest"] == CASHIER.xid
    assert "cloudevent" not in line
    explain = line["explain"]
    assert isinstance(explain, list) and explain[0]["definition"] == CASHIER.xid
    assert "expected /store/{storeid}/cashierdesk/{cdid}" in str(explain[0])
    assert CARD not in utf8_json(line)


def test_a_hidden_address_is_hidden_in_the_failed_check_too() -> None:
    line = message_line(entry(MISSED, ("topic_name",)))
    assert "/store/1/desk/2" not in utf8_json(line)
    assert "got ***" in str(line["explain"])


def test_text_for_a_terminal() -> None:
    matched = render_line(message_line(entry(MATCHED)))
    assert "matched" in matched and CASHIER.xid in matched
    assert "/store/1/cashierdesk/2" in matched and "type=sale" in matched
    assert "\033[" not in matched
    missed = render_line(message_line(entry(MISSED)), colour=True)
    assert "unmatched" in missed and f"~ {CASHIER.xid}" in missed and "\033[31m" in missed
    assert "x " + CASHIER.xid in missed
    assert "fell behind" in render_line({"tap": "dropped", "dropped": 4, "total": 9})


def test_saved_tap_lines_replay_as_records(tmp_path: Path) -> None:
    saved = tmp_path / "tap.jsonl"
    lines = [{"tap": "attached", "routes": [ROUTE]}, message_line(entry(MATCHED)),
             {"tap": "dropped", "dropped": 2, "total": 2}, message_line(entry(MISSED)),
             {"tap": "end", "messages": 2}]
    saved.write_text("".join(utf8_json(line) + "\n" for line in lines))
    replayed = list(read_replay([str(saved)]))
    assert [r.line for r in replayed] == [2, 4]
    assert all(r.record is not None and not r.error for r in replayed)
    assert replayed[1].record is not None
    assert replayed[1].record.get("topic_name") == "/store/1/desk/2"


# -- the endpoint ---------------------------------------------------------------------------

def test_tap_url() -> None:
    assert tap_url("http://127.0.0.1:9464/") == "http://127.0.0.1:9464/tap"
    assert tap_url("http://h:1/tap", routes=["a->b"], outcomes=["unmatched"], sample=0.5,
                   limit=3) == "http://h:1/tap?route=a-%3Eb&outcome=unmatched&sample=0.5&limit=3"


async def _admin(hub: TapHub, **kw: Any) -> AdminServer:
    admin = AdminServer(Metrics(CollectorRegistry()), lambda: {ROUTE: True},
                        port=0, tap=hub, **kw)
    await admin.start()
    return admin


def test_endpoint_streams_ndjson_and_sse_and_ends_at_the_limit() -> None:
    async def scenario() -> tuple[list[dict[str, Any]], str]:
        hub = TapHub()
        admin = await _admin(hub)
        try:
            url = f"http://127.0.0.1:{admin.port}"
            task = asyncio.create_task(asyncio.to_thread(
                lambda: list(read_tap(tap_url(url, limit=2), idle_timeout=30))))
            while not hub.attached:
                await asyncio.sleep(0.01)
            hub.offer_batch(ROUTE, [MATCHED, MISSED, MATCHED], Redactor(("data.card",)))
            lines = await task
            async with (aiohttp.ClientSession() as session,
                        session.get(f"{url}/tap?format=sse&limit=1") as response):
                assert response.content_type == "text/event-stream"
                first = await response.content.readuntil(b"\n\n")
                while not hub.attached:
                    await asyncio.sleep(0.01)
                hub.offer_batch(ROUTE, [MISSED], Redactor())
                rest = (await response.read()).decode()
            return lines, first.decode() + rest
        finally:
            await admin.stop()

    lines, sse = asyncio.run(scenario())
    assert [line["tap"] for line in lines] == ["attached", "message", "message", "end"]
    assert lines[0]["routes"] == [ROUTE]
    assert [line.get("reason") for line in lines[1:3]] == [None, "unmatched"]
    assert CARD not in json.dumps(lines)
    assert sse.startswith("event: attached\ndata: {")
    assert "event: message\ndata: {" in sse and "event: end\n" in sse


def test_endpoint_refuses_what_it_cannot_follow_and_keeps_to_the_pages_rules() -> None:
    async def scenario() -> dict[str, int]:
        status = {}
        async with aiohttp.ClientSession() as session:
            # behind the token, as the other sample pages
            admin = await _admin(TapHub(), token="s3cret")
            try:
                base = f"http://127.0.0.1:{admin.port}/tap"
                for name, url, headers in (
                        ("no-token", base, {}),
                        ("bad-outcome", f"{base}?outcome=lost",
                         {"Authorization": "Bearer s3cret"}),
                        ("no-route", f"{base}?route=nothing",
                         {"Authorization": "Bearer s3cret"})):
                    async with session.get(url, headers=headers) as response:
                        status[name] = response.status
            finally:
                await admin.stop()
            # pages on their own listener: not on the scrape port
            admin = await _admin(TapHub(), pages=("127.0.0.1", 0))
            try:
                async with session.get(f"http://127.0.0.1:{admin.port}/tap") as response:
                    status["scrape-port"] = response.status
            finally:
                await admin.stop()
        return status

    assert asyncio.run(scenario()) == {"no-token": 401, "bad-outcome": 400, "no-route": 404,
                                       "scrape-port": 404}
    with pytest.raises(TapError, match="refused"):
        list(read_tap("http://127.0.0.1:1/tap", connect_timeout=5))


def test_redacting_a_record_leaves_the_record_as_it_was() -> None:
    """A sample (conformance report, tap) is redacted while its message may still be on
    its way to the dead letter, which must get the original headers."""
    from gateway.observability.conformance import sample_record

    rec = record("/store/1/desk/2")
    shown = sample_record(rec, Redactor(("user_properties.x-api-key",)))
    assert {"name": "authorization", "value": "***"} in shown["user_properties"]
    assert rec.pairs("user_properties") == [("eventType", "sale"), ("authorization", TOKEN),
                                            ("x-api-key", KEY)]


def test_a_stalled_reader_is_counted_from_the_count_without_the_items_being_built() -> None:
    """The drop path of a tap nobody reads costs a route one count per batch: the items
    (a `Tapped` per message) are built only for a subscriber that can queue some."""
    metrics = Metrics(CollectorRegistry())
    hub = TapHub(metrics.registry)
    sub = hub.subscribe(TapFilter(), capacity=2)
    hub.offer_batch(ROUTE, [MATCHED] * 2, Redactor(), count=lambda: 2)
    assert len(sub.queue) == 2 and sub.saturated

    def never() -> Any:
        raise AssertionError("items built although every subscriber would drop them")
        yield  # pragma: no cover

    hub.offer_batch(ROUTE, never(), Redactor(), count=lambda: 7)
    assert sub.dropped == 7
    assert metrics.registry.get_sample_value("xrgw_tap_dropped_total", {"route": ROUTE}) == 7
    # A second, filtering subscriber is not saturated: the items are built for it.
    other = hub.subscribe(TapFilter(outcomes=("unmatched",)))
    hub.offer_batch(ROUTE, [MATCHED, MISSED], Redactor(), count=lambda: 2)
    assert sub.dropped == 9 and [e.item.reason for e in other.queue] == ["unmatched"]
