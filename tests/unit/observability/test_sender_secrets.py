"""What a sender sends never leaks into the gateway's own outputs (issue 29): a token in
a credential header, or in a field a route's `redact:` names, appears in no conformance
report, status page, metric label, log line or dead-letter explanation; metric labels of
failed checks carry only what the definitions say."""

from __future__ import annotations

import asyncio
import html
import json
import logging
from datetime import UTC, datetime

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.convert import Converter
from gateway.deadletter.format import deadletter_metadata
from gateway.definitions import read_document
from gateway.matching.matcher import Explanation
from gateway.observability.conformance import Conformance, failed_check
from gateway.observability.metrics import Metrics
from gateway.observability.statuspage import StatusPage
from gateway.record import NativeMessage
from gateway.redaction.redactor import REDACTED, Redactor
from gateway.runtime.route import Output, Route
from tests.unit.runtime.test_route import FAST, run_to_end

TOKEN = "SUPERSECRET-API-KEY-123"
COOKIE = "session=COOKIE-VALUE-987654"
PASSWORD = "hunter2-PASSWORD"
EMAIL = "alice@example.com"

DOC = {"messagegroups": {"g": {"envelope": "CloudEvents/1.0", "messages": {
    "api": {"protocol": "HTTP",
            "protocoloptions": {"path": {"value": "/api"},
                                "headers": {"authorization": {"value": "Bearer {token}"}}},
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"type": {"value": "t.api"}, "source": {"value": "/s"}}},
    "user": {"protocol": "MQTT/5.0",
             "protocoloptions": {"topic_name": {"value": "/users/{user}/profile/{field}"}},
             "envelope": "CloudEvents/1.0",
             "envelopemetadata": {"type": {"value": "t.user"}, "source": {"value": "/s"}}},
}}}}


def _http(token: str) -> NativeMessage:
    return NativeMessage("HTTP", {"method": "POST", "path": "/api", "headers": [
        {"name": "Authorization", "value": f"Token {token}"},
        {"name": "Cookie", "value": COOKIE},
        {"name": "Proxy-Authorization", "value": f"Basic {TOKEN}"}]}, data={"n": 1})


def _mqtt() -> NativeMessage:
    return NativeMessage("MQTT/5.0", {"topic_name": f"/users/{EMAIL}/password/{PASSWORD}",
                                      "qos": 1}, data={})


def _run(records: list[NativeMessage], redact: list[str],
         caplog: pytest.LogCaptureFixture) -> tuple[Conformance, list[NativeMessage], str]:
    catalog = read_document(DOC)
    conformance = Conformance()
    report = conformance.route("r", "in", redact=redact)
    consumer = MemoryConsumer(records, close_when_empty=True)
    dlq = MemoryProducer()
    route = Route("r", "in", consumer, Converter(catalog.messages()),
                  [Output("out", "KAFKA", MemoryProducer(), defaults={"topic": "t"})],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "d"}),
                  metrics=Metrics(), retry=FAST, report=report)
    with caplog.at_level(logging.DEBUG):
        asyncio.run(run_to_end(route, consumer))
    return conformance, dlq.written, caplog.text


def _outputs(conformance: Conformance, dead: list[NativeMessage]) -> dict[str, str]:
    """Every admin output and every dead letter's explanation, as text."""
    doc = conformance.to_json(datetime.now(UTC))
    registry = CollectorRegistry()
    registry.register(conformance)
    explanations = " ".join(
        meta.get("xrgw-explain", "") + meta.get("xrgw-detail", "")
        for meta in map(deadletter_metadata, dead))
    return {"conformance": json.dumps(doc, ensure_ascii=False),
            "page": StatusPage().render(doc, {"r": True}),
            "metrics": generate_latest(registry).decode(),
            "deadletter explanations": explanations}


def test_a_senders_credential_headers_appear_in_no_output(
        caplog: pytest.LogCaptureFixture) -> None:
    conformance, dead, logs = _run([_http(TOKEN), _http(TOKEN + "-2")], [], caplog)
    assert len(dead) == 2
    outputs = _outputs(conformance, dead)
    outputs["logs"] = logs
    for where, text in outputs.items():
        assert TOKEN not in text, where
        assert "COOKIE-VALUE" not in text, where
    doc = conformance.to_json()
    route = doc["routes"][0]  # type: ignore[index]
    # The failure stays readable: what was expected, and that something else came.
    assert route["constraints"] == [{  # type: ignore[index]
        "failure": f"headers[authorization]: expected Bearer {{token}}, got {REDACTED}",
        "count": 2}]
    headers = route["samples"][0]["record"]["headers"]  # type: ignore[index]
    assert {h["name"]: h["value"] for h in headers} == {
        "Authorization": REDACTED, "Cookie": REDACTED, "Proxy-Authorization": REDACTED}


