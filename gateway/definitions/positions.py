"""Where a JSON path is in the text of a definitions document: line and column.

The loader parses documents with `json.loads` / `yaml.safe_load`, which keep no
positions, and most documents load without a problem, so positions are found only when
problems are reported: the file is read again and scanned once, and every problem of it
without a line gets the position of its JSON path (or of the nearest parent that is in the
text). A member is placed at its key, an array item at the item.

Registry exports are not located: the text read over HTTP is not kept, and the JSON path
of a problem there already names the spot. Files larger than `MAX_SCAN_BYTES` are not
scanned either, to keep the report cheap.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable
from pathlib import Path

import yaml

from gateway.definitions.sources import JSON_SUFFIXES, YAML_SUFFIXES
from gateway.spec.problems import Position, Problem, json_path, with_positions
from gateway.spec.yamlpositions import Parts, TooManyNodes, node_positions

MAX_SCAN_BYTES = 4 * 1024 * 1024
# A YAML alias repeats a whole subtree; the walk stops at this many recorded paths.
MAX_PATHS = 100_000

_WHITESPACE = re.compile(r"[ \t\n\r]*")


class _Malformed(Exception):
    pass


class _JsonScanner:
    """A recursive-descent pass over JSON text that records where each value starts.

    Objects and arrays are walked here; strings and other scalars are left to the
    standard decoder (`raw_decode` at an offset), so they are read exactly as
    `json.loads` reads them."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.decoder = json.JSONDecoder()
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.positions: dict[str, Position] = {}

    def position(self, offset: int) -> Position:
        line = bisect.bisect_left(self.newlines, offset)
        start = self.newlines[line - 1] + 1 if line else 0
        return line + 1, offset - start + 1

    def skip(self, pos: int) -> int:
        match = _WHITESPACE.match(self.text, pos)
        return match.end() if match else pos

    def value(self, pos: int, parts: Parts) -> int:
        """Scan the value at `pos` (no leading whitespace); the offset after it."""
        text = self.text
        char = text[pos:pos + 1]
        if char == "{":
            return self.object(pos + 1, parts)
        if char == "[":
            return self.array(pos + 1, parts)
        end: int = self.decoder.raw_decode(text, pos)[1]  # JSONDecodeError when none
        return end

    def record(self, parts: Parts, offset: int) -> None:
        # Last wins, as json.loads keeps the last of two equal keys.
        self.positions[json_path(*parts)] = self.position(offset)

    def object(self, pos: int, parts: Parts) -> int:
        pos = self.skip(pos)
        if self.text[pos:pos + 1] == "}":
            return pos + 1
        while True:
            if self.text[pos:pos + 1] != '"':
                raise _Malformed
            key, after = self.decoder.raw_decode(self.text, pos)
            self.record((*parts, str(key)), pos)
            pos = self.skip(after)
            if self.text[pos:pos + 1] != ":":
                raise _Malformed
            pos = self.value(self.skip(pos + 1), (*parts, key))
            pos = self.skip(pos)
            char = self.text[pos:pos + 1]
            if char == "}":
                return pos + 1
            if char != ",":
                raise _Malformed
            pos = self.skip(pos + 1)

    def array(self, pos: int, parts: Parts) -> int:
        pos = self.skip(pos)
        if self.text[pos:pos + 1] == "]":
            return pos + 1
        index = 0
        while True:
            self.record((*parts, index), pos)
            pos = self.skip(self.value(pos, (*parts, index)))
            char = self.text[pos:pos + 1]
            if char == "]":
                return pos + 1
            if char != ",":
                raise _Malformed
            pos = self.skip(pos + 1)
            index += 1


def json_positions(text: str) -> dict[str, Position] | None:
    """JSON path -> position of every member and item; None when `text` is not JSON."""
    scanner = _JsonScanner(text)
    try:
        end = scanner.skip(scanner.value(scanner.skip(0), ()))
    except (_Malformed, json.JSONDecodeError, RecursionError):
        return None
    return scanner.positions if end == len(text) else None


def yaml_positions(text: str) -> dict[str, Position] | None:
    """The same for a YAML document; None when it is not YAML."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return None
    if node is None:
        return {}
    try:
        return node_positions(node, MAX_PATHS)
    except TooManyNodes as exc:
        return exc.positions  # the walk stops there; what it found still helps


def document_positions(file: str) -> dict[str, Position]:
    """The positions in the document `file` as the loader reads it; {} when unreadable."""
    path = Path(file)
    try:
        if path.stat().st_size > MAX_SCAN_BYTES:
            return {}
        text = path.read_bytes().decode("utf-8-sig")
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return {}
    lower = path.name.lower()
    if lower.endswith(YAML_SUFFIXES):
        return yaml_positions(text) or {}
    found = json_positions(text)
    if found is None and not lower.endswith(JSON_SUFFIXES):
        found = yaml_positions(text)  # the loader's fallback for other names
    return found or {}


def with_document_positions(problems: Iterable[Problem]) -> list[Problem]:
    """`problems` with the line and column of those in local documents that have none.

    Problems of the whole file (`$`) and of registry URLs are left as they are."""
    out = list(problems)
    files = {p.file for p in out if p.line is None and p.path not in ("", "$")
             and not p.file.lower().startswith(("http://", "https://"))}
    for file in sorted(files):
        positions = document_positions(file)
        if positions:
            out = with_positions(out, file, positions)
    return out
