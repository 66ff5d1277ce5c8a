"""The matcher and envelope over the 31 real catalogs in tests/data/xregistry-catalogs.

For every definition that has a protocol, render a native message from its own
protocoloptions (template aspect) with sample context values, then match it back: the
definition must be found (alone, or among equally specific ones), and conversion must end
in a CloudEvent or a named dead-letter reason, never an exception.
"""

from pathlib import Path

import pytest

from gateway.convert import Converter
from gateway.deadletter.reasons import ALL as REASONS
from gateway.definitions import load_catalog
from gateway.envelope.native import context_names, render_native
from gateway.envelope.render import RenderError
from gateway.matching.lint import find_overlaps

ROOT = Path(__file__).resolve().parents[3]
CATALOGS = sorted(
    p for p in (ROOT / "tests/data/xregistry-catalogs").rglob("*")
    if p.suffix in (".json", ".cereg")
)


def test_all_31_catalogs_are_here():
    assert len(CATALOGS) == 31


@pytest.mark.parametrize("path", CATALOGS, ids=lambda p: p.name)
def test_every_definition_matches_its_own_rendering(path):
    catalog = load_catalog([path])
    # the one known error (a format typo upstream, see test_defs_real_catalogs) does not
    # stop matching
    assert all("dataschemaformat" in p.message for p in catalog.errors)
    definitions = list(catalog.messages())
    converter = Converter(definitions)
    checked = 0
    for definition in definitions:
        if definition.protocol is None:
            continue
        context = {name: f"v{i}" for i, name in enumerate(sorted(context_names(definition)))}
        record = render_native(definition, None, context)
        if isinstance(record, RenderError):
            continue  # e.g. a typed constant that cannot be rendered without an event
        result = converter.matcher.match(record)
        found = [result.definition, *result.tied]
        assert definition in found, (definition.xid, record.to_json(),
                                     [str(e.failure) for e in
                                      converter.matcher.explain(record)])
        outcome = converter.convert(record)
        assert outcome.ok or outcome.reason in REASONS
        checked += 1
    if any(d.protocol for d in definitions):
        assert checked > 0


# What each catalog's own renderings (sample values v0, v1, ...) convert to, per ambiguity
# setting: counts of events and of each dead-letter reason. Read off the catalogs: a
# definition without an envelope is `no-envelope`; a placeholder of an envelope attribute
# that no protocol option captures (bluesky's {firehoseurl}, seattle-911's
# {incident_datetime_utc}, ...) is `missing-context`; the definitions that share a
# protocol address with an equally specific one (aisstream's AMQP overlays, the inkjet
# Kafka variants, test-filters' groups) tie: `first` takes one, `deadletter` says
# `ambiguous`; a required `source` left empty is `invalid-envelope`. Catalogs without
# a renderable definition with a protocol are absent.
EXPECTED_OUTCOMES = {
    "aisstream.xreg.json": ({"event": 46},
        {"ambiguous": 23, "event": 23}),
    "bluesky.xreg.json": ({"missing-context": 12},
        {"ambiguous": 6, "missing-context": 6}),
    "jma_japan.xreg.json": ({"event": 2},
        {"event": 2}),
    "nws-alerts.xreg.json": ({"event": 5},
        {"event": 5}),
    "seattle-911.xreg.json": ({"missing-context": 2},
        {"missing-context": 2}),
    "usgs_nwis_wq.xreg.json": ({"missing-context": 4},
        {"missing-context": 4}),
    "inkjet-protocol-variants.xreg.json": ({"event": 10},
        {"ambiguous": 5, "event": 5}),
    "minimal-amqp-external-xsd.xreg.json": ({"no-envelope": 1},
        {"no-envelope": 1}),
    "amqp-consumer-endpoint-2grp-ce.xreg.json": ({"invalid-envelope": 2},
        {"ambiguous": 2}),
    "mqtt-consumer-endpoint.xreg.json": ({"no-envelope": 1},
        {"no-envelope": 1}),
    "mqtt-producer-endpoint.xreg.json": ({"no-envelope": 1},
        {"no-envelope": 1}),
    "inkjet-kafka-basemessageuri.xreg.json": ({"event": 2},
        {"ambiguous": 2}),
    "lightbulb-amqp.xreg.json": ({"no-envelope": 4},
        {"no-envelope": 4}),
    "mqtt-protocoloptions.xreg.json": ({"event": 2},
        {"event": 2}),
    "test-filters.xreg.json": ({"invalid-envelope": 5},
        {"ambiguous": 5}),
    "mqtt-sparkplugB.xreg.json": ({"no-envelope": 10},
        {"ambiguous": 2, "no-envelope": 8}),
    "watchkam-jsons07.xreg.json": ({"event": 1, "missing-context": 1},
        {"event": 1, "missing-context": 1}),
    "waterboiler-mqtt5-jsons07.xreg.json": ({"no-envelope": 2},
        {"no-envelope": 2}),
    "windgenerator-kafka-avro.xreg.json": ({"no-envelope": 2},
        {"no-envelope": 2}),
}


