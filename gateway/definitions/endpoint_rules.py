"""Endpoint rules (notes 1.8): usage combinations, option names, templates, references."""

from __future__ import annotations

from gateway.definitions.checks import check_string_templates, unknown_name_problem, where
from gateway.definitions.endpoints import ENDPOINT_OPTIONS, known_options
from gateway.definitions.model import Catalog, Endpoint, Provenance
from gateway.definitions.refs import group_id_of, is_absolute
from gateway.ports.adapter_options import option_spec
from gateway.protocols import PROTOCOLS, find_profile
from gateway.spec.problems import Problems

_DUAL = frozenset({"subscriber", "consumer"})  # the one combination the spec allows


def check_endpoint(endpoint: Endpoint, catalog: Catalog, problems: Problems) -> None:
    _check_usage(endpoint, problems)
    _check_options(endpoint, problems)
    _check_groups(endpoint, catalog, problems)


def _at(endpoint: Endpoint, *parts: str | int) -> Provenance:
    return where(endpoint.field_provenance, endpoint.provenance, *parts)


def _check_usage(endpoint: Endpoint, problems: Problems) -> None:
    usage = set(endpoint.usage)
    if len(usage) <= 1:
        return
    at = _at(endpoint, "usage")
    prof = find_profile(endpoint.protocol)
    if usage != _DUAL:
        problems.warning(at.file, at.path,
                         f"usage {sorted(usage)} combines roles the spec keeps apart",
                         'use one of consumer, producer, subscriber, or ["subscriber", '
                         '"consumer"]')
    elif prof is not None and not prof.endpoint.subscriber_consumer:
        problems.warning(at.file, at.path,
                         f"usage [subscriber, consumer] is not allowed for {endpoint.protocol}",
                         "declare two endpoints, one per role")


def _check_options(endpoint: Endpoint, problems: Problems) -> None:
    protocol = endpoint.protocol
    if protocol is not None and protocol not in PROTOCOLS:
        at = _at(endpoint, "protocol")
        problems.warning(at.file, at.path,
                         f"unknown protocol '{protocol}'; endpoint options are not checked",
                         f"use one of: {', '.join(PROTOCOLS)}")
    known = known_options(protocol)
    adapter = option_spec(protocol)
    for name, value in endpoint.protocol_options.items():
        at = _at(endpoint, "protocoloptions", name)
        # Not an option of the spec, but one the installed adapter reads (a JetStream
        # `stream`, a Kafka `consumergroup`): `xrgw run` uses it, so it is not "ignored".
        if (protocol in ENDPOINT_OPTIONS and name not in known
                and (adapter is None or adapter.lookup(name) is None)):
            unknown_name_problem(problems, at, f"{protocol} endpoint option", name, known)
        check_string_templates(problems, value, f"endpoint option '{name}'", at)
    prof = find_profile(protocol)
    for name, (low, high) in (prof.endpoint.option_ranges.items() if prof else ()):
        value = endpoint.protocol_options.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high
        ):
            at = _at(endpoint, "protocoloptions", name)
            problems.error(at.file, at.path,
                           f"endpoint option '{name}': {value!r} is not {_spelled(low, high)}",
                           f"give an integer between {low} and {high}")


def _spelled(low: int, high: int) -> str:
    """`0, 1 or 2` for a short range, else `between 0 and 65535`."""
    if high - low > 4:
        return f"between {low} and {high}"
    return ", ".join(str(n) for n in range(low, high)) + f" or {high}"


def _check_groups(endpoint: Endpoint, catalog: Catalog, problems: Problems) -> None:
    for index, ref in enumerate(endpoint.messagegroups):
        if is_absolute(ref):
            continue  # another registry: resolving it is the client's business
        at = _at(endpoint, "messagegroups", index)
        gid = group_id_of(ref)
        if gid is None:
            problems.warning(at.file, at.path,
                             f"'{ref}' is not a message group reference",
                             'reference a group as "/messagegroups/<id>"')
        elif gid not in catalog.groups:
            problems.warning(at.file, at.path,
                             f"message group '{ref}' is not defined in the loaded documents",
                             "load the document that defines it or fix the reference")
