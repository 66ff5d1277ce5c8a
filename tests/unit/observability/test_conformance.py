"""The live conformance report: route counts in shadow and normal mode, the Spark row
shape, bounded failure texts and samples, redaction, Prometheus export, `xrgw report`
from files, and the `observe` / `redact` config keys."""

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.cli import main
from gateway.cloudevents.timestamps import format_rfc3339
from gateway.config import load_config_text
from gateway.convert import Converter
from gateway.deadletter import reasons
from gateway.deadletter.format import deadletter_record
from gateway.definitions import load_catalog
from gateway.matching.matcher import Explanation
from gateway.observability.conformance import (
    MAX_CONSTRAINTS,
    MAX_SAMPLES,
    REDACTED,
    SAMPLE_BYTES,
    Conformance,
    RouteReport,
    failed_check,
    sample_record,
)
from gateway.observability.metrics import Metrics
from gateway.observability.report_sources import ReportError, from_lines, load_report
from gateway.observability.statuspage import StatusPage
from gateway.policies.retry import RetryPolicy
from gateway.record import NativeMessage
from gateway.runtime.route import Output, Route

ROOT = Path(__file__).resolve().parents[3]
CATALOG = load_catalog([ROOT / "config/examples/store.xreg.json"])
DESK = "/messagegroups/store/messages/cashierdesk"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def sale(desk: int) -> NativeMessage:
    return NativeMessage("MQTT/5.0", {
        "topic_name": f"/store/12/cashierdesk/{desk}", "qos": 1,
        "user_properties": [{"name": "eventType", "value": "com.example.sale"}]},
        data={"desk": desk, "card": {"number": "4111"}})


def stray(n: int) -> NativeMessage:
    return NativeMessage("MQTT/5.0", {"topic_name": f"/store/12/desk/{n}", "qos": 1},
                         data={"card": {"number": "4111"}, "n": n})


def run_route(messages, *, observe: bool):
    consumer = MemoryConsumer(messages, close_when_empty=True, max_in_flight=8)
    out, dlq = MemoryProducer(), MemoryProducer()
    conformance = Conformance()
    route = Route("store", "store-mqtt", consumer, Converter(CATALOG.messages()),
                  [Output("events", "KAFKA", out, defaults={"topic": "t"})],
                  deadletter=Output("dlq", "KAFKA", dlq, defaults={"topic": "dead"}),
                  metrics=Metrics(), inflight=8,
                  retry=RetryPolicy(attempts=2, initial_backoff=0.001, max_backoff=0.002),
                  observe=observe, report=conformance.route(
                      "store", "store-mqtt", observe=observe, redact=["data.card.number"]))

    async def scenario():
        await route.start()
        await asyncio.wait_for(route.wait_finished(), 5)
        await route.stop(grace=5)

    asyncio.run(scenario())
    return conformance, consumer, out, dlq


@pytest.mark.parametrize("observe", [True, False])
def test_route_counts_matched_rendered_and_failures(observe):
    conformance, consumer, out, dlq = run_route(
        [sale(1), stray(1), sale(2), stray(2), sale(3)], observe=observe)
    assert len(consumer.acked) == 5
    if observe:  # shadow mode: nothing published, nothing dead-lettered
        assert out.written == [] and dlq.written == []
    else:
        assert len(out.written) == 3 and len(dlq.written) == 2
    doc = conformance.to_json(NOW)
    [route] = doc["routes"]
    assert (route["observe"], route["received"], route["matched"], route["rendered"]) == (
        observe, 5, 3, 3)
    assert route["deadletter"] == {"unmatched": 2}
    rows = {r["definition"]: (r["matched"], r["unmatched"], r["invalid"]) for r in doc["rows"]}
    # Unmatched ones count against the nearest definition (as in the Spark report).
    assert rows == {DESK: (3, 0, 0), "/messagegroups/store/messages/storestatus": (0, 2, 0)}
    assert set(doc["rows"][0]) == {"window_start", "window_end", "definition", "matched",
                                   "unmatched", "invalid"}  # the Spark --report row
    # The first failed check of the unmatched messages, by its first differing segment:
    # the two devices' messages count as one line.
    assert route["constraints"] == [
        {"failure": "topic_name segment 3: expected status, got desk", "count": 2}]
    assert len(route["samples"]) == 2
    assert route["samples"][0]["record"]["data"]["card"]["number"] == REDACTED
    assert "4111" not in json.dumps(route["samples"])


