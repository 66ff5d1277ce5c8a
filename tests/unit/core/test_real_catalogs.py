"""The matcher and envelope over the 31 real catalogs in tests/data/xregistry-catalogs.

For every definition that has a protocol, render a native message from its own
protocoloptions (template aspect) with sample context values, then match it back: the
definition must be found (alone, or among equally specific ones), and conversion must end
in a CloudEvent or a named dead-letter reason, never an exception.
"""

from pathlib import Path

import pytest

from gateway.convert import Converter
from gateway.definitions import load_catalog
from gateway.envelope.native import context_names, render_native
from gateway.envelope.render import RenderError
from gateway.matching.lint import find_overlaps
from gateway.reasons import ALL as REASONS

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
