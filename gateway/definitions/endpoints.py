"""Endpoint normalization: every spelling of an endpoint -> `Endpoint` with rc4 names.

Accepted (notes 1.8, 1.10, 1.12; early draft "Endpoint registry"):
- 2023/0.5 `config` object: `config.protocol`, `config.endpoints` (URI strings),
  `config.options`, `config.authorization`, `config.deployed` (`config.strict` is dropped);
- `format` for `envelope`, `definitionGroups` for `messagegroups`;
- `deployed` / `endpoints` at the endpoint's top level (contoso-erp sample) and
  `protocoloptions.options.*` (real-time-sources) move into `protocoloptions`;
- `usage` as a string or an array; addresses as strings, `{"url": ...}` or `{"uri": ...}`;
- option names compared ignoring case, `-` and `_` (rc1 `linkproperties`, samples'
  `link_properties`, early `clean-session`, `consumer-group` ...), AMQP `address` = `node`.
Inline `messages` are attached by the caller.
"""

from __future__ import annotations

from gateway.definitions.layout import RawGroup
from gateway.definitions.located import Located, Origin
from gateway.definitions.model import Endpoint, Usage
from gateway.definitions.reader import (
    check_envelope_spelling,
    normalize_envelope,
    warn_versionless_2023,
)
from gateway.definitions.refs import to_xid
from gateway.definitions.spelling import SpellingLog
from gateway.json.values import JSON, JSONObject
from gateway.protocols import PROFILES, find_profile, normalize_protocol
from gateway.spec.problems import Problems, json_path

COMMON_OPTIONS = ("endpoints", "authorization", "deployed")
# The spec's endpoint option names per protocol (`ProtocolProfile.endpoint.options`).
ENDPOINT_OPTIONS: dict[str, tuple[str, ...]] = {p.name: p.endpoint.options for p in PROFILES}
USAGES: tuple[Usage, ...] = ("consumer", "producer", "subscriber")


def known_options(protocol: str | None) -> tuple[str, ...]:
    return COMMON_OPTIONS + ENDPOINT_OPTIONS.get(protocol or "", ())


