"""Every xRegistry endpoint option is honoured or reported, never silently dropped.

The spec's per-protocol option tables (`gateway.definitions.endpoints.ENDPOINT_OPTIONS`,
the seeds' endpoint/protocoloptions tables) are walked protocol by protocol: each option
must be implemented by the adapter's option spec or declared unsupported with a reason,
and a loaded config must carry the implemented ones to the adapter under their canonical
name while naming the unsupported ones in a problem.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters.kafka import KafkaOptions
from adapters.registry import OPTION_SPECS, REGISTRY
from gateway.config import load_config_text, reference_markdown
from gateway.definitions.endpoints import ENDPOINT_OPTIONS
from gateway.ports import EndpointSettings
from gateway.ports.options import Option, OptionSpec, Unsupported, squash
from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, MQTT311, NATS, PROTOCOLS

SPEC_OPTIONS = [(protocol, name) for protocol, names in ENDPOINT_OPTIONS.items()
                for name in names]
# A value of the right type for each implemented option (for the round trip below).
SAMPLE: dict[str, object] = {
    "topic": "t", "topicfilter": "a/+", "qos": 2, "retain": True, "cleanstart": True,
    "sessionexpiryinterval": 60, "sharedsubscriptiongroup": "g", "retainaspublished": True,
    "retainhandling": 1, "acks": 0, "key": "k", "partition": 3, "consumergroup": "grp",
    "headers": {"x-a": "1"}, "autooffsetreset": "latest", "subject": "s.t",
    "subjectfilter": "s.*", "queuegroup": "q", "node": "/queue/q", "durable": False,
    "method": "PUT", "query": {"a": "b"}, "terminus-durability": "unsettled-state",
    "expiry-policy": "never",
}


def test_every_protocol_has_an_adapter_spec():
    for protocol in PROTOCOLS:
        assert isinstance(REGISTRY.option_spec(protocol), OptionSpec), protocol


@pytest.mark.parametrize(("protocol", "name"), SPEC_OPTIONS)
def test_each_xregistry_option_is_implemented_or_declared_unsupported(protocol, name):
    spec = REGISTRY.option_spec(protocol)
    assert spec is not None
    entry = spec.lookup(name)
    assert entry is not None, f"{protocol} option {name!r} is neither implemented nor reported"
    if isinstance(entry, Option):
        assert entry.xregistry, f"{name} is implemented but not marked as an xRegistry option"
        assert not entry.derived
    else:
        assert isinstance(entry, Unsupported) and len(entry.reason) > 20


def test_options_marked_xregistry_are_the_specs_own():
    spec_names = {squash(n) for names in ENDPOINT_OPTIONS.values() for n in names}
    for spec in {id(s): s for s in OPTION_SPECS.values()}.values():
        for option in spec.options:
            if option.xregistry:
                assert squash(option.name) in spec_names, (spec.protocol, option.name)


def _load(tmp_path: Path, protocol: str, document_options: dict[str, Any],
          override: dict[str, Any] | None = None) -> tuple[Any, list[str]]:
    uri = {KAFKA: "kafka://127.0.0.1:9092", NATS: "nats://127.0.0.1:4222",
           AMQP: "amqp://127.0.0.1:5672", HTTP: "http://127.0.0.1:8080"}.get(
        protocol, "mqtt://127.0.0.1:1883")
    document = {
        "messagegroups": {"g": {"messages": {"m": {
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"type": {"value": "t"}, "source": {"value": "s"}}}}}},
        "endpoints": {
            "src": {"usage": ["consumer"], "protocol": protocol,
                    "messagegroups": ["/messagegroups/g"],
                    "protocoloptions": {"endpoints": [{"uri": uri}], **document_options}},
            "out": {"usage": ["producer"], "protocol": protocol,
                    "protocoloptions": {"endpoints": [{"uri": uri}]}},
        },
    }
    (tmp_path / "defs.xreg.json").write_text(json.dumps(document))
    config: dict[str, Any] = {"definitions": ["defs.xreg.json"], "deadletter": "log",
                              "routes": [{"from": "src", "to": ["out"], "mode": "structured"}]}
    if override is not None:
        config["endpoints"] = {"src": {"options": override}}
    loaded, problems = load_config_text(json.dumps(config), "gw.yaml", tmp_path, environ={})
    return loaded, [str(p) for p in problems]


@pytest.mark.parametrize(("protocol", "name"), SPEC_OPTIONS)
def test_a_document_option_reaches_the_adapter_or_is_named_unsupported(tmp_path, protocol,
                                                                        name):
    spec = REGISTRY.option_spec(protocol)
    assert spec is not None
    entry = spec.lookup(name)
    if name in ("endpoints", "authorization", "deployed"):
        return
    if isinstance(entry, Unsupported):
        loaded, problems = _load(tmp_path, protocol, {name: "x"})
        assert loaded is not None, problems
        named = [p for p in problems if f"'{name}'" in p and "does not support" in p]
        assert named and all(": warning: " in p for p in named), problems
        assert name not in loaded.endpoints["src"].options
        return
    assert isinstance(entry, Option)
    loaded, problems = _load(tmp_path, protocol, {name: SAMPLE[entry.name]})
    assert loaded is not None, problems
    assert loaded.endpoints["src"].options[entry.name] == SAMPLE[entry.name]
    assert spec.read(loaded.endpoints["src"].options)[entry.name] == SAMPLE[entry.name]


def test_kafka_autooffsetreset_in_a_document_reaches_the_consumer(tmp_path):
    # The reported bug: the xRegistry spelling loaded without a warning and was ignored.
    loaded, problems = _load(tmp_path, KAFKA, {"autooffsetreset": "latest"})
    assert loaded is not None, problems
    options = KafkaOptions.parse(EndpointSettings("kafka://h:1",
                                                  options=loaded.endpoints["src"].options))
    assert options.autooffsetreset == "latest"


def test_unsupported_option_written_in_the_gateway_config_is_an_error(tmp_path):
    loaded, problems = _load(tmp_path, MQTT5, {}, override={"willtopic": "last/will"})
    assert loaded is None
    assert any(": error: " in p and "($.endpoints.src.options.willtopic)" in p
               and "does not support" in p for p in problems), problems


def test_unknown_option_in_the_gateway_config_is_an_error_with_a_suggestion(tmp_path):
    loaded, problems = _load(tmp_path, KAFKA, {}, override={"autooffsetrest": "latest"})
    assert loaded is None
    assert any(": error: " in p and "options.autooffsetrest)" in p
               and "did you mean 'autooffsetreset'" in p for p in problems), problems


def test_bad_option_value_is_an_error_at_load_not_at_run(tmp_path):
    loaded, problems = _load(tmp_path, MQTT5, {"qos": 1}, override={"max_in_flight": 0})
    assert loaded is None
    assert any(": error: " in p and "options.max_in_flight)" in p for p in problems), problems
    loaded, problems = _load(tmp_path, KAFKA, {"autooffsetreset": "newest"})
    assert loaded is None
    assert any("defs.xreg.json" in p and ": error: " in p
               and "protocoloptions.autooffsetreset)" in p for p in problems), problems


def test_option_the_factory_derives_cannot_be_set(tmp_path):
    loaded, problems = _load(tmp_path, MQTT311, {}, override={"protocol": "5.0"})
    assert loaded is None
    assert any(": error: " in p and "options.protocol)" in p and "set by xrgw" in p
               for p in problems)


def test_old_adapter_spellings_still_work(tmp_path):
    loaded, problems = _load(tmp_path, MQTT5, {}, override={"filters": ["a/#"],
                                                            "session_expiry": 30})
    assert loaded is not None, problems
    assert loaded.endpoints["src"].options["topicfilter"] == ["a/#"]
    assert loaded.endpoints["src"].options["sessionexpiryinterval"] == 30


def test_durations_and_numbers_of_seconds_are_both_accepted(tmp_path):
    loaded, problems = _load(tmp_path, NATS, {}, override={"ack_wait": "1m", "nak_delay": 2})
    assert loaded is not None, problems
    assert loaded.endpoints["src"].options["ack_wait"] == 60.0
    assert loaded.endpoints["src"].options["nak_delay"] == 2.0


def test_reference_documents_every_option_and_every_gap():
    page = reference_markdown()
    for spec in {id(s): s for s in OPTION_SPECS.values()}.values():
        for option in spec.options:
            assert (f"| `{option.name}`" in page) != option.derived, option.name
        for gap in spec.unsupported:
            assert f"- `{gap.name}`: {gap.reason}" in page


def test_a_removed_option_says_what_replaces_it(tmp_path):
    loaded, problems = _load(tmp_path, HTTP, {}, override={"retries": 3})
    assert loaded is None
    assert any(": error: 'retries' is no longer a HTTP endpoint option: the route retries" in p
               and "($.endpoints.src.options.retries)" in p for p in problems), problems


def test_a_spec_refuses_two_options_with_the_same_name():
    from gateway.config import Field

    with pytest.raises(ValueError, match="declared twice"):
        OptionSpec("X", (Option(Field("auto_offset_reset", "str", "")),
                         Option(Field("autooffsetreset", "str", ""))))


def test_document_problems_point_at_the_option_that_wrote_them(tmp_path):
    # A name json_path quotes (`["link-properties"]`) once lost its place in the document.
    _, problems = _load(tmp_path, AMQP, {"link-properties": {"a": "b"}})
    assert any("defs.xreg.json" in p and ": warning: " in p
               and '($.endpoints.src.protocoloptions["link-properties"])' in p
               for p in problems), problems
