"""Checking routes and the dead letter against the loaded definitions, and building
`RouteConfig`s.

The YAML alone cannot tell whether `store-mqtt` exists or can be read from; these rules
need the catalog, so they run after it is loaded. Each endpoint id a route needs is
remembered with the JSON path that named it first, so address problems found later point
at the line that made the endpoint necessary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import cast

from gateway.config._model import (
    Ambiguity,
    Deliver,
    GatewayConfig,
    Mode,
    RouteConfig,
)
from gateway.definitions.model import Catalog, Endpoint, MessageDefinition
from gateway.definitions.refs import group_id_of, message_xid, to_xid
from gateway.policies.reply import ReplyErrors
from gateway.policies.retry import RetryPolicy
from gateway.policies.schema import SchemaPolicy
from gateway.protocols import PROFILES, family_members, find_profile
from gateway.redaction.rules import redaction_problem
from gateway.schemas.enforce import fetch_remote, schema_findings
from gateway.schemas.fetch import FETCHER
from gateway.spec.problems import Problem, Problems, json_path, suggest

_READS = ("consumer", "subscriber")


class RouteChecker:
    def __init__(self, catalog: Catalog, file: str, problems: Problems,
                 unread_sources: bool = False, unresolved: set[str] | None = None) -> None:
        self.catalog = catalog
        self.file = file
        self.problems = problems
        # A definitions source could not be read: an endpoint missing from the rest is
        # most likely in it, and that error already names the root cause.
        self.unread_sources = unread_sources
        self.used: dict[str, str] = {}  # endpoint id -> JSON path that first needed it
        # Paths holding a `${NAME}` left unread (`--no-env`): the id or value it stands
        # for is unknown, so it is not looked up.
        self.unresolved = unresolved or set()
        # The config's `endpoints.<id>.options` (raw): an option a reply route's output
        # needs may be set there instead of in the document.
        self.overrides: Mapping[str, object] = {}
        # One checker per configuration load: schema URLs are asked again, once each.
        FETCHER.next_generation()

    def route(self, index: int, raw: Mapping[str, object]) -> RouteConfig | None:
        base: tuple[str | int, ...] = ("routes", index)
        source_id = cast(str, raw["from"])
        targets = tuple(cast(list[str], raw["to"]))
        mode = cast(Mode, raw["mode"])
        deliver = cast(Deliver, raw["deliver"])
        errors_before = len(self.problems.errors)
        source = self._endpoint(source_id, (*base, "from"), _READS)
        for j, target_id in enumerate(targets):
            if target_id in targets[:j]:
                self.problems.warning(self.file, json_path(*base, "to", j),
                                      f"'{target_id}' is listed twice", "remove the repeat")
                continue
            target = self._endpoint(target_id, (*base, "to", j), ("producer",))
            if target is not None:
                self._check_output(target, mode, deliver, base)
        groups, messages = self._messages(source, raw.get("messagegroups"), base)
        reply = raw.get("reply") is True
        if reply:
            self._check_reply(source, targets, base)
        replies = self._reply_definitions(raw, reply, base)
        self._check_reply_errors(source, raw.get("reply_errors"), base)
        observe = raw.get("observe") is True
        redact = tuple(cast(list[str], raw.get("redact") or []))
        self._check_observe(source, observe, redact, base)
        schema = cast(SchemaPolicy, raw.get("schema", "tiebreak"))
        if schema == "enforce":
            messages = self._enforceable(messages, base)
        if len(self.problems.errors) > errors_before:
            return None
        retry = cast(dict[str, object], raw["retry"])
        return RouteConfig(
            index=index, source=source_id, targets=targets, mode=mode, messagegroups=groups,
            deliver=deliver, ambiguity=cast(Ambiguity, raw["ambiguity"]),
            partitionkey=cast(str, raw["partitionkey"]),
            inflight=cast(int, raw["inflight"]),
            retry=RetryPolicy(cast(int, retry["attempts"]), cast(float, retry["initial_backoff"]),
                              cast(float, retry["max_backoff"])),
            stall_after=cast(float, raw["stall_after"]),
            messages=messages, observe=observe, redact=redact, schema=schema,
            reply_timeout=cast(float, raw["reply_timeout"]) if reply else None,
            reply_messages=replies,
            reply_errors=cast(ReplyErrors, raw.get("reply_errors", "none")),
        )

    def _check_observe(self, source: Endpoint | None, observe: bool, redact: tuple[str, ...],
                       base: tuple[str | int, ...]) -> None:
        for j, path in enumerate(redact):
            why = redaction_problem(path)
            if why is not None:
                self.problems.error(self.file, json_path(*base, "redact", j),
                                    f"'{path}' is not a field path", why)
        if observe and source is not None:
            refused = observe_refusal(source.protocol)
            if refused is not None:
                self.problems.error(
                    self.file, json_path(*base, "observe"),
                    f"endpoint '{source.endpoint_id}' cannot be observed: {refused}",
                    "remove observe: true from this route, or observe another endpoint "
                    "carrying the same messages")

    def _enforceable(self, messages: tuple[MessageDefinition, ...],
                     base: tuple[str | int, ...]) -> tuple[MessageDefinition, ...]:
        """`schema: enforce` needs every schema reference resolved (URLs fetched now) and
        every schema sound; what cannot be enforced is a warning."""
        fetched = fetch_remote(messages, FETCHER)
        for finding in schema_findings(fetched):
            m = finding.definition
            key = "$.dataschema" if m.dataschema is not None else "$.dataschemauri"
            at = m.field_provenance.get(key) or m.provenance
            text = f"{m.xid}: {finding.message} (route {json_path(*base)} has schema: enforce)"
            if finding.severity == "error":
                self.problems.error(at.file, at.path, text, finding.fix)
            else:
                self.problems.warning(at.file, at.path, text, finding.fix)
        return fetched

    def deadletter(self, endpoint_id: str) -> None:
        self._endpoint(endpoint_id, ("deadletter",), ("producer",))

    def _endpoint(
        self, endpoint_id: str, parts: tuple[str | int, ...], usages: tuple[str, ...]
    ) -> Endpoint | None:
        path = json_path(*parts)
        if path in self.unresolved:
            return None
        endpoint = self.catalog.endpoints.get(endpoint_id)
        role = " or ".join(usages)
        if endpoint is None and self.unread_sources:
            return None
        if endpoint is None:
            candidates = sorted(e.endpoint_id for e in self.catalog.endpoints.values()
                                if set(e.usage) & set(usages))
            close = suggest(endpoint_id, candidates)
            fix = (f"did you mean '{close}'?" if close else
                   f"use a {role} endpoint of the definitions: {', '.join(candidates) or '(none)'}"
                   )
            self.problems.error(self.file, path, f"no endpoint '{endpoint_id}' in the "
                                "definitions", fix)
            return None
        self.used.setdefault(endpoint_id, path)
        if not set(endpoint.usage) & set(usages):
            has = ", ".join(endpoint.usage) or "none"
            self.problems.error(
                self.file, path,
                f"endpoint '{endpoint_id}' has usage {has}, but {role} is needed here",
                f"name an endpoint with usage {role}, or add {usages[0]} to the usage of "
                f"'{endpoint_id}' in {endpoint.provenance.file}")
            return None  # checks of what it carries would only repeat this problem
        return endpoint

    def _check_output(
        self, target: Endpoint, mode: Mode, deliver: Deliver, base: tuple[str | int, ...]
    ) -> None:
        eid = target.endpoint_id
        if {json_path(*base, "mode"), json_path(*base, "deliver")} & self.unresolved:
            return  # the mode or delivery is the environment's, not known here
        if deliver == "native":
            if not self.catalog.messages_for_endpoint(eid):
                self.problems.error(
                    self.file, json_path(*base, "deliver"),
                    f"deliver: native needs message definitions on '{eid}', which has none",
                    f"add messagegroups or messages to '{eid}', or use deliver: cloudevent")
            return
        prof = find_profile(target.protocol)
        if mode == "binary" and prof is not None and not prof.binary_mode:
            # A sibling of the same family may carry them (MQTT 5.0 for 3.1.1).
            sibling = next((p.name for p in family_members(prof.family) if p.binary_mode), None)
            self.problems.error(
                self.file, json_path(*base, "mode"),
                f"mode binary is impossible towards '{eid}': {prof.name} has no message "
                "properties to carry CloudEvents attributes",
                "use mode: structured" + (
                    f", or make '{eid}' an {sibling} endpoint" if sibling else ""))
        declared = target.envelope_options.get("mode")
        if isinstance(declared, str) and declared.lower() in ("binary", "structured") \
                and declared.lower() != mode:
            self.problems.error(
                self.file, json_path(*base, "mode"),
                f"endpoint '{eid}' declares envelopeoptions.mode {declared}, the route "
                f"sends {mode}", f"use mode: {declared.lower()}")

    def _check_reply(self, source: Endpoint | None, targets: tuple[str, ...],
                     base: tuple[str | int, ...]) -> None:
        """`reply: true` needs a source whose senders can wait for an answer and one
        output that can give one (`ProtocolProfile.request_reply`)."""
        path = json_path(*base, "reply")
        if path in self.unresolved:
            return
        if len(targets) != 1:
            self.problems.error(
                self.file, json_path(*base, "to"),
                f"reply: true needs exactly one output (the one that answers), not "
                f"{len(targets)}", "list one endpoint in to, or make a route per output")
            return
        target = self.catalog.endpoints.get(targets[0])
        for role, endpoint in (("source", source), ("output", target)):
            if endpoint is None:
                continue  # reported already
            prof = find_profile(endpoint.protocol or "")
            capable = sorted(p.name for p in PROFILES if p.request_reply is not None)
            if prof is None or prof.request_reply is None:
                self.problems.error(
                    self.file, path,
                    f"reply: true is impossible with {role} '{endpoint.endpoint_id}': "
                    f"{endpoint.protocol} has no request-reply",
                    f"use a {', '.join(capable)} endpoint as {role}, or remove reply")
                continue
            blocking = [o for o in prof.request_reply.not_with
                        if endpoint.protocol_options.get(o) not in (None, False, "")]
            if blocking:
                self.problems.error(
                    self.file, path,
                    f"reply: true is impossible with {role} '{endpoint.endpoint_id}': "
                    f"with {blocking[0]} set, {prof.name} carries no "
                    f"{prof.request_reply.how}",
                    f"use an endpoint without {blocking[0]} (core {prof.name}), or remove "
                    "reply")
            missing = [o for o in prof.request_reply.output_needs
                       if role == "output" and self._option(endpoint, o) in (None, "")]
            if missing:
                self.problems.error(
                    self.file, path,
                    f"reply: true needs {missing[0]} on output '{endpoint.endpoint_id}': "
                    f"it names where the services' answers come ({prof.name} carries "
                    f"{prof.request_reply.how})",
                    f"set {missing[0]} in the endpoint's protocoloptions or in "
                    f"endpoints.{endpoint.endpoint_id}.options (docs/request-reply.md)")

    def _option(self, endpoint: Endpoint, name: str) -> object:
        """An endpoint option as the config's options or else the document set it."""
        override = self.overrides.get(endpoint.endpoint_id)
        options = override.get("options") if isinstance(override, Mapping) else None
        if isinstance(options, Mapping) and options.get(name) is not None:
            return options.get(name)
        return endpoint.protocol_options.get(name)

    def _check_reply_errors(self, source: Endpoint | None, errors: object,
                            base: tuple[str | int, ...]) -> None:
        """`reply_errors: problem` changes nothing for a source whose protocol has a
        status to tell its senders with (HTTP: 504 / 502 and a problem body)."""
        prof = None if source is None else find_profile(source.protocol)
        how = None if prof is None else prof.request_reply
        if errors == "problem" and how is not None and how.status is not None:
            self.problems.warning(
                self.file, json_path(*base, "reply_errors"),
                f"reply_errors: problem changes nothing for source "
                f"'{source.endpoint_id if source else ''}': {prof.name if prof else ''} "
                "senders are told of failures by their response status",
                "remove reply_errors, or keep it for when the source changes")

    def _reply_definitions(self, raw: Mapping[str, object], reply: bool,
                           base: tuple[str | int, ...]) -> tuple[MessageDefinition, ...]:
        """The definitions `reply_definitions` names: a group id takes the group's
        definitions, `group/message` (or a message XID) one definition."""
        listed = cast(list[object], raw.get("reply_definitions") or [])
        if listed and not reply and json_path(*base, "reply") not in self.unresolved:
            self.problems.error(self.file, json_path(*base, "reply_definitions"),
                                "reply_definitions without reply: true: no answers to check",
                                "add reply: true to the route, or remove reply_definitions")
        found: list[MessageDefinition] = []
        for j, entry in enumerate(listed):
            path = json_path(*base, "reply_definitions", j)
            if path in self.unresolved:
                continue
            definitions = self._reply_entry(str(entry))
            if definitions is None:
                known = sorted([*self.catalog.groups, *(
                    f"{m.group_id}/{m.message_id}" for g in self.catalog.groups.values()
                    for m in g.messages)])
                close = suggest(str(entry), known)
                self.problems.error(
                    self.file, path, f"no message group or definition '{entry}' in the "
                    "definitions", f"did you mean '{close}'?" if close else
                    "name a message group id, or a definition as group/message")
                continue
            found.extend(d for d in definitions if d not in found)
        return tuple(found)

    def _reply_entry(self, entry: str) -> tuple[MessageDefinition, ...] | None:
        text = entry.strip()
        if text in self.catalog.groups:
            return self.catalog.groups[text].messages
        xid = to_xid(text) if text.startswith(("/", "#")) else None
        if xid is None and text.count("/") == 1:
            group, message = text.split("/")
            xid = f"/messagegroups/{group}/messages/{message}"
        if xid is None:
            return None
        gid = group_id_of(xid)
        if gid is not None and gid in self.catalog.groups:
            return self.catalog.groups[gid].messages
        definition = self.catalog.message(message_xid(xid))
        return None if definition is None else (definition,)

    def _messages(
        self, source: Endpoint | None, raw_groups: object, base: tuple[str | int, ...]
    ) -> tuple[tuple[str, ...], tuple[MessageDefinition, ...]]:
        if raw_groups is None:
            if source is None:
                return (), ()
            ids = tuple(g for g in (_group_id(r) for r in source.messagegroups) if g)
            messages = tuple(self.catalog.messages_for_endpoint(source.endpoint_id))
            where: tuple[str | int, ...] = (*base, "from")
        else:
            ids = tuple(self._group(str(g), (*base, "messagegroups", j))
                        for j, g in enumerate(cast(list[object], raw_groups))
                        if json_path(*base, "messagegroups", j) not in self.unresolved)
            messages = tuple(m for g in ids if g in self.catalog.groups
                             for m in self.catalog.groups[g].messages)
            where = (*base, "messagegroups")
        # Unknown groups were reported already; "nothing to match" would only repeat that.
        # Nor is it known when a group is an unread `${NAME}`.
        complete = (all(g in self.catalog.groups for g in ids)
                    and len(ids) == len(cast(list[object], raw_groups))
                    if raw_groups is not None else source is not None)
        if not messages and complete:
            self.problems.error(self.file, json_path(*where),
                                "the route has no message definitions to match",
                                "list messagegroups on the route, or reference message groups "
                                "from the consumer endpoint")
        return ids, messages

    def _group(self, text: str, parts: tuple[str | int, ...]) -> str:
        gid = _group_id(text) or text
        if gid not in self.catalog.groups:
            close = suggest(gid, self.catalog.groups)
            fix = (f"did you mean '{close}'?" if close else
                   f"use a message group id: {', '.join(sorted(self.catalog.groups)) or '(none)'}")
            self.problems.error(self.file, json_path(*parts),
                                f"no message group '{text}' in the definitions", fix)
        return gid


