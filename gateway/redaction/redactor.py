"""What a sender sent, as the gateway's own outputs may show it.

Everything the gateway shows about a message it could not deliver — the conformance
report's samples and failed checks, the status page, log lines, a dead letter's
`xrgw-detail` and `xrgw-explain` — passes a `Redactor` first. It hides:

- the values of the credential headers every protocol may carry (`SENSITIVE_NAMES`:
  `authorization`, `proxy-authorization`, `cookie`, `set-cookie`), wherever the record
  keeps name/value metadata (HTTP/Kafka/NATS headers, MQTT 5 user properties, AMQP
  application properties), always;
- the field paths of a route's `redact:` (`topic_name`, `headers.x-api-key`,
  `data.card.number`), in the record and in the texts that describe it.

A failed check names a field and what the definition expected (both from the
definitions) and what the message carried (the sender's): a check of a hidden field
shows `got ***`. Texts without that structure (a decoder's detail, an explanation read
back from JSON) are scrubbed of the hidden values themselves wherever they appear.

The dead letter's body and `xrgw-record` stay the original message (a re-drive needs it);
the HTTP ingress strips its own credential before the record is made.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from gateway.json.values import JSON, JSONObject, copy_json
from gateway.matching.matcher import Explanation
from gateway.record import NativeMessage

#: What a hidden value is replaced with.
REDACTED = "***"
#: Metadata names whose values are never shown (compared case-insensitively).
SENSITIVE_NAMES = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
#: Hidden values shorter than this are not scrubbed out of free texts (a one-letter value
#: would blank every text); they are still hidden where the structure says where they are.
MIN_SCRUBBED = 4
#: Pieces of a hidden value (split on blanks: the token of `Bearer <token>`) at least this
#: long are scrubbed too, for texts that quote only a part.
MIN_PIECE = 8

#: What the matcher says of a field the message lacks: its own words, not the sender's.
ABSENT = "nothing (field absent)"

_LABEL = re.compile(r"^(?P<field>[^\[\] ]+)(?:\[(?P<name>[^\]]*)\])?(?: segment \d+)?$")
_BODY_DETAIL = re.compile(r"^(?P<head>\$(?P<path>(?:\.[^.:\s\[]+|\[\d+\])*):)\s")
_CLASH = re.compile(r"^(?P<name>\{[^{}]*\}) = .* \(captured earlier\)$", re.DOTALL)


class Redactor:
    """The hiding rules of one route (`paths`: its `redact:` list)."""

    __slots__ = ("_hidden_checks", "_paths", "names", "paths")

    def __init__(self, paths: Sequence[str] = (), *,
                 names: Iterable[str] = SENSITIVE_NAMES) -> None:
        self.paths = tuple(paths)
        self.names = frozenset(n.lower() for n in names)
        self._paths = tuple([p for p in path.split(".") if p] for path in self.paths)
        # Check label -> hidden: labels come from the definitions, a bounded set.
        self._hidden_checks: dict[str, bool] = {}

    # -- records ---------------------------------------------------------------------------
    def record_json(self, record: NativeMessage | JSONObject) -> JSONObject:
        """The record's JSON with every hidden value replaced. A record's JSON is a copy
        (its `to_json` shares the header lists with the record, which may still be on
        its way to a dead letter); a JSON object given is changed in place."""
        if isinstance(record, NativeMessage):
            copied = copy_json(record.to_json())
            assert isinstance(copied, dict)
            doc = copied
        else:
            doc = record
        for key, value in doc.items():
            if key not in ("data", "protocol"):
                _hide_names(value, self.names)
        for parts in self._paths:
            _replace(doc, parts)
        return doc

    def secrets(self, record: NativeMessage | JSONObject) -> tuple[str, ...]:
        """The hidden values of a record, as texts to scrub out of free text (longest
        first, so a value is scrubbed before a piece of it)."""
        if isinstance(record, NativeMessage):
            fields: Mapping[str, JSON] = record.fields
            doc: JSONObject | None = None
        else:
            fields = doc = record
        found: list[str] = []
        for key, value in fields.items():
            if key not in ("data", "protocol") and isinstance(value, (list, dict)):
                _collect_names(value, self.names, found)
        if self._paths:
            if doc is None:
                assert isinstance(record, NativeMessage)
                doc = {**record.fields, "data": record.data}
            for parts in self._paths:
                _collect(doc, parts, found)
        if not found:
            return ()
        pieces = set()
        for text in found:
            if len(text) >= MIN_SCRUBBED:
                pieces.add(text)
            pieces.update(p for p in text.split() if len(p) >= MIN_PIECE)
        return tuple(sorted(pieces, key=len, reverse=True))

    # -- texts -------------------------------------------------------------------------------
    def text(self, text: str, secrets: Sequence[str]) -> str:
        """A free text (a detail, a log line) without the hidden values. A schema
        validator's detail (`$.card.number: '4111' is too short`) about a hidden body
        field reads `$.card.number: ***`, whatever the length of the value."""
        found = _BODY_DETAIL.match(text) if self._paths else None
        if found is not None:
            where = ["data", *(p for p in re.split(r"[.\[\]]+", found["path"]) if p)]
            if any(_overlaps(where, parts) for parts in self._paths):
                return f"{found['head']} {REDACTED}"
        for secret in secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def hides_check(self, label: str) -> bool:
        """Whether a failed check's label (`topic_name`, `headers[authorization]`,
        `topic_name segment 3`) names a hidden field."""
        hidden = self._hidden_checks.get(label)
        if hidden is None:
            hidden = self._hides(label)
            if len(self._hidden_checks) < 10_000:
                self._hidden_checks[label] = hidden
        return hidden

    def _hides(self, label: str) -> bool:
        found = _LABEL.match(label)
        if found is None:
            return False
        field, name = found["field"], found["name"]
        if name is not None and name.lower() in self.names:
            return True
        where = [field] if name is None else [field, name]
        return any(_overlaps(where, parts) for parts in self._paths)

    def explanation(self, explanation: Explanation, secrets: Sequence[str]) -> Explanation:
        """An explanation whose received value is hidden when its check is."""
        if explanation.check and self.hides_check(explanation.check):
            expected = hide_capture(explanation.expected)
            got = hide_received(explanation.got)
            return Explanation(
                explanation.definition, f"{explanation.check}: expected {expected}, got {got}",
                explanation.passed, explanation.check, expected, got)
        if not secrets:
            return explanation
        failure = self.text(explanation.failure, secrets)
        if failure == explanation.failure:
            return explanation
        return Explanation(explanation.definition, failure, explanation.passed,
                           explanation.check, self.text(explanation.expected, secrets),
                           self.text(explanation.got, secrets))

    def explanations(self, explain: Sequence[Explanation],
                     secrets: Sequence[str]) -> tuple[Explanation, ...]:
        return tuple(self.explanation(e, secrets) for e in explain)


def hide_received(got: str) -> str:
    """A hidden field's received value as shown: `***`, or the matcher's word for none."""
    return got if got == ABSENT else REDACTED


def hide_capture(expected: str) -> str:
    """`{region} = 'eu' (captured earlier)` names what an earlier field of the message
    carried: `{region} = *** (captured earlier)`."""
    found = _CLASH.match(expected)
    return expected if found is None else f"{found['name']} = {REDACTED} (captured earlier)"


def _overlaps(label: list[str], path: list[str]) -> bool:
    """A check of `label` shows the value at `path` (or a value holding it)."""
    return all(b in ("*", a) or a.lower() == b.lower()
               for a, b in zip(label, path, strict=False))


def _hide_names(node: JSON, names: frozenset[str]) -> None:
    """Hide the values of sensitive names in a metadata list ({name, value} items) or
    section (a JSON object)."""
    if isinstance(node, list):
        for item in node:
            if (isinstance(item, dict) and "value" in item
                    and str(item.get("name", "")).lower() in names):
                item["value"] = REDACTED
    elif isinstance(node, dict):
        for key in node:
            if key.lower() in names:
                node[key] = REDACTED


def _collect_names(node: JSON, names: frozenset[str], found: list[str]) -> None:
    if isinstance(node, list):
        for item in node:
            if (isinstance(item, dict) and "value" in item
                    and str(item.get("name", "")).lower() in names):
                _strings(item["value"], found)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key.lower() in names:
                _strings(value, found)


def _strings(node: JSON, found: list[str]) -> None:
    if isinstance(node, str):
        found.append(node)
    elif isinstance(node, dict):
        for value in node.values():
            _strings(value, found)
    elif isinstance(node, list):
        for value in node:
            _strings(value, found)
    elif node is not None and not isinstance(node, bool):
        found.append(str(node))


def _places(node: JSON, parts: list[str]) -> Iterable[tuple[JSON, str | int]]:
    """(container, key) of every value at `parts` under `node`: `*` matches any key or
    list item, and a {name, value} list (headers, user properties) is addressed by its
    names (case-insensitively)."""
    if not parts:
        return
    head, rest = parts[0], parts[1:]
    if isinstance(node, dict):
        for key in list(node) if head == "*" else [head] if head in node else []:
            if rest:
                yield from _places(node[key], rest)
            else:
                yield node, key
    elif isinstance(node, list):
        for index, item in enumerate(node):
            if isinstance(item, dict) and "name" in item and "value" in item:
                if head == "*" or str(item["name"]).lower() == head.lower():
                    if rest:
                        yield from _places(item["value"], rest)
                    else:
                        yield item, "value"
            elif head in ("*", str(index)):
                if rest:
                    yield from _places(item, rest)
                else:
                    yield node, index


def _replace(doc: JSON, parts: list[str]) -> None:
    for container, key in list(_places(doc, parts)):
        if isinstance(container, dict):
            container[str(key)] = REDACTED
        elif isinstance(container, list):
            container[int(key)] = REDACTED


def _collect(doc: JSON, parts: list[str], found: list[str]) -> None:
    for container, key in _places(doc, parts):
        if isinstance(container, dict):
            _strings(container[str(key)], found)
        elif isinstance(container, list):
            _strings(container[int(key)], found)


__all__ = ["ABSENT", "MIN_PIECE", "MIN_SCRUBBED", "REDACTED", "SENSITIVE_NAMES", "Redactor",
           "hide_capture", "hide_received"]
