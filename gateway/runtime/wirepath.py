"""A route's fused path: a plain native record matched and written straight into every
output's binary record, with no CloudEvent, conversion or binding dispatch in between
(`envelope/wirewriter.py`).

What it takes: a record that carries no CloudEvent, matched by a definition whose body
is not checked against a schema, for a route whose every output writes binary
CloudEvents through a wire form (Kafka, NATS, HTTP) with defaults that are constants
(no placeholders, no headers). Per definition it learns the attribute layout from the
first event the general path renders for it (`learn`), and from then on writes its
records, the output's defaults and the partition key added as `OutputFormat.render` adds
them. Anything else -- a record it declines, a layout it has not seen, a definition not
learned yet -- is the general path's, with the match already made (`Converter.
convert_matched`), so the outcome never depends on which path a message took.

A record without an identity (an HTTP request without an `Idempotency-Key`, an MQTT
3.1.1 message) gets a random event id. For a definition learned from such a record the
path makes that id, once for all outputs, and hands it back with the records: the
ledger keeps it, and an event rendered again later (a dead letter, the tap, a reply)
gets it back, so it is the event that was sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from gateway.cloudevents.bindings import wire_form
from gateway.cloudevents.bindings.wireform import BinaryForm
from gateway.cloudevents.event import CloudEvent
from gateway.convert import Converter
from gateway.definitions.model import MessageDefinition
from gateway.envelope.ids import random_uuid
from gateway.envelope.outgoing import OutputFormat
from gateway.envelope.partitioning import PartitionKeys
from gateway.envelope.wirewriter import WireWriter, own_defaults, sends_unparsed
from gateway.json.values import JSON
from gateway.matching.matcher import MatchResult
from gateway.protocols.accessors import ACCESSORS
from gateway.protocols.profile import FieldRef
from gateway.record import NativeMessage

__all__ = ["WirePath", "Written"]

#: What `write` gives for a record it wrote: the match, a record per output, and the
#: random id it gave the event if the record has no identity (else None, or an id the
#: writers did not use: the record's identity made its own).
Written = tuple[MatchResult, list[NativeMessage], "str | None"]

# Per output: its writer, and the constants and the defaults to call it with (those of
# the output's defaults the binding does not write itself).
_Step = tuple[WireWriter, tuple[Any, ...], dict[str, JSON]]
# Per definition: the protocol of the records it was learned from, a step per output, and
# whether its records come without an identity (the one it was learned from did): those
# get a random id made here, once for every output.
_Plan = tuple[str, tuple[_Step, ...], bool]

#: Definitions with a plan at most (a catalog's; bounded all the same).
MAX_PLANS = 65536
# The plan of a definition the fused path never writes (its body is checked against a
# schema, or every message of it is rendered by `render_checked`): no record's protocol.
_NEVER: _Plan = ("", (), False)


class WirePath:
    """The fused path of one route (see the module docstring)."""

    __slots__ = ("_converter", "_keyed", "_keys", "_outputs", "_plans")

    def __init__(self, converter: Converter,
                 outputs: Sequence[tuple[BinaryForm, Mapping[str, JSON]]],
                 keys: PartitionKeys, keyed: bool) -> None:
        self._converter = converter
        self._outputs = tuple(outputs)
        self._keys = keys
        self._keyed = keyed  # some output fills a partition key
        self._plans: dict[int, _Plan] = {}

    @classmethod
    def for_route(cls, converter: Converter,
                  formats: Sequence[tuple[OutputFormat, FieldRef | None]],
                  keys: PartitionKeys) -> WirePath | None:
        """The fused path of a route writing to `formats` (with the place of each one's
        partition key), or None when one of them is not written this way."""
        outputs = []
        for output_format, _ in formats:
            form = wire_form(output_format.protocol)
            defaults = output_format.defaults
            if (form is None or output_format.mode != "binary"
                    or output_format.deliver != "cloudevent"
                    or any(name == "headers" or (isinstance(value, str) and "{" in value)
                           for name, value in defaults.items())):
                return None
            outputs.append((form, defaults))
        keyed = any(place is not None for _, place in formats)
        return cls(converter, outputs, keys, keyed) if outputs else None

    @property
    def sends_bodies_unparsed(self) -> bool:
        """Every output takes a received body as its bytes, unparsed (Kafka's records:
        `wirewriter`): the path itself never reads a body's value."""
        return all(sends_unparsed(form) for form, _ in self._outputs)

    def write(self, record: NativeMessage, now: datetime) -> Written | MatchResult | None:
        """`record`'s match and a record per output; or only its match, for the general
        path to finish (`Converter.convert_matched`); or None for a record that carries
        a CloudEvent (the general path's whole)."""
        converter = self._converter
        result = converter.match_plain(record)
        if result is None:
            return None
        definition = result.definition
        if definition is None:
            return result
        plan = self._plans.get(id(definition))
        if plan is None or record.protocol != plan[0]:
            return result
        context = result.context
        key = self._keys.key(record, context) if self._keyed else None
        # A random id, for a record without an identity (the writers use it only then).
        made_id = random_uuid() if plan[2] else None
        records = []
        for writer, consts, defaults in plan[1]:
            made = writer(record, context, now, consts, defaults, key, made_id)
            if made is None:
                return result
            records.append(made)
        return result, records, made_id

    def learn(self, definition: MessageDefinition, record: NativeMessage,
              event: CloudEvent) -> None:
        """Take the layout of `event`, which the general path rendered from `record`
        and `definition` and wrote to every output, as the definition's for records of
        `record`'s protocol; once per definition. An event with a trace context is not
        taken (the writers leave those to the general path)."""
        if id(definition) in self._plans or len(self._plans) >= MAX_PLANS:
            return
        converter = self._converter
        if converter.enforces(definition):
            self._plans[id(definition)] = _NEVER
            return
        layout = tuple(event.get_attributes())
        if "traceparent" in layout:
            return  # the record's own trace context: the next one may have none
        template = converter.template(definition)
        steps = []
        for form, defaults in self._outputs:
            made = template.wire_writer(record.protocol, form, layout)
            if made is None:  # no generated renderer, the definition's own trace context,
                # or too many writers already
                self._plans[id(definition)] = _NEVER
                return
            steps.append((made[0], made[1], own_defaults(form, layout, defaults)))
        anonymous = (template.ids_from_records
                     and ACCESSORS[record.protocol].identity(record.fields) is None)
        self._plans[id(definition)] = (record.protocol, tuple(steps), anonymous)
