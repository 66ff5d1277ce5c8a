"""`xrgw test`: definition test cases, like a rules unit test.

A case file (YAML or JSON) names the documents and lists cases; each feeds one native
message record and states what must come out. Expected CloudEvent attributes are a
subset check (attributes not listed are not compared), so generated `id`/`time` can be
left out.

    definitions: [store.xreg.json]          # relative to the case file
    ambiguity: first                        # optional: first | deadletter
    cases:
      - name: a sale at desk 3
        input: {protocol: MQTT/5.0, topic_name: /store/12/cashierdesk/3, ...}
        expect:
          match: /messagegroups/store/messages/sale
          context: {storeid: "12", cdid: "3"}
          cloudevent: {type: sale, source: "12", subject: "3"}
      - name: a topic nobody declared
        input: {protocol: MQTT/5.0, topic_name: /elsewhere}
        expect: {match: null, reason: unmatched}
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import yaml

from gateway.convert import Converter
from gateway.definitions import load_catalog
from gateway.json.text import utf8_json
from gateway.record import NativeMessage, RecordError


def _actual(conversion_json: dict[str, Any], expect: dict[str, Any]) -> dict[str, Any]:
    """The part of the result the case makes claims about, shaped like `expect`."""
    actual: dict[str, Any] = {}
    for key in expect:
        if key == "cloudevent":
            event = conversion_json.get("cloudevent") or {}
            wanted = expect["cloudevent"] or {}
            actual["cloudevent"] = {k: event.get(k) for k in wanted} if event else None
        else:
            actual[key] = conversion_json.get(key)
    return actual


def _dump(value: Any) -> list[str]:
    return utf8_json(value, indent=2, sort_keys=True).splitlines()


def run_case_file(path: Path, out: TextIO) -> tuple[int, int]:
    """Run one case file; returns (passed, failed)."""
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        print(f"{path}: cannot read test cases: {exc}", file=out)
        return 0, 1
    if not isinstance(spec, dict) or not isinstance(spec.get("cases"), list):
        print(f"{path}: $: expected a mapping with 'definitions' and a 'cases' list", file=out)
        return 0, 1
    docs = [str((path.parent / d).resolve()) for d in spec.get("definitions", [])]
    catalog = load_catalog(docs)
    if catalog.errors:
        for problem in catalog.errors:
            print(f"{path}: definitions: {problem}", file=out)
        return 0, 1
    converter = Converter(catalog.messages(), ambiguity=spec.get("ambiguity", "first"))
    passed = failed = 0
    for index, case in enumerate(spec["cases"]):
        name = case.get("name", f"case {index}") if isinstance(case, dict) else f"case {index}"
        if not isinstance(case, dict) or not isinstance(case.get("expect"), dict):
            print(f"FAIL {path}: {name}: a case needs 'input' and an 'expect' mapping", file=out)
            failed += 1
            continue
        expect: dict[str, Any] = case["expect"]
        try:
            record = NativeMessage.from_json(case.get("input"))
            result: dict[str, Any] = converter.convert(record).to_json()
        except RecordError as exc:
            result = {"match": None, "reason": "invalid-record", "detail": str(exc)}
        actual = _actual(result, expect)
        if actual == expect:
            passed += 1
            print(f"ok   {path.name}: {name}", file=out)
            continue
        failed += 1
        print(f"FAIL {path.name}: {name}", file=out)
        for line in difflib.unified_diff(
            _dump(expect), _dump(actual), "expected", "actual", lineterm=""
        ):
            print(f"    {line}", file=out)
    return passed, failed


def run_case_files(files: Sequence[str], out: TextIO) -> int:
    total_passed = total_failed = 0
    for name in files:
        passed, failed = run_case_file(Path(name), out)
        total_passed += passed
        total_failed += failed
    print(f"{total_passed} passed, {total_failed} failed", file=out)
    return 1 if total_failed else 0
