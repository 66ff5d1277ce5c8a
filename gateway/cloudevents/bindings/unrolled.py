"""Binary-mode headers written by generated code, one function per attribute layout.

`headers.write` walks an event's attributes: per attribute a name lookup, a type check, a
tuple, then a join to check the values, then a {name, value} entry each. The events of
one definition have the same attributes in the same order (its envelope renders them in
that order), so for each layout seen -- the tuple of attribute names -- a function is
generated once per binding that writes exactly those headers, in that order, in straight
lines, with the header names bound in. It answers what `headers.write` answers, or None
where `headers.write` must decide: a value that needs percent-encoding. The caller then
writes with `headers.write`. `tests/unit/cloudevents/test_unrolled_headers.py` holds the
two to the same output.

Only indexes are written into the generated source; names and header names are passed
in as values, so no attribute name (an incoming event's too) becomes code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gateway.cloudevents.bindings.layouts import ByLayout
from gateway.cloudevents.headercodec import needs_no_encoding
from gateway.cloudevents.typesystem import to_canonical
from gateway.json.values import JSON

__all__ = ["Unrolled", "write"]

# (attributes, pairs, utf8) -> the entries, or None: `headers.write` decides.
Writer = Callable[[Mapping[str, Any], "list[tuple[str, str]] | None",
                   "list[tuple[str, bytes]] | None"], "list[JSON] | None"]


class Unrolled:
    """The generated writers of one binding: its header prefix, and whether values are
    percent-encoded (HTTP, NATS) or not (Kafka)."""

    __slots__ = ("_writers", "percent_encode", "prefix")

    def __init__(self, prefix: str, percent_encode: bool) -> None:
        self.prefix = prefix
        self.percent_encode = percent_encode
        self._writers: ByLayout[Writer] = ByLayout(
            lambda layout: _generate(layout, prefix, percent_encode))

    def writer(self, layout: tuple[str, ...]) -> Writer | None:
        """The writer of `layout`, generated on first use (None once `layouts` has as
        many as it keeps: `headers.write` writes those events)."""
        return self._writers.get(layout)


def write(unrolled: Unrolled, attributes: Mapping[str, Any],
          pairs: list[tuple[str, str]] | None = None,
          utf8: list[tuple[str, bytes]] | None = None) -> list[JSON] | None:
    """`headers.write(event, prefix, percent_encode, pairs, utf8)` for an event with
    `attributes`, or None (nothing added to `pairs` or `utf8`) where it must decide."""
    writer = unrolled.writer(tuple(attributes))
    return None if writer is None else writer(attributes, pairs, utf8)


def _generate(layout: tuple[str, ...], prefix: str, percent_encode: bool) -> Writer:
    """The writer of one layout (see the module docstring)."""
    written = [n for n, name in enumerate(layout) if name != "datacontenttype"]
    values = ", ".join(f"v{n}" for n in range(len(layout)))
    lines = ["def write(attributes, pairs, utf8):",
             f"    {values}{',' if len(layout) == 1 else ''} = attributes.values()"]
    for n in written:
        lines.append(f"    if v{n}.__class__ is not str:")
        lines.append(f"        v{n} = to_canonical(v{n})")
    if percent_encode and written:
        # The same check as headers.write: every value is safe as it is, else it decides.
        joined = "".join(f"{{v{n}}}" for n in written)  # one f-string: one new string
        lines += [f"    if needs_no_encoding(f{joined!r}) is None:", "        return None"]
    one = "," if len(written) == 1 else ""  # a tuple of one needs its comma
    made = ", ".join(f"(h{n}, v{n})" for n in written)
    encoded = ", ".join(f"(h{n}, v{n}.encode())" for n in written)
    entries = ", ".join(f"{{'name': h{n}, 'value': v{n}}}" for n in written)
    lines += ["    if pairs is not None:", f"        pairs += ({made}{one})",
              "    if utf8 is not None:", f"        utf8 += ({encoded}{one})",
              f"    return [{entries}]"]
    namespace: dict[str, Any] = {"to_canonical": to_canonical,
                                 "needs_no_encoding": needs_no_encoding}
    namespace.update({f"h{n}": prefix + layout[n] for n in written})
    exec("\n".join(lines), namespace)
    writer: Writer = namespace["write"]
    return writer
