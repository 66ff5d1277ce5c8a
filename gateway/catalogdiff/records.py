"""The records `xrgw diff --replay` replays, one JSON object a line, whatever wrote them:

- a native record (what `xrgw match` and `xrgw learn` read): replayed as it is;
- a dead letter the gateway wrote (a record of the dead-letter endpoint's protocol with
  `xrgw-record` metadata, or an MQTT 3.1.1 letter's `{"record", "deadletter"}` body):
  its original record (`gateway.deadletter.format.original_record`);
- a line of `xrgw tap --format json` (`gateway/tap/line.py`: every line names its kind
  under `tap`): a message line's `record` (as redacted: a hidden value replays as
  `***`); its other lines (`attached`, `dropped`, `end`) hold no record and are skipped
  without a word;
- a line with a `record` member: the Spark job's `--deadletter` lines (the original line
  as text) or any tool's envelope of a record (as an object): that record.

The readers are tried in `READERS` order; the first that recognises a line reads it. A
reader is a function from the line's JSON object to a `NativeMessage`, `NO_RECORD` (a
line of its format that holds none: skipped), or None when the line is not of its format.

Inputs are files, directories (their `*.jsonl` / `*.ndjson` files, sorted) or `-` for
stdin. A line that is no record is reported with its place and skipped.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from gateway.deadletter.format import original_record
from gateway.json.values import JSONObject
from gateway.record import NativeMessage, RecordError


class _NoRecord:
    """What a reader answers for a line of its format that holds no record."""


NO_RECORD = _NoRecord()
RecordReader = Callable[[JSONObject], "NativeMessage | _NoRecord | None"]
RECORD_SUFFIXES = (".jsonl", ".ndjson", ".json")


def tap_record(obj: JSONObject) -> NativeMessage | _NoRecord | None:
    """The record of an `xrgw tap` message line; `NO_RECORD` for its other lines."""
    kind = obj.get("tap")
    if not isinstance(kind, str) or "protocol" in obj:
        return None
    inner = obj.get("record")
    if kind != "message" or not isinstance(inner, dict):
        return NO_RECORD
    return NativeMessage.from_json(inner)


def envelope_record(obj: JSONObject) -> NativeMessage | None:
    """A record carried under `record`: as text (the Spark job's dead-letter lines keep
    the original line) or as an object."""
    if "protocol" in obj or "record" not in obj:
        return None
    inner = obj["record"]
    if isinstance(inner, str):
        return NativeMessage.from_line(inner)
    return NativeMessage.from_json(inner)


def dead_letter_record(obj: JSONObject) -> NativeMessage | None:
    """The original record of a dead letter the gateway wrote; None for any other record."""
    if "protocol" not in obj:
        return None
    try:
        return original_record(NativeMessage.from_json(obj))
    except json.JSONDecodeError as exc:  # a damaged xrgw-record entry
        raise RecordError(f"a dead letter whose xrgw-record is not JSON ({exc.msg})") from exc


def native_record(obj: JSONObject) -> NativeMessage | None:
    return NativeMessage.from_json(obj)


#: Tried in order (see the module's docstring).
READERS: list[RecordReader] = [tap_record, envelope_record, dead_letter_record, native_record]


@dataclass(frozen=True)
class ReplayLine:
    """One line of a replay input: its record, or why it is none."""

    source: str
    line: int
    record: NativeMessage | None
    error: str = ""

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


def read_line(text: str) -> NativeMessage | None:
    """The record of one line, by the first reader that recognises it; None for a line
    that holds no record by its format (an `xrgw tap` notice)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"not JSON ({exc.msg})") from exc
    if not isinstance(obj, dict):
        raise RecordError("expected a JSON object")
    for reader in READERS:
        record = reader(obj)
        if record is NO_RECORD:
            return None
        if isinstance(record, NativeMessage):
            return record
    raise RecordError("neither a native record, a dead letter nor a line with a record")


def replay_files(inputs: Sequence[str]) -> list[str]:
    """The files `inputs` name, directories expanded; raises OSError for a missing one."""
    out: list[str] = []
    for name in inputs:
        path = Path(name)
        if name != "-" and path.is_dir():
            out += [str(p) for p in sorted(path.iterdir())
                    if p.is_file() and p.name.endswith(RECORD_SUFFIXES)]
        elif name == "-" or path.is_file():
            out.append(name)
        else:
            raise FileNotFoundError(f"{name}: no such file or directory")
    return out


def read_replay(files: Sequence[str]) -> Iterator[ReplayLine]:
    for name in files:
        stream = sys.stdin if name == "-" else open(name, encoding="utf-8")  # noqa: SIM115
        try:
            for number, text in enumerate(stream, start=1):
                if not text.strip():
                    continue
                try:
                    record = read_line(text)
                except RecordError as exc:
                    yield ReplayLine(name, number, None, str(exc))
                    continue
                if record is not None:
                    yield ReplayLine(name, number, record)
        finally:
            if stream is not sys.stdin:
                stream.close()


__all__ = ["NO_RECORD", "READERS", "RecordReader", "ReplayLine", "dead_letter_record",
           "envelope_record", "native_record", "read_line", "read_replay", "replay_files",
           "tap_record"]