def _outcomes(definitions, ambiguity):
    converter = Converter(definitions, ambiguity=ambiguity)
    counts: dict[str, int] = {}
    for definition in definitions:
        if definition.protocol is None:
            continue
        context = {name: f"v{i}" for i, name in enumerate(sorted(context_names(definition)))}
        record = render_native(definition, None, context)
        if isinstance(record, RenderError):
            key = "not-rendered"
        else:
            outcome = converter.convert(record)
            key = "event" if outcome.ok else str(outcome.reason)
        counts[key] = counts.get(key, 0) + 1
    return counts


@pytest.mark.parametrize("path", CATALOGS, ids=lambda p: p.name)
def test_each_catalog_ends_in_the_expected_events_and_reasons(path):
    definitions = list(load_catalog([path]).messages())
    first, deadletter = EXPECTED_OUTCOMES.get(path.name, ({}, {}))
    assert _outcomes(definitions, "first") == first
    assert _outcomes(definitions, "deadletter") == deadletter


def test_nws_alerts_topic_picks_one_of_five_overlays():
    [path] = [p for p in CATALOGS if p.name == "nws-alerts.xreg.json"]
    catalog = load_catalog([path])
    mqtt = [d for d in catalog.messages() if d.protocol == "MQTT/5.0"]
    assert len(mqtt) >= 5
    converter = Converter(catalog.messages())
    hits = set()
    for definition in mqtt:
        context = {n: "x" for n in context_names(definition)}
        record = render_native(definition, None, context)
        assert not isinstance(record, RenderError)
        hits.add(converter.matcher.match(record).definition.xid)
    assert len(hits) == len(mqtt)  # the topic alone tells them apart


def test_lint_has_no_false_alarms_on_watchkam():
    # watchkam's source templates overlap ({tenantid}/{deviceid} vs {deviceid}), but the
    # `action` header constant and the CloudEvents type keep the definitions apart.
    [path] = [p for p in CATALOGS if p.name == "watchkam-jsons07.xreg.json"]
    catalog = load_catalog([path])
    assert find_overlaps(list(catalog.messages())) == []


def test_lint_finds_real_overlaps_in_aisstream_amqp_overlays():
    # aisstream's AMQP overlays all constrain only `properties.subject = {UserID}`: any
    # two of them accept the same message, which lint must say (with a witness).
    [path] = [p for p in CATALOGS if p.name == "aisstream.xreg.json"]
    catalog = load_catalog([path])
    amqp = [d for d in catalog.messages() if d.protocol == "AMQP/1.0"][:4]
    overlaps = find_overlaps(amqp)
    assert len(overlaps) == 6  # every pair of the four
    assert overlaps[0].example["properties"]["subject"]
