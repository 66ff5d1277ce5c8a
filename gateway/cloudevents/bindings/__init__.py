"""CloudEvents protocol bindings over native message records: detect, decode, encode.

One module per protocol; this module dispatches on `record.protocol`. Decoders return
None for a message that is not a CloudEvent and raise `CloudEventError` for one that
claims to be a CloudEvent but is invalid.
"""

from __future__ import annotations

from gateway.cloudevents.bindings import amqp, http, kafka, mqtt, nats
from gateway.cloudevents.bindings.common import Binding, EncodeMode, Mode
from gateway.cloudevents.bindings.wireform import BinaryForm
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.typesystem import ExtensionTypes
from gateway.protocols import HTTP, find_profile, normalize_protocol, profile
from gateway.record import NativeMessage

__all__ = [
    "BINDINGS",
    "Binding",
    "EncodeMode",
    "Mode",
    "binding_for",
    "decode",
    "decode_batch",
    "detect_mode",
    "encode",
    "encode_batch",
    "wire_form",
    "with_extension",
]

BINDINGS: dict[str, Binding] = {
    binding.protocol: binding
    for binding in (
        http.BINDING,
        kafka.BINDING,
        mqtt.BINDING5,
        mqtt.BINDING311,
        amqp.BINDING,
        nats.BINDING,
    )
}


# The bindings whose binary records are written whole by generated code (`wireform`), by
# protocol: binary-mode `encode` of those is `wireform.encode` with this form first.
_WIRE_FORMS: dict[str, BinaryForm] = {
    form.protocol: form for form in (http.WIRE, kafka.WIRE, nats.WIRE)}


def wire_form(protocol: str) -> BinaryForm | None:
    """The wire form binary-mode `encode` tries first for `protocol` (a canonical name),
    or None: its binding writes every record by its own steps (AMQP, MQTT)."""
    return _WIRE_FORMS.get(protocol)


def _binding(protocol: str) -> Binding:
    # Records carry canonical names: normalising them again for every message is waste.
    binding = BINDINGS.get(protocol) or BINDINGS.get(normalize_protocol(protocol) or "")
    if binding is None:
        raise ValueError(
            f"no CloudEvents binding for protocol {protocol!r} (known: {', '.join(BINDINGS)})"
        )
    return binding


def binding_for(protocol: str) -> Binding:
    """The binding of `protocol` (a canonical name, or one `normalize_protocol` knows);
    ValueError when there is none."""
    return _binding(protocol)


def detect_mode(record: NativeMessage) -> Mode | None:
    """The mode of `record`: structured, binary, batch (HTTP only), or None (not a CloudEvent)."""
    return _binding(record.protocol).detect(record)


def decode(
    record: NativeMessage, extension_types: ExtensionTypes | None = None
) -> CloudEvent | None:
    """The CloudEvent carried by `record`, or None when it carries none.

    Raises CloudEventError when the message claims to be a CloudEvent but is invalid,
    or is an HTTP batch (reason "unexpected-batch"; use `decode_batch`).
    `extension_types` re-types extensions that string-only bindings carry as text.
    """
    return _binding(record.protocol).decode(record, extension_types)


def decode_batch(
    record: NativeMessage, extension_types: ExtensionTypes | None = None
) -> list[CloudEvent]:
    """Every event of `record`: an HTTP batch's members, [event] for one event, [] for none."""
    binding = _binding(record.protocol)
    if profile(binding.protocol).batches and binding.detect(record) == "batch":
        return http.decode_batch(record, extension_types)
    event = binding.decode(record, extension_types)
    return [] if event is None else [event]


def with_extension(record: NativeMessage, name: str, value: str) -> NativeMessage:
    """`record` with the extension attribute `name` set to `value` when it is a binary
    CloudEvent whose binding can add one (NATS, MQTT 5: request-reply's `correlationid`);
    else `record` itself. Structured events and plain messages go unchanged: their
    body is not the binding's to rewrite."""
    binding = BINDINGS.get(record.protocol) or BINDINGS.get(
        normalize_protocol(record.protocol) or "")
    if binding is None or binding.extend is None or binding.detect(record) != "binary":
        return record
    return binding.extend(record, name, value)


def encode(event: CloudEvent, protocol: str, mode: EncodeMode = "binary") -> NativeMessage:
    """The record that carries `event` over `protocol` in `mode`.

    Raises ValueError for an unknown protocol or for binary mode on MQTT 3.1.1.
    """
    if mode not in ("binary", "structured"):
        raise ValueError(f"mode must be 'binary' or 'structured', not {mode!r}")
    return _binding(protocol).encode(event, mode)


def encode_batch(events: list[CloudEvent], protocol: str = HTTP) -> NativeMessage:
    """An `application/cloudevents-batch+json` message; only HTTP defines batches."""
    prof = find_profile(normalize_protocol(protocol))
    if prof is None or not prof.batches:
        raise ValueError(f"only HTTP has a CloudEvents batch mode, not {protocol!r}")
    return http.encode_batch(events)