def test_a_failed_checks_metric_label_never_carries_the_received_value(
        caplog: pytest.LogCaptureFixture) -> None:
    records = [NativeMessage("HTTP", {"method": "POST", "path": f"/other-{i}"}, data={})
               for i in range(30)]
    conformance, _, _ = _run(records, [], caplog)
    metrics = _outputs(conformance, [])["metrics"]
    lines = [line for line in metrics.splitlines()
             if line.startswith("xrgw_conformance_failed_checks{")]
    # Thirty different paths: one series, the check and the definition's value.
    assert lines == ['xrgw_conformance_failed_checks{failure="path: expected /api",'
                     'route="r"} 30.0']
    assert "/other-" in outputs_json(conformance)  # the report itself still tells


def outputs_json(conformance: Conformance) -> str:
    return json.dumps(conformance.to_json())


def test_redact_paths_cover_failure_texts_and_explanations(
        caplog: pytest.LogCaptureFixture) -> None:
    conformance, dead, logs = _run([_mqtt()], ["topic_name"], caplog)
    outputs = _outputs(conformance, dead)
    outputs["logs"] = logs
    for where, text in outputs.items():
        assert PASSWORD not in text, where
        assert EMAIL not in text, where
    constraints = conformance.to_json()["routes"][0]["constraints"]  # type: ignore[index]
    assert constraints == [{"failure": f"topic_name segment 3: expected profile, got "
                                       f"{REDACTED}", "count": 1}]


def test_a_dead_letter_keeps_the_original_for_a_re_drive(
        caplog: pytest.LogCaptureFixture) -> None:
    _, [dead], _ = _run([_mqtt()], ["topic_name"], caplog)
    record = json.loads(deadletter_metadata(dead)["xrgw-record"])
    assert record["topic_name"] == f"/users/{EMAIL}/password/{PASSWORD}"


def test_explanations_read_back_without_parts_are_scrubbed_of_hidden_values() -> None:
    redactor = Redactor(["topic_name"])
    record = _mqtt()
    plain = Explanation("/x", f"topic_name: expected /a, got {record.get('topic_name')}", 0)
    shown = redactor.explanation(plain, redactor.secrets(record))
    assert PASSWORD not in shown.failure and REDACTED in shown.failure


def test_a_capture_clash_hides_the_earlier_value_too() -> None:
    redactor = Redactor(["headers.x-region"])
    clash = Explanation("/x", "headers[x-region]: expected {r} = 'eu' (captured earlier), "
                              "got 'us'", 1, "headers[x-region]",
                        "{r} = 'eu' (captured earlier)", "'us'")
    shown = redactor.explanation(clash, ())
    assert shown.failure == f"headers[x-region]: expected {{r}} = {REDACTED} (captured " \
                            f"earlier), got {REDACTED}"


def test_failed_check_text_form_is_unchanged() -> None:
    assert failed_check("topic_name: expected /store/{storeid}/cashierdesk, got "
                        "/store/12/desk") == "topic_name segment 3: expected cashierdesk, got desk"


def test_a_schema_detail_about_a_hidden_body_field_hides_even_a_short_value() -> None:
    redactor = Redactor(["data.pin"])
    assert redactor.text("$.pin: '12' is too short", ()) == f"$.pin: {REDACTED}"
    assert redactor.text("$.amount: -3 is less than the minimum of 0", ()) == (
        "$.amount: -3 is less than the minimum of 0")
    assert Redactor(["data.card"]).text("$.card.number: 'x' is bad", ()) == (
        f"$.card.number: {REDACTED}")


_TOKENS = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126),
                  min_size=8, max_size=40).filter(lambda t: "***" not in t)


@settings(max_examples=60, deadline=None)
@given(token=_TOKENS, name=st.sampled_from(
    ["Authorization", "authorization", "AUTHORIZATION", "Cookie", "Set-Cookie",
     "Proxy-Authorization", "X-Api-Key"]), scheme=st.sampled_from(["", "Basic ", "Token "]))
def test_no_credential_header_value_reaches_any_output(token: str, name: str,
                                                       scheme: str) -> None:
    """Whatever the token and the header's spelling, no output shows it (`X-Api-Key` is
    hidden by the route's `redact:`). Text every output shows anyway (a reason, a tag)
    is no leak: a token that is part of it is skipped."""
    shown = _everything_shown(name, scheme + token)
    plain = _everything_shown(name, "-")
    for where, text in shown.items():
        for form in (token, json.dumps(token)[1:-1], html.escape(json.dumps(token)[1:-1]),
                     html.escape(token)):
            assume(form not in plain[where])
            assert form not in text, where


def _everything_shown(name: str, value: str) -> dict[str, str]:
    """Every output of an unmatched HTTP request whose header `name` is `value`."""
    catalog = read_document(DOC)
    converter = Converter(catalog.messages())
    conformance = Conformance()
    report = conformance.route("r", "in", redact=["headers.x-api-key"])
    record = NativeMessage("HTTP", {"method": "POST", "path": "/api", "headers": [
        {"name": name, "value": value}]}, data={"n": 1})
    conversion = converter.convert(record)
    assert conversion.event is None
    report.failed(record, "unmatched", None, conversion.explain, conversion.detail,
                  datetime.now(UTC))
    outputs = _outputs(conformance, [])
    redactor = report.redactor
    secrets = redactor.secrets(record)
    outputs["deadletter explanations"] = json.dumps(
        [e.to_json() for e in redactor.explanations(conversion.explain, secrets)])
    return outputs