def test_failure_texts_and_samples_are_bounded():
    report = RouteReport("r", "s")
    for i in range(MAX_CONSTRAINTS * 3):
        report.failed(stray(i), reasons.UNMATCHED, None,
                      (Explanation(DESK, f"segment {i}", 1),), "", NOW)
    report.failed(stray(0), reasons.UNMATCHED, None, (Explanation(DESK, "often", 1),), "", NOW)
    report.failed(stray(0), reasons.UNMATCHED, None, (Explanation(DESK, "often", 1),), "", NOW)
    assert len(report.constraints) == MAX_CONSTRAINTS
    assert report.top_constraints(1) == [("often", 2)]
    assert len(report.samples) == MAX_SAMPLES
    assert report.definitions[DESK].unmatched == MAX_CONSTRAINTS * 3 + 2


def test_report_times_are_written_as_event_times_are() -> None:
    # A microsecond ending in 0 is where a fixed six-digit form and the events' form
    # (trailing zeros dropped) part: the report must show the event's `time` text.
    at = datetime(2026, 11, 24, 17, 44, 9, 246380, tzinfo=UTC)
    report = RouteReport("r", "s")
    report.matched(DESK, at, 1)
    [row] = report.to_json(at)["definitions"]
    assert row["first_seen"] == row["last_seen"] == format_rfc3339(at) == (
        "2026-11-24T17:44:09.24638Z")


def test_failed_checks_by_segment():
    assert failed_check("topic_name: expected /store/{storeid}/cashierdesk, got "
                        "/store/12/desk") == "topic_name segment 3: expected cashierdesk, got desk"
    assert failed_check("subject: expected a.{x}.c, got a.b.d") == (
        "subject segment 2: expected c, got d")
    assert failed_check("topic_name: expected /a/{x}, got /a/b/c") == (
        "topic_name: expected 3 segments, got 4")
    assert failed_check("qos: expected 1, got 0") == "qos: expected 1, got 0"
    assert failed_check("path: expected /p/x{y}, got /p/z") == "path: expected /p/x{y}, got /p/z"


def test_samples_truncate_and_redact_headers():
    record = NativeMessage("KAFKA", {"topic": "t", "headers": [
        {"name": "Authorization", "value": "secret"}, {"name": "x", "value": "y"}]},
        data={"blob": "z" * 5000})
    doc = sample_record(record, ["headers.authorization", "data.missing.path"])
    assert doc["headers"] == [{"name": "Authorization", "value": REDACTED},
                              {"name": "x", "value": "y"}]
    assert doc["truncated"] is True and len(doc["data"].encode()) <= SAMPLE_BYTES + 3


def test_prometheus_export_and_status_page():
    conformance, *_ = run_route([sale(1), stray(1)], observe=True)
    metrics = Metrics()
    metrics.registry.register(conformance)
    text = metrics.render().decode()
    assert (f'xrgw_conformance_messages_total{{definition="{DESK}",outcome="matched",'
            'route="store"} 1.0') in text
    assert 'outcome="unmatched",route="store"} 1.0' in text
    assert "xrgw_conformance_failed_checks{" in text
    page = StatusPage().render(conformance.to_json(), {"store": True})
    assert "http-equiv=\"refresh\"" in page and "<script" not in page and "http://" not in page
    assert "data-count='received'>2<" in page and "4111" not in page