def observe_all(config: GatewayConfig) -> tuple[GatewayConfig, list[Problem]]:
    """`--observe`: every route of `config` in shadow mode, and the errors of the routes
    whose source cannot be observed (the same check as `routes[].observe`)."""
    problems = Problems()
    for route in config.routes:
        endpoint = config.endpoints.get(route.source)
        refused = observe_refusal(endpoint.protocol if endpoint is not None else None)
        if refused is not None:
            problems.error(config.file, json_path("routes", route.index, "from"),
                           f"--observe: endpoint '{route.source}' cannot be observed: "
                           f"{refused}", "observe the other routes with observe: true on "
                           "each instead of --observe")
    routes = tuple(replace(r, observe=True) for r in config.routes)
    return replace(config, routes=routes), list(problems)


def observe_refusal(protocol: str | None) -> str | None:
    """Why a consumer endpoint of `protocol` cannot be observed without taking its
    messages (`ProtocolProfile.observe`); None: it can."""
    prof = find_profile(protocol)
    if prof is None:
        return None  # an unknown protocol is reported elsewhere
    return prof.observe.refused


def _group_id(ref: str) -> str | None:
    """`store`, `/messagegroups/store` and `#/messagegroups/store` all name `store`."""
    if "/" not in ref:
        return ref
    xid = to_xid(ref)
    return group_id_of(xid) if xid else None