def _squash(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


class _Reader:
    def __init__(self, group: RawGroup, problems: Problems, log: SpellingLog) -> None:
        self.group = group
        self.data = group.data
        self.origin = group.origin
        self.problems = problems
        self.log = log
        self.loc = Located({}, {(): group.origin})

    def error(self, where: Origin, message: str, fix: str) -> None:
        self.problems.error(where.file, where.path, message, fix)

    def warning(self, where: Origin, message: str, fix: str) -> None:
        self.problems.warning(where.file, where.path, message, fix)


def read_endpoint(
    group: RawGroup, bases: tuple[str, ...], problems: Problems, log: SpellingLog
) -> Endpoint:
    r = _Reader(group, problems, log)
    config = _config(r)
    protocol = _protocol(r, config)
    options = _options(r, config, protocol)
    envelope_key = "envelope" if "envelope" in r.data else "format" if "format" in r.data else None
    envelope = None
    if envelope_key is not None:
        envelope = normalize_envelope(r.data[envelope_key])
        if envelope_key == "envelope":
            check_envelope_spelling(r.data["envelope"], r.origin.child("envelope"), problems)
        if envelope_key == "format":
            log.note(r.origin.child("format"), "format", "envelope")
    envelope_options = r.data.get("envelopeoptions")
    return Endpoint(
        endpoint_id=group.group_id,
        xid=group.xid,
        provenance=group.origin.provenance(),
        usage=_usage(r),
        channel=_text(r, "channel"),
        protocol=protocol,
        protocol_options=options,
        envelope=envelope,
        envelope_options=dict(envelope_options) if isinstance(envelope_options, dict) else {},
        messagegroups=_messagegroups(r, bases),
        deployed=_deployed(r, options),
        name=_text(r, "name"),
        description=_text(r, "description"),
        field_provenance={json_path(*p): o.provenance() for p, o in r.loc.origins.items() if p},
    )


def _text(r: _Reader, key: str) -> str | None:
    value = r.data.get(key)
    if value is None or isinstance(value, str):
        return value
    r.warning(r.origin.child(key), f"'{key}' must be a string; it is ignored",
              f'write "{key}": "..."')
    return None


def _config(r: _Reader) -> JSONObject:
    config = r.data.get("config")
    if config is None:
        return {}
    where = r.origin.child("config")
    if not isinstance(config, dict):
        r.error(where, "'config' must be an object", "use protocol and protocoloptions instead")
        return {}
    r.log.note(where, "config", "protocol / protocoloptions")
    return config


def _protocol(r: _Reader, config: JSONObject) -> str | None:
    for holder, where in ((r.data, r.origin), (config, r.origin.child("config"))):
        if "protocol" in holder:
            value = holder["protocol"]
            at = where.child("protocol")
            if value is None or isinstance(value, str):
                if isinstance(value, str) and not value.strip():
                    r.error(at, "protocol must be a non-empty string",
                            'name the protocol, e.g. "protocol": "MQTT/5.0", or remove it')
                # An endpoint is configuration, not a message definition: a bare MQTT
                # is read as 5.0 as the 2023 draft's endpoint config does, with a warning.
                warn_versionless_2023(value, at, r.problems)
                protocol = normalize_protocol(value)
                if protocol is not None:
                    r.loc.origins[("protocol",)] = at
                return protocol
            r.error(at, "protocol must be a string", 'write e.g. "protocol": "MQTT/5.0"')
            return None
    return None


def _options(r: _Reader, config: JSONObject, protocol: str | None) -> JSONObject:
    """Collect options from every place they are written, top-level spellings first."""
    sources: list[tuple[str, JSON, Origin]] = []
    po = r.data.get("protocoloptions")
    po_at = r.origin.child("protocoloptions")
    if po is not None and not isinstance(po, dict):
        r.error(po_at, "protocoloptions must be an object", 'write "protocoloptions": {...}')
    elif isinstance(po, dict):
        sources += [(k, v, po_at.child(k)) for k, v in po.items() if k != "options"]
        nested = po.get("options")
        if isinstance(nested, dict):
            r.log.note(po_at.child("options"), "protocoloptions.options.*", "protocoloptions.*")
            sources += [(k, v, po_at.child("options", k)) for k, v in nested.items()]
    for key in ("deployed", "endpoints", "authorization"):
        if key in r.data:
            r.log.note(r.origin.child(key), key, f"protocoloptions.{key}")
            sources.append((key, r.data[key], r.origin.child(key)))
    config_at = r.origin.child("config")
    for key in ("endpoints", "authorization", "deployed"):
        if key in config:
            sources.append((key, config[key], config_at.child(key)))
    copts = config.get("options")
    if isinstance(copts, dict):
        sources += [(k, v, config_at.child("options", k)) for k, v in copts.items()]
    out: JSONObject = {}
    for name, value, where in sources:
        canonical = _option_name(r, name, protocol, where)
        if canonical in out:
            r.warning(where, f"endpoint option '{canonical}' is given more than once; "
                      "the first one is used", f"keep a single '{canonical}'")
            continue
        out[canonical] = value
        r.loc.origins[("protocoloptions", canonical)] = where
    if "endpoints" in out:
        out["endpoints"] = _addresses(r, out["endpoints"], r.loc.locate("protocoloptions",
                                                                         "endpoints"))
    if isinstance(out.get("willmessage"), str):
        wm = out["willmessage"]
        assert isinstance(wm, str)
        out["willmessage"] = to_xid(wm) or wm
    return out


def _option_name(r: _Reader, name: str, protocol: str | None, where: Origin) -> str:
    prof = find_profile(protocol)
    alias = None if prof is None else prof.endpoint.aliases.get(name)
    if alias is None:
        squashed = _squash(name)
        alias = next((k for k in known_options(protocol) if _squash(k) == squashed), name)
    if alias != name:
        r.log.note(where, name, alias)
    return alias


def _addresses(r: _Reader, value: JSON, where: Origin) -> JSON:
    """Endpoint addresses as objects: a string is `{"uri": s}`, `url` is `uri`."""
    if not isinstance(value, list):
        r.error(where, "'endpoints' must be an array of addresses",
                'write "endpoints": [{"uri": "mqtt://host:1883"}]')
        return []
    out: list[JSON] = []
    for index, item in enumerate(value):
        if isinstance(item, str):
            out.append({"uri": item})
        elif isinstance(item, dict):
            entry = dict(item)
            if "url" in entry and "uri" not in entry:
                r.log.note(where.child(index, "url"), "url", "uri")
                entry["uri"] = entry.pop("url")
            out.append(entry)
        else:
            r.error(where.child(index), "an endpoint address must be a URI string or an object",
                    'write {"uri": "scheme://host:port"}')
    return out


def _usage(r: _Reader) -> tuple[Usage, ...]:
    if "usage" not in r.data:
        return ()
    value = r.data["usage"]
    where = r.origin.child("usage")
    items: list[JSON] = [value] if isinstance(value, str) else value if isinstance(
        value, list) else []
    if not isinstance(value, (str, list)):
        r.error(where, "'usage' must be an array of consumer, producer, subscriber",
                'write "usage": ["consumer"]')
    out: list[Usage] = []
    for index, item in enumerate(items):
        at = where if isinstance(value, str) else where.child(index)
        usage = next((u for u in USAGES if isinstance(item, str) and item.lower() == u), None)
        if usage is None:
            r.warning(at, f"unknown usage {item!r} is ignored",
                      "use consumer, producer or subscriber")
        elif usage not in out:
            out.append(usage)
    return tuple(out)


def _messagegroups(r: _Reader, bases: tuple[str, ...]) -> tuple[str, ...]:
    key = "messagegroups" if "messagegroups" in r.data else (
        "definitionGroups" if "definitionGroups" in r.data else None)
    if key is None:
        return ()
    value = r.data[key]
    where = r.origin.child(key)
    if key != "messagegroups":
        r.log.note(where, key, "messagegroups")
    if not isinstance(value, list):
        r.error(where, f"'{key}' must be an array of message group references",
                'write "messagegroups": ["/messagegroups/<id>"]')
        return ()
    out: list[str] = []
    for index, ref in enumerate(value):
        if not isinstance(ref, str):
            r.error(where.child(index), "a message group reference must be a string",
                    'write "/messagegroups/<id>"')
            continue
        out.append(to_xid(ref, bases) or ref)  # absolute URIs into other registries stay
        r.loc.origins[("messagegroups", index)] = where.child(index)
    return tuple(out)


def _deployed(r: _Reader, options: JSONObject) -> bool:
    value = options.get("deployed", True)
    if isinstance(value, bool):
        return value
    where = r.loc.locate("protocoloptions", "deployed")
    r.warning(where, f"'deployed' must be true or false, not {value!r}; true is assumed",
              'write "deployed": false for a template endpoint')
    return True