def test_report_from_spark_rows_and_dead_letters(tmp_path, capsys):
    spark = tmp_path / "report"
    spark.mkdir()
    (spark / "part-0.json").write_text("\n".join(json.dumps(r) for r in [
        {"window_start": "2026-01-01T00:00:00Z", "window_end": "2026-01-01T00:01:00Z",
         "definition": DESK, "matched": 5, "unmatched": 1, "invalid": 0},
        {"window_start": "2026-01-01T00:01:00Z", "window_end": "2026-01-01T00:02:00Z",
         "definition": DESK, "matched": 2, "unmatched": 0, "invalid": 1}]) + "\n")
    (spark / "_SUCCESS").write_text("")
    doc = load_report(str(spark))
    assert doc["rows"] == [{"window_start": "2026-01-01T00:00:00Z",
                            "window_end": "2026-01-01T00:02:00Z", "definition": DESK,
                            "matched": 7, "unmatched": 1, "invalid": 1}]
    letters = tmp_path / "dead.jsonl"
    explain = (Explanation(DESK, "topic_name: expected cashierdesk", 2),)
    lines = [deadletter_record(stray(i), protocol="KAFKA", reason=reasons.UNMATCHED,
                               explain=explain).to_json() for i in range(3)]
    lines.append(deadletter_record(sale(1), protocol="KAFKA",
                                   reason=reasons.MISSING_CONTEXT).to_json())
    letters.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert main(["report", str(letters)]) == 0
    out = capsys.readouterr().out
    assert any(line.split() == [DESK, "0", "3", "0"] for line in out.splitlines())
    assert any(line.split() == ["(none", "near)", "0", "0", "1"] for line in out.splitlines())
    assert "unmatched 3" in out and "missing-context 1" in out
    with pytest.raises(ReportError, match=r"dead\.jsonl:1: not JSON"):
        from_lines("dead.jsonl", ["{nope"])
    assert main(["report", str(tmp_path / "absent.json")]) == 2


CONFIG = """
definitions: [{store}]
routes:
  - from: store-mqtt
    to: [events-kafka]
    observe: {observe}
    redact: [data.card, {bad}]
deadletter: log
"""


def test_config_observe_and_redact():
    store = str(ROOT / "config/examples/store.xreg.json")
    config, problems = load_config_text(
        CONFIG.format(store=store, observe="true", bad="headers.auth"), "gateway.yaml", ROOT)
    assert config is not None, [str(p) for p in problems]
    assert config.routes[0].observe and config.routes[0].redact == ("data.card",
                                                                    "headers.auth")
    config, problems = load_config_text(
        CONFIG.format(store=store, observe="false", bad="'a..b'"), "gateway.yaml", ROOT)
    assert config is None
    assert [p.path for p in problems if p.is_error] == ["$.routes[0].redact[1]"]
    config, _ = load_config_text(CONFIG.format(store=store, observe="false", bad="x"),
                                 "gateway.yaml", ROOT)
    assert config is not None and not config.routes[0].observe
    observed, problems = load_config_text(
        CONFIG.format(store=store, observe="false", bad="x"), "gateway.yaml", ROOT,
        observe=True)
    assert observed is not None and all(r.observe for r in observed.routes), problems


def test_validate_observe_refuses_amqp_sources(capsys):
    examples = ROOT / "config/examples"
    assert main(["validate", "--no-env", "--observe", "-c",
                 str(examples / "amqp-orders.yaml")]) == 1
    out = capsys.readouterr().out
    assert "amqp-orders.yaml:10:5: error: --observe: endpoint 'orders-amqp' cannot be " \
           "observed" in out and "$.routes[0].from" in out
    assert main(["validate", "--no-env", "--observe", "-c",
                 str(examples / "mqtt-telemetry.yaml")]) == 0
    assert main(["validate", "--no-env", "-c", str(examples / "amqp-orders.yaml")]) == 0


def test_a_sample_of_a_body_with_a_lone_surrogate_does_not_raise() -> None:
    """The sample is built on the message path: a hostile body must not stop the batch."""
    from gateway.observability.conformance import SAMPLE_BYTES, sample_record
    from gateway.record import NativeMessage

    record = NativeMessage("MQTT/5.0", {"topic_name": "t"}, data={"v": "\ud800" * SAMPLE_BYTES})
    sample = sample_record(record, ())
    assert sample["truncated"] is True
    assert isinstance(sample["data"], str) and sample["data"].endswith("…")
