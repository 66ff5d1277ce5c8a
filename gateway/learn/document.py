"""The draft xRegistry document: one message group of proposed definitions, each with its
protocoloptions, a proposed `envelopemetadata` and a JSON Schema in a schema group of the
same document. Every proposal is marked for review in its descriptions."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.json.values import JSONObject
from gateway.learn.model import LearnOptions, Proposal
from gateway.learn.schemas import SCHEMA_FORMAT, content_type, infer_schema

CATALOG_SCHEMA = "https://xregistry.io/schema/xregistry_messaging_catalog.json"
REVIEW = "proposed by xrgw learn: review before use"
UNCONSTRAINED = ("messages that carry nothing a definition can constrain (no address, no "
                 "constant or named metadata): add protocol and protocoloptions by hand")


def draft_document(proposals: Sequence[Proposal], options: LearnOptions) -> JSONObject:
    group = options.group
    messages: JSONObject = {}
    schemas: JSONObject = {}
    for proposal in proposals:
        definition = _definition(proposal)
        schema = infer_schema(proposal.bodies)
        if schema is not None:
            definition["dataschemaformat"] = SCHEMA_FORMAT
            definition["dataschemauri"] = (f"#/schemagroups/{group}/schemas/"
                                           f"{proposal.message_id}")
            schemas[proposal.message_id] = {
                "format": SCHEMA_FORMAT,
                "description": f"inferred from {len(proposal.bodies)} sampled bodies; {REVIEW}",
                "versions": {"1": {"format": SCHEMA_FORMAT, "schema": schema}},
            }
        messages[proposal.message_id] = definition
    document: JSONObject = {
        "$schema": CATALOG_SCHEMA,
        "messagegroups": {group: {
            "envelope": "CloudEvents/1.0",
            "description": f"{len(proposals)} definition(s) {REVIEW}",
            "messages": messages,
        }},
    }
    if schemas:
        document["schemagroups"] = {group: {"schemas": schemas}}
    return document


def _definition(proposal: Proposal) -> JSONObject:
    where = (f"{proposal.address_field} {proposal.address}" if proposal.address
             else "messages without an address")
    metadata: JSONObject = {
        "type": {"value": proposal.type, "description": f"from the constant words of the "
                                                       f"address; {REVIEW}"},
    }
    if proposal.address is not None:
        metadata["source"] = {"type": "uritemplate", "value": proposal.address,
                              "description": f"the address template; {REVIEW}"}
    if proposal.subject is not None:
        metadata["subject"] = {"type": "uritemplate", "value": proposal.subject,
                               "description": f"the most specific placeholder; {REVIEW}"}
    ctype = content_type(proposal)
    if ctype is not None:
        metadata["datacontenttype"] = {"value": ctype}
    definition: JSONObject = {
        "envelope": "CloudEvents/1.0",
        "description": f"{where}: learned from {proposal.count} message(s); {REVIEW}",
        "envelopemetadata": metadata,
    }
    if proposal.options:
        definition["protocol"] = proposal.protocol
        definition["protocoloptions"] = proposal.options
    else:
        # A definition with a protocol must constrain something of it (it would match
        # every message of the protocol): without anything to constrain, say so.
        definition["description"] = (
            f"{proposal.protocol} {UNCONSTRAINED}; learned from {proposal.count} "
            f"message(s); {REVIEW}")
    return definition
