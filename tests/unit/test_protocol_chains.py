"""Protocol knowledge lives in the profiles (`gateway/protocols/`), nowhere else.

An `ast` scan of `gateway/`, `adapters/`, `harness/` (outside `gateway/protocols/`) and
of the adapter conformance suite (`tests/integration/conformance/`, which must read what
differs between adapters from the profiles and the ports, like the product) fails on
code that decides by comparing a protocol value with a protocol name: a comparison
(`protocol == KAFKA`, `protocol in (MQTT5, MQTT311)`, `fam != "MQTT"`), a Spark
`.isin(KAFKA, ...)`, a `case "HTTP":`, or a table keyed by two or more protocol names
(`{MQTT5: ..., KAFKA: ...}`). Such code is what the issue set out to remove: it has to
be found and changed for every new protocol, and its copies drift apart. Read the fact
from `find_profile(protocol)` instead, or add it to `ProtocolProfile`.

Comparing with a profile's own name (`protocol == prof.name`, as the generated Spark
CASEs do) is not flagged: it is driven by the profiles, not written per protocol.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.protocols import MQTT_FAMILY, PROFILES

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("gateway", "adapters", "harness", "tests/integration/conformance")
HOME = ROOT / "gateway" / "protocols"

CONSTANTS = {"MQTT5", "MQTT311", "AMQP", "KAFKA", "NATS", "HTTP", "MQTT_FAMILY"}
NAMES = {p.name for p in PROFILES} | {p.family for p in PROFILES} | {MQTT_FAMILY}

# (file relative to the root, line's text) -> why the place may name protocols itself.
ALLOWED: dict[tuple[str, str], str] = {
    ("adapters/registry.py", "ADAPTERS: dict[str, Adapter] = {"):
        "the adapter of each family: the core never imports adapters, so this table "
        "cannot be a profile field; it is keyed by family, and a new protocol adds one "
        "entry (docs/architecture.md checklist)",
}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    text: str
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}: {self.text.strip()}"


def _names_protocol(node: ast.AST) -> bool:
    """A protocol constant (`KAFKA`, `protocols.KAFKA`) or a protocol name literal."""
    if isinstance(node, ast.Name):
        return node.id in CONSTANTS
    if isinstance(node, ast.Attribute):
        return node.attr in CONSTANTS
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value in NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_protocol(e) for e in node.elts)
    return False


def scan_source(source: str, path: str) -> list[Finding]:
    lines = source.splitlines()
    found: list[Finding] = []

    def report(node: ast.AST, what: str) -> None:
        line = getattr(node, "lineno", 0)
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        if (path, text.strip()) not in ALLOWED:
            found.append(Finding(path, line, text, what))

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            if any(_names_protocol(n) for n in (node.left, *node.comparators)):
                report(node, "compares with a protocol name")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "isin" and any(
                    _names_protocol(a) for a in node.args):
                report(node, "Spark isin over protocol names")
        elif isinstance(node, ast.MatchValue):
            if _names_protocol(node.value):
                report(node, "match case on a protocol name")
        elif isinstance(node, ast.Dict):
            keyed = [k for k in node.keys if k is not None and _names_protocol(k)]
            if len(keyed) >= 2:
                report(node, "table keyed by protocol names")
    return found


def scan_tree(root: Path) -> list[Finding]:
    found: list[Finding] = []
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*.py")):
            if path.is_relative_to(HOME):
                continue
            found += scan_source(path.read_text(encoding="utf-8"),
                                 path.relative_to(root).as_posix())
    return found


def test_no_protocol_chains_outside_the_profiles() -> None:
    findings = scan_tree(ROOT)
    assert not findings, (
        "protocol knowledge outside gateway/protocols (read it from the profile; see "
        "docs/architecture.md):\n" + "\n".join(str(f) for f in findings))


def test_every_allowed_place_still_exists() -> None:
    """An allow-list entry whose line is gone would silently allow the next one."""
    for (path, text), why in ALLOWED.items():
        assert why
        assert text in (ROOT / path).read_text(encoding="utf-8"), (path, text)


@pytest.mark.parametrize(("source", "what"), [
    ("if record.protocol == KAFKA:\n    pass\n", "compares"),
    ("x = protocol in (MQTT5, MQTT311)\n", "compares"),
    ("x = p.protocol != protocols.HTTP\n", "compares"),
    ("x = fam == 'MQTT'\n", "compares"),
    ("x = 'AMQP/1.0' == protocol\n", "compares"),
    ("x = F.when(col.isin(KAFKA, NATS), 1)\n", "isin"),
    ("match protocol:\n    case 'HTTP':\n        pass\n", "match"),
    ("T = {MQTT5: 1, KAFKA: 2}\n", "table"),
])
def test_the_scan_finds_each_kind_of_chain(source: str, what: str) -> None:
    findings = scan_source(source, "x.py")
    assert len(findings) == 1 and what in findings[0].what, findings


@pytest.mark.parametrize("source", [
    "x = protocol == prof.name\n",
    "x = scheme == 'https'\n",
    "x = mechanism == 'PLAIN' and protocol == 'SASL_PLAINTEXT'\n",
    "T = {KAFKA: 1}\n",
    "x = F.lit(KAFKA)\n",
])
def test_the_scan_leaves_profile_driven_code_alone(source: str) -> None:
    assert scan_source(source, "x.py") == []
