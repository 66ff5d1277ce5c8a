"""`xrgw diff OLD NEW [--replay ...]` on real catalogs (tests/data/xregistry-catalogs) with
deliberate changes: a changed template, a removed definition, a new overlapping
definition, a tightened type, a changed envelope attribute; records replayed from native
records, dead letters (metadata and MQTT 3.1.1 body forms) and Spark dead-letter lines;
every exit code; a registry URL as NEW."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from gateway.catalogdiff.text import render
from gateway.cli import main
from gateway.deadletter.format import deadletter_record
from gateway.protocols import KAFKA, MQTT311
from gateway.record import NativeMessage
from tests.unit.definitions.test_defs_sources import _server

ROOT = Path(__file__).resolve().parents[3]
CATALOGS = ROOT / "tests/data/xregistry-catalogs"
NWS = CATALOGS / "real-time-sources/feeders/nws-alerts/xreg/nws-alerts.xreg.json"
WIND = CATALOGS / "xregistry-spec/cloudevents/samples/scenarios/windgenerator-kafka-avro.xreg.json"

MQTT_GROUP = "NWS.Alerts.mqtt"
BASE = "/messagegroups/NWS.Alerts/messages/NWS.WeatherAlert"
TOPIC = "alerts/us/noaa/nws-alerts/{state}/{level}/{event_type}/{alert_id}/alert"


def xid(level: str) -> str:
    return f"/messagegroups/{MQTT_GROUP}/messages/NWS.WeatherAlert.{level}.mqtt"


def alert(level: str, alert_id: str = "A1") -> dict[str, Any]:
    """An MQTT 5 record as the NWS feeder publishes it (qos 1, not retained)."""
    return {"protocol": "MQTT/5.0", "qos": 1, "retain": False, "data": {"id": alert_id},
            "topic_name": TOPIC.format(state="WA", level=level, event_type="flood",
                                       alert_id=alert_id)}


RECORDS = [alert(level, f"A{n}") for n, level in
           enumerate(["minor", "moderate", "severe", "extreme", "unknown"])]

Change = Callable[[dict[str, Any]], None]


def pair(tmp_path: Path, change: Change, source: Path = NWS) -> tuple[str, str]:
    """OLD: the real catalog as it is; NEW: a copy with `change` made to it."""
    document = json.loads(source.read_text(encoding="utf-8"))
    old, new = tmp_path / "old.xreg.json", tmp_path / "new.xreg.json"
    old.write_text(json.dumps(document, indent=2), encoding="utf-8")
    changed = copy.deepcopy(document)
    change(changed)
    new.write_text(json.dumps(changed, indent=2), encoding="utf-8")
    return str(old), str(new)


def records_file(tmp_path: Path, records: list[Any], name: str = "records.jsonl") -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def mqtt_messages(document: dict[str, Any]) -> dict[str, Any]:
    messages: dict[str, Any] = document["messagegroups"][MQTT_GROUP]["messages"]
    return messages


def diff_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["diff", "--format", "json", *argv])
    return code, json.loads(capsys.readouterr().out)


# -- changes ------------------------------------------------------------------------------------

def change_minor_template(document: dict[str, Any]) -> None:
    # The trailing `/alert` dropped: what the publisher sends no longer fits.
    mqtt_messages(document)["NWS.WeatherAlert.Minor.mqtt"]["protocoloptions"]["topic_name"] = (
        "alerts/us/noaa/nws-alerts/{state}/minor/{event_type}/{alert_id}")


def remove_unknown(document: dict[str, Any]) -> None:
    del mqtt_messages(document)["NWS.WeatherAlert.Unknown.mqtt"]


def add_severe_copy(topic_name: str) -> Change:
    """A new definition `Any`: the severe one with another topic template."""
    def change(document: dict[str, Any]) -> None:
        messages = mqtt_messages(document)
        copied = copy.deepcopy(messages["NWS.WeatherAlert.Severe.mqtt"])
        copied["protocoloptions"]["topic_name"] = topic_name
        messages["NWS.WeatherAlert.Any.mqtt"] = copied
    return change


# The severe topic, placeholders renamed: as specific as Severe, so a true tie.
add_overlapping = add_severe_copy("alerts/us/noaa/nws-alerts/{region}/severe/{kind}/{alert}/alert")
# Any level: overlaps every level's definition, but is less specific than each.
add_any_level = add_severe_copy(TOPIC)


def change_source(document: dict[str, Any]) -> None:
    base = document["messagegroups"]["NWS.Alerts"]["messages"]["NWS.WeatherAlert"]
    base["envelopemetadata"]["source"]["value"] = "https://api.weather.gov/alerts"


# -- definitions and exit codes -----------------------------------------------------------------

def test_identical_catalogs_are_not_worse_and_random_ids_do_not_count(tmp_path, capsys):
    old, new = pair(tmp_path, lambda document: None)
    records = records_file(tmp_path, RECORDS)
    code, report = diff_json(capsys, old, new, "--replay", records)
    assert code == 0
    assert report["definitions"]["changes"] == []
    assert report["lint"] == {"introduced": [], "resolved": []}
    # MQTT 5 records without correlation data get a random id under each catalog, and the
    # receive time is one for both: every record is the same.
    assert report["replay"]["counts"] == {"same": 5}
    assert report["worse"] == {}
    assert main(["diff", old, new, "--replay", records]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "not worse"


def test_changed_template_makes_records_newly_unmatched(tmp_path, capsys):
    old, new = pair(tmp_path, change_minor_template)
    code, report = diff_json(capsys, old, new, "--replay", records_file(tmp_path, RECORDS))
    assert code == 1
    [changed] = report["definitions"]["changes"]
    assert changed["xid"] == xid("Minor") and changed["change"] == "changed"
    assert changed["fields"] == [{
        "field": "protocoloptions.topic_name.value",
        "old": "alerts/us/noaa/nws-alerts/{state}/minor/{event_type}/{alert_id}/alert",
        "new": "alerts/us/noaa/nws-alerts/{state}/minor/{event_type}/{alert_id}"}]
    assert report["replay"]["counts"] == {"same": 4, "newly-unmatched": 1}
    [record] = report["replay"]["changes"]
    assert record["input"].endswith("records.jsonl:1")
    assert record["old"] == {"status": "matched", "definition": xid("Minor")}
    assert record["new"]["status"] == "unmatched"
    assert record["new"]["detail"] == (
        f"nearest {xid('Minor')}: topic_name: expected "
        "alerts/us/noaa/nws-alerts/{state}/minor/{event_type}/{alert_id}, got "
        "alerts/us/noaa/nws-alerts/WA/minor/flood/A0/alert")
    assert report["worse"] == {"newly-unmatched": 1}


def test_removed_definition(tmp_path, capsys):
    old, new = pair(tmp_path, remove_unknown)
    records = records_file(tmp_path, RECORDS)
    code, report = diff_json(capsys, old, new, "--replay", records)
    assert code == 1
    assert [(c["xid"], c["change"]) for c in report["definitions"]["changes"]] == [
        (xid("Unknown"), "removed")]
    assert report["definitions"]["old"] == 6 and report["definitions"]["new"] == 5
    [record] = report["replay"]["changes"]
    assert record["input"].endswith(":5") and record["change"] == "newly-unmatched"
    assert record["old"]["definition"] == xid("Unknown")
    # Without records nothing shows that the removal is for the worse.
    assert main(["diff", old, new]) == 0
    out = capsys.readouterr().out
    assert f"  - {xid('Unknown')}" in out and "0 added, 1 removed, 0 changed" in out


def test_new_overlapping_definition_is_a_new_ambiguity_with_its_witness(tmp_path, capsys):
    old, new = pair(tmp_path, add_overlapping)
    code, report = diff_json(capsys, old, new)
    assert code == 1  # a new overlapping pair alone is for the worse
    assert [(c["xid"], c["change"]) for c in report["definitions"]["changes"]] == [
        (xid("Any"), "added")]
    [finding] = report["lint"]["introduced"]
    assert finding["kind"] == "overlap"
    assert (finding["first"], finding["second"]) == (xid("Severe"), xid("Any"))
    assert finding["file"] == new and finding["line"] is not None
    witness = NativeMessage.from_json(finding["example"])
    assert witness.fields["topic_name"] == "alerts/us/noaa/nws-alerts/x1/severe/x1/x1/alert"
    assert report["worse"] == {"new-overlapping-pairs": 1}
    # Replayed, the severe alert is now taken by a tie; the other levels are not.
    code, report = diff_json(capsys, old, new, "--replay", records_file(tmp_path, RECORDS))
    assert report["replay"]["counts"] == {"same": 4, "newly-ambiguous": 1}
    [record] = report["replay"]["changes"]
    assert record["input"].endswith(":3")
    assert record["new"]["tied"] == [xid("Severe"), xid("Any")]
    assert report["worse"] == {"newly-ambiguous": 1, "new-overlapping-pairs": 1}


def test_overlap_that_specificity_decides_changes_no_record(tmp_path, capsys):
    old, new = pair(tmp_path, add_any_level)
    code, report = diff_json(capsys, old, new, "--replay", records_file(tmp_path, RECORDS))
    # lint finds five pairs that can match the same message ...
    assert {frozenset((f["first"], f["second"])) for f in report["lint"]["introduced"]} == {
        frozenset((xid(level), xid("Any")))
        for level in ("Minor", "Moderate", "Severe", "Extreme", "Unknown")}
    # ... but each level's own definition is more specific, so no record moves.
    assert report["replay"]["counts"] == {"same": 5}
    assert code == 1 and report["worse"] == {"new-overlapping-pairs": 5}
    code, report = diff_json(capsys, old, new, "--replay",
                             records_file(tmp_path, [alert("unlisted")]))
    assert report["replay"]["counts"] == {"newly-matched": 1}
    assert report["replay"]["changes"][0]["new"] == {"status": "matched",
                                                     "definition": xid("Any")}


def test_resolved_ambiguity_is_not_worse(tmp_path, capsys):
    # The reverse change: OLD has the overlapping definition, NEW has not.
    without, with_overlap = pair(tmp_path, add_overlapping)
    code, report = diff_json(capsys, with_overlap, without, "--replay",
                             records_file(tmp_path, RECORDS))
    assert code == 0
    assert report["lint"]["introduced"] == []
    [resolved] = report["lint"]["resolved"]
    assert resolved["file"] == with_overlap
    assert report["replay"]["counts"] == {"same": 4, "no-longer-ambiguous": 1}
    assert report["definitions"]["removed"] == 1


def test_changed_envelope_attribute_is_listed_per_record(tmp_path, capsys):
    old, new = pair(tmp_path, change_source)
    code, report = diff_json(capsys, old, new, "--replay", records_file(tmp_path, RECORDS))
    assert code == 1
    # The base message and every overlay built on it changed the same field.
    changes = report["definitions"]["changes"]
    assert len(changes) == 6 and {c["xid"] for c in changes} >= {BASE, xid("Minor")}
    assert all(c["fields"] == [{"field": "envelopemetadata.source.value",
                                "old": "https://api.weather.gov",
                                "new": "https://api.weather.gov/alerts"}] for c in changes)
    assert report["replay"]["counts"] == {"different-attributes": 5}
    # Only `source` differs: the random ids and the receive time are not reported.
    assert all(c["attributes"] == [{"field": "source", "old": "https://api.weather.gov",
                                    "new": "https://api.weather.gov/alerts"}]
               for c in report["replay"]["changes"])


def test_deterministic_ids_are_compared(tmp_path, capsys):
    def declare_id(document: dict[str, Any]) -> None:
        base = document["messagegroups"]["NWS.Alerts"]["messages"]["NWS.WeatherAlert"]
        base["envelopemetadata"]["id"] = {"type": "uritemplate", "value": "nws-{alert_id}"}

    old, new = pair(tmp_path, declare_id)
    code, report = diff_json(capsys, old, new, "--replay",
                             records_file(tmp_path, [alert("severe", "A7")]))
    assert code == 1
    [record] = report["replay"]["changes"]
    [attribute] = record["attributes"]
    assert attribute["field"] == "id" and attribute["new"] == "nws-A7"
    assert attribute["old"] != "nws-A7"  # OLD's random id


def test_tightened_type(tmp_path, capsys):
    def integer_key(document: dict[str, Any]) -> None:
        messages = document["messagegroups"]["WindGenerator.Events"]["messages"]
        messages["WindGenerator.PowerOutputUpdate"]["protocoloptions"]["key"] = {
            "type": "integer", "required": True}

    old, new = pair(tmp_path, integer_key, WIND)
    kafka = [{"protocol": "KAFKA", "topic": "wind", "partition": 0, "offset": n, "key": key,
              "headers": [{"name": "action", "value": "powerOutput"}], "data": {"p": n}}
             for n, key in enumerate(["17", "WG-7"])]
    code, report = diff_json(capsys, old, new, "--replay", records_file(tmp_path, kafka))
    assert code == 1
    [changed] = report["definitions"]["changes"]
    assert {f["field"]: (f.get("old"), f.get("new")) for f in changed["fields"]} == {
        "protocoloptions.key.type": ("string", "integer"),
        "protocoloptions.key.value": ("{generatorId}", None),
        "protocoloptions.key.required": (False, True)}
    # The declaration is a new warning (Kafka keys are strings) ...
    [warning] = report["lint"]["introduced"]
    assert warning["kind"] == "problem" and warning["severity"] == "warning"
    assert "declared as 'integer'" in warning["message"]
    # ... and the key that is no integer no longer matches.
    assert report["replay"]["counts"] == {"same": 1, "newly-unmatched": 1}
    assert report["replay"]["changes"][0]["input"].endswith(":2")
    assert report["worse"] == {"newly-unmatched": 1}
    # Without records a new warning is for the worse only with --strict.
    assert main(["diff", old, new]) == 0
    assert main(["diff", "--strict", old, new]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "worse: new-warnings 1"


# -- replay inputs ------------------------------------------------------------------------------

def test_dead_letters_and_spark_lines_replay_their_original_record(tmp_path, capsys):
    old, new = pair(tmp_path, change_minor_template)
    original = NativeMessage.from_json(alert("minor", "D1"))
    with_metadata = deadletter_record(original, protocol=KAFKA, reason="unmatched",
                                      source_endpoint="nws")
    as_body = deadletter_record(original, protocol=MQTT311, reason="unmatched")
    spark_line = {"reason": "unmatched", "match": None,
                  "record": json.dumps(alert("minor", "D2")), "deadletter": "{}"}
    lines = [with_metadata.to_json(), as_body.to_json(), spark_line, {"not": "a record"}]
    code, report = diff_json(capsys, old, new, "--replay", records_file(tmp_path, lines))
    assert code == 1
    assert report["replay"]["counts"] == {"newly-unmatched": 3}
    assert [c["old"]["definition"] for c in report["replay"]["changes"]] == [xid("Minor")] * 3
    [invalid] = report["replay"]["invalid"]
    assert invalid["input"].endswith(":4") and 'missing "protocol"' in invalid["error"]


def test_replay_directory_and_several_files(tmp_path, capsys):
    old, new = pair(tmp_path, remove_unknown)
    folder = tmp_path / "samples"
    folder.mkdir()
    records_file(folder, RECORDS[:2], "a.jsonl")
    records_file(folder, RECORDS[4:], "b.ndjson")
    (folder / "notes.txt").write_text("not read")
    extra = records_file(tmp_path, RECORDS[2:3], "extra.jsonl")
    code, report = diff_json(capsys, old, new, "--replay", str(folder), "--replay", extra)
    assert code == 1 and report["replay"]["records"] == 4
    [record] = report["replay"]["changes"]
    assert record["input"] == f"{folder / 'b.ndjson'}:1"


# -- load problems, usage, registry URLs ----------------------------------------------------------

def test_load_and_usage_problems_are_exit_2(tmp_path, capsys):
    old, new = pair(tmp_path, lambda document: None)
    assert main(["diff", old, str(tmp_path / "missing.xreg.json")]) == 2
    err = capsys.readouterr().err
    assert "missing.xreg.json: error: file not found" in err and "NEW" in err
    garbled = tmp_path / "garbled.xreg.json"
    garbled.write_text("{not json")
    assert main(["diff", str(garbled), new]) == 2
    assert "OLD" in capsys.readouterr().err
    assert main(["diff", old, new, "--replay", str(tmp_path / "none.jsonl")]) == 2
    assert "none.jsonl" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["diff", old])
    assert usage.value.code == 2


def test_errors_new_brings_are_worse_and_errors_it_fixes_are_resolved(tmp_path, capsys):
    # A real catalog with a real error: a schema reference without dataschemaformat.
    nats = CATALOGS / "xregistry-codegen/samples/protocols/nats-consumer-endpoint.xreg.json"

    def fix(document: dict[str, Any]) -> None:
        for group in document["messagegroups"].values():
            for message in group["messages"].values():
                if "dataschemauri" in message and "dataschemaformat" not in message:
                    message["dataschemaformat"] = "JsonSchema/draft-07"

    broken, fixed = pair(tmp_path, fix, nats)
    code, report = diff_json(capsys, broken, fixed)
    assert code == 0
    assert report["lint"]["introduced"] == []
    assert [f["severity"] for f in report["lint"]["resolved"]] == ["error"]
    assert "dataschemaformat" in report["lint"]["resolved"][0]["message"]
    # The reverse: the change brings the error.
    code, report = diff_json(capsys, fixed, broken)
    assert code == 1
    [error] = report["lint"]["introduced"]
    assert (error["kind"], error["severity"]) == ("problem", "error")
    assert error["file"] == broken and error["line"] is not None
    assert report["worse"] == {"new-errors": 1}


def test_registry_url_as_new(tmp_path, capsys):
    old, new = pair(tmp_path, change_minor_template)
    served = Path(new).read_bytes()

    def respond(path: str) -> tuple[int, bytes]:
        return (200, served) if urlsplit(path).path == "/registry/export" else (404, b"{}")

    with _server(respond) as (url, asked):
        code, report = diff_json(capsys, old, url, "--replay",
                                 records_file(tmp_path, RECORDS))
    assert asked == ["/registry/export"]
    assert code == 1
    assert report["new"] == url
    assert [c["xid"] for c in report["definitions"]["changes"]] == [xid("Minor")]
    assert report["replay"]["counts"] == {"same": 4, "newly-unmatched": 1}


# -- text form ----------------------------------------------------------------------------------

def test_text_form_is_plain_off_a_terminal_and_coloured_on_one(tmp_path, capsys):
    old, new = pair(tmp_path, change_minor_template)
    argv = ["diff", old, new, "--replay", records_file(tmp_path, RECORDS)]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "\033[" not in out
    assert f"  ~ {xid('Minor')}\n      protocoloptions.topic_name.value: " in out
    assert "replay: 5 record(s): 4 same, 1 newly-unmatched" in out
    assert f"records.jsonl:1: newly-unmatched: {xid('Minor')} -> unmatched: nearest" in out
    assert out.splitlines()[-1] == "worse: newly-unmatched 1"

    from gateway.catalogdiff.definitions import diff_definitions
    from gateway.catalogdiff.findings import FindingsDiff
    from gateway.catalogdiff.verdict import CatalogDiff
    from gateway.definitions import load_catalog

    before, after = (list(load_catalog([p]).messages()) for p in (old, new))
    diff = CatalogDiff(old, new, len(before), len(after), diff_definitions(before, after),
                       FindingsDiff(), None)
    coloured = render(diff, colour=True)
    assert f"\033[33m  ~ {xid('Minor')}\033[0m" in coloured
    assert coloured.endswith("\033[32mnot worse\033[0m\n")


def test_colour_follows_the_terminal_and_no_color(monkeypatch):
    from gateway.commands.diff import _colour

    class Terminal:
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert _colour(Terminal())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not _colour(Terminal())


# -- more changes -------------------------------------------------------------------------------

WATERBOILER = (CATALOGS / "xregistry-spec/cloudevents/samples/scenarios/"
               "waterboiler-mqtt5-jsons07.xreg.json")


def test_a_more_specific_new_definition_takes_records_over(tmp_path, capsys):
    # Severe floods get a definition of their own: more literal text than Severe's.
    old, new = pair(tmp_path, add_severe_copy(
        "alerts/us/noaa/nws-alerts/{state}/severe/flood/{alert_id}/alert"))
    records = [alert("severe", "F1"), {**alert("severe", "W1"), "topic_name":
               "alerts/us/noaa/nws-alerts/WA/severe/wind/W1/alert"}]
    code, report = diff_json(capsys, old, new, "--replay", records_file(tmp_path, records))
    assert code == 1
    # lint names the pair (both accept a severe flood); the matcher takes the more specific.
    assert [(f["first"], f["second"]) for f in report["lint"]["introduced"]] == [
        (xid("Severe"), xid("Any"))]
    assert report["replay"]["counts"] == {"same": 1, "different-definition": 1}
    [record] = report["replay"]["changes"]
    assert record["input"].endswith(":1")
    assert (record["old"]["definition"], record["new"]["definition"]) == (
        xid("Severe"), xid("Any"))
    assert report["worse"] == {"different-definition": 1, "new-overlapping-pairs": 1}


def test_a_placeholder_the_message_does_not_give_is_newly_dead_lettered(tmp_path, capsys):
    def rename_placeholder(document: dict[str, Any]) -> None:
        base = document["messagegroups"]["NWS.Alerts"]["messages"]["NWS.WeatherAlert"]
        base["envelopemetadata"]["subject"]["value"] = "{alertid}"  # not in the topic

    old, new = pair(tmp_path, rename_placeholder)
    code, report = diff_json(capsys, old, new, "--replay", records_file(tmp_path, RECORDS))
    assert code == 1
    assert report["replay"]["counts"] == {"newly-dead-lettered": 5}
    first = report["replay"]["changes"][0]
    assert first["old"] == {"status": "matched", "definition": xid("Minor")}
    assert first["new"]["status"] == "dead-letter" and first["new"]["definition"] == xid("Minor")
    assert first["new"]["reason"] == "missing-context"
    assert "{alertid}" in first["new"]["detail"]
    # The text form lists --show records of each change and counts the rest.
    assert main(["diff", old, new, "--replay", records_file(tmp_path, RECORDS),
                 "--show", "2"]) == 1
    out = capsys.readouterr().out
    assert out.count("newly-dead-lettered: ") == 2
    assert f"{xid('Minor')}: converted -> dead-lettered (missing-context): " in out
    assert "  ... and 3 more newly-dead-lettered record(s) (--show 0 lists all)" in out


def test_a_changed_schema_shows_member_by_member(tmp_path, capsys):
    def tighten(document: dict[str, Any]) -> None:
        schemas = document["schemagroups"]["WaterBoiler"]["schemas"]
        schema = schemas["WaterBoiler.TemperatureUpdateEventData"]["versions"]["1"]["schema"]
        schema["properties"]["temperature"]["type"] = "integer"
        schema["required"].append("unit")

    old, new = pair(tmp_path, tighten, WATERBOILER)
    code, report = diff_json(capsys, old, new)
    assert code == 0
    [changed] = report["definitions"]["changes"]
    assert changed["xid"] == (
        "/messagegroups/WaterBoiler.Events/messages/WaterBoiler.TemperatureUpdate")
    assert changed["fields"] == [
        {"field": "schema.properties.temperature.type", "old": "number", "new": "integer"},
        {"field": "schema.required", "old": ["boilerId", "temperature", "timestamp"],
         "new": ["boilerId", "temperature", "timestamp", "unit"]}]


def test_schema_enforce_replays_a_tightened_schema(tmp_path, capsys):
    def inline_schema(document: dict[str, Any]) -> None:
        base = document["messagegroups"]["NWS.Alerts"]["messages"]["NWS.WeatherAlert"]
        del base["dataschemauri"]
        base["dataschemaformat"] = "JsonSchema/draft-07"
        base["dataschema"] = {"type": "object", "required": ["id", "severity"]}

    old, new = pair(tmp_path, inline_schema)
    records = records_file(tmp_path, [alert("minor", "S1"), {
        **alert("severe", "S2"), "data": {"id": "S2", "severity": "Severe"}}])
    code, report = diff_json(capsys, old, new, "--replay", records, "--schema", "enforce")
    assert code == 1
    assert report["replay"]["counts"] == {"same": 1, "newly-dead-lettered": 1}
    [record] = report["replay"]["changes"]
    assert record["new"]["reason"] == "invalid-data" and "severity" in record["new"]["detail"]
    # Without a schema policy the body is not checked, as on a route without `schema:`.
    code, report = diff_json(capsys, old, new, "--replay", records)
    assert report["replay"]["counts"] == {"same": 2}


def test_replay_from_stdin(tmp_path, capsys, monkeypatch):
    import io

    old, new = pair(tmp_path, remove_unknown)
    monkeypatch.setattr("sys.stdin", io.StringIO(
        "".join(json.dumps(r) + "\n" for r in RECORDS) + "\n"))
    code, report = diff_json(capsys, old, new, "--replay", "-")
    assert code == 1
    assert report["replay"]["records"] == 5
    assert report["replay"]["changes"][0]["input"] == "-:5"


CONTOSO = CATALOGS / "xregistry-spec/cloudevents/samples/scenarios/contoso-erp-jsons07.xreg.json"


def test_each_event_of_an_http_batch_is_replayed(tmp_path, capsys):
    def move_source(document: dict[str, Any]) -> None:
        messages = document["messagegroups"]["Contoso.ERP.ReservationEvents"]["messages"]
        placed = messages["Contoso.ERP.ReservationPlaced"]
        placed["envelopemetadata"]["source"]["value"] = "/erp/{tenantid}/reservations"

    old, new = pair(tmp_path, move_source, CONTOSO)
    events = [{"specversion": "1.0", "id": f"e{n}", "type": f"Contoso.ERP.{kind}",
               "source": f"/erp/t1/{where}", "subject": "s1", "time": "2026-01-01T00:00:00Z",
               "data": {}}
              for n, (kind, where) in enumerate([("ReservationPlaced", "orders"),
                                                 ("PaymentsReceived", "payments")])]
    batch = {"protocol": "HTTP", "method": "POST", "path": "/events", "data": events,
             "headers": [{"name": "content-type",
                          "value": "application/cloudevents-batch+json"}]}
    code, report = diff_json(capsys, old, new, "--replay", records_file(tmp_path, [batch]))
    assert code == 1
    assert report["replay"]["counts"] == {"same": 1, "newly-unmatched": 1}
    [record] = report["replay"]["changes"]
    assert record["input"].endswith(":1") and record["member"] == 0
    assert record["old"]["definition"] == (
        "/messagegroups/Contoso.ERP.ReservationEvents/messages/Contoso.ERP.ReservationPlaced")


def test_directories_as_old_and_new(tmp_path, capsys):
    old, new = pair(tmp_path, remove_unknown)
    for name, path in (("before", old), ("after", new)):
        (tmp_path / name).mkdir()
        Path(path).rename(tmp_path / name / "nws-alerts.xreg.json")
    code, report = diff_json(capsys, str(tmp_path / "before"), str(tmp_path / "after"))
    assert code == 0
    [removed] = report["definitions"]["changes"]
    assert removed["change"] == "removed"
    assert removed["file"] == str(tmp_path / "before" / "nws-alerts.xreg.json")


def test_a_changed_endpoint_is_listed_but_not_worse(tmp_path, capsys):
    def move_topic(document: dict[str, Any]) -> None:
        document["endpoints"]["NWS.Alerts.Kafka"]["protocoloptions"]["options"]["topic"] = (
            "nws-alerts-v2")

    old, new = pair(tmp_path, move_topic)
    code, report = diff_json(capsys, old, new)
    assert code == 0
    assert report["definitions"]["changes"] == []
    endpoints = report["endpoints"]
    assert (endpoints["old"], endpoints["new"], endpoints["changed"]) == (3, 3, 1)
    [changed] = endpoints["changes"]
    assert changed["xid"] == "/endpoints/NWS.Alerts.Kafka"
    assert changed["fields"] == [{"field": "protocoloptions.topic", "old": "nws-alerts",
                                  "new": "nws-alerts-v2"}]
    assert main(["diff", old, new]) == 0
    out = capsys.readouterr().out
    assert "endpoints: 0 added, 0 removed, 1 changed" in out
    assert '      protocoloptions.topic: "nws-alerts" -> "nws-alerts-v2"' in out
    # Without an endpoint change the text has no endpoints section.
    assert main(["diff", old, old]) == 0
    assert "endpoints:" not in capsys.readouterr().out


def test_the_reader_hook_takes_a_new_line_format(tmp_path, capsys, monkeypatch):
    from gateway.catalogdiff import records

    old, new = pair(tmp_path, change_minor_template)
    # A record under `record` as an object (what `xrgw tap` lines are meant to carry) is
    # read without a new reader ...
    enveloped = {"route": "alerts", "outcome": "matched", "record": alert("minor", "T1")}
    # ... and a format that keeps it elsewhere needs one, put before the envelope reader.
    elsewhere = {"tap": {"in": alert("minor", "T2")}}

    def tap_record(obj: dict[str, Any]) -> NativeMessage | None:
        tap = obj.get("tap")
        return NativeMessage.from_json(tap["in"]) if isinstance(tap, dict) else None

    lines = records_file(tmp_path, [enveloped, elsewhere])
    code, report = diff_json(capsys, old, new, "--replay", lines)
    assert report["replay"]["counts"] == {"newly-unmatched": 1}
    assert len(report["replay"]["invalid"]) == 1
    monkeypatch.setattr(records, "READERS", [tap_record, *records.READERS])
    code, report = diff_json(capsys, old, new, "--replay", lines)
    assert code == 1 and report["replay"]["counts"] == {"newly-unmatched": 2}
