"""The draft xRegistry document: one message group of proposed definitions, each with its
protocoloptions, a proposed `envelopemetadata` and a JSON Schema in a schema group of the
same document. Every proposal is marked for review in its descriptions.

A definition X whose requests were answered gets a reply definition `X.reply`
(`gateway.learn.replies`) in a group of replies of its own, `<group>.replies`, the form
docs/request-reply.md documents: a route carrying X names it in `reply_definitions`, and
both definitions declare the CloudEvents extension attribute `correlationid`."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.json.values import JSON, JSONObject
from gateway.learn.assemble import request_options
from gateway.learn.model import LearnOptions, Proposal, ReplyProposal
from gateway.learn.schemas import SCHEMA_FORMAT, content_type, infer_schema

CATALOG_SCHEMA = "https://xregistry.io/schema/xregistry_messaging_catalog.json"
REVIEW = "proposed by xrgw learn: review before use"
UNCONSTRAINED = ("messages that carry nothing a definition can constrain (no address, no "
                 "constant or named metadata): add protocol and protocoloptions by hand")
#: The CloudEvents extension attribute linking a request and its reply definition
#: (`gateway.ports.CORRELATION_ATTRIBUTE`, docs/request-reply.md).
CORRELATION_ATTRIBUTE = "correlationid"


def replies_group(options: LearnOptions) -> str:
    """The id of the draft's group of reply definitions."""
    return f"{options.group}.replies"


def draft_document(proposals: Sequence[Proposal], options: LearnOptions) -> JSONObject:
    group = options.group
    messages: JSONObject = {}
    replies: JSONObject = {}
    schemas: JSONObject = {}
    for proposal in proposals:
        definition = _definition(proposal)
        _schema(definition, proposal.message_id, proposal.bodies, group, schemas)
        messages[proposal.message_id] = definition
        if proposal.reply is not None:
            reply = _reply_definition(proposal.reply)
            _schema(reply, proposal.reply.message_id, proposal.reply.bodies, group, schemas)
            replies[proposal.reply.message_id] = reply
    groups: JSONObject = {group: {
        "envelope": "CloudEvents/1.0",
        "description": f"{len(proposals)} definition(s) {REVIEW}",
        "messages": messages,
    }}
    if replies:
        groups[replies_group(options)] = {
            "envelope": "CloudEvents/1.0",
            "description": (f"the replies to {len(replies)} definition(s) of {group}: name "
                            f"them in the route's reply_definitions; {REVIEW}"),
            "messages": replies,
        }
    document: JSONObject = {"$schema": CATALOG_SCHEMA, "messagegroups": groups}
    if schemas:
        document["schemagroups"] = {group: {"schemas": schemas}}
    return document


def _schema(definition: JSONObject, message_id: str, bodies: Sequence[JSON], group: str,
            schemas: JSONObject) -> None:
    schema = infer_schema(bodies)
    if schema is not None:
        definition["dataschemaformat"] = SCHEMA_FORMAT
        definition["dataschemauri"] = f"#/schemagroups/{group}/schemas/{message_id}"
        schemas[message_id] = {
            "format": SCHEMA_FORMAT,
            "description": f"inferred from {len(bodies)} sampled bodies; {REVIEW}",
            "versions": {"1": {"format": SCHEMA_FORMAT, "schema": schema}},
        }


def _link(request_id: str) -> JSONObject:
    return {"type": "string", "description": (
        f"links {request_id} and {request_id}.reply: the gateway sets it on the request, "
        f"the reply carries the same value; {REVIEW}")}


def _reply_definition(reply: ReplyProposal) -> JSONObject:
    metadata: JSONObject = {
        "type": {"value": reply.type, "description": f"the request's type + .reply; {REVIEW}"},
        # The answer's address is the requester's inbox: nothing to take a source from.
        "source": {"value": reply.message_id, "description": f"a placeholder; {REVIEW}"},
        CORRELATION_ATTRIBUTE: _link(reply.request_id),
    }
    ctype = content_type(reply)
    if ctype is not None:
        metadata["datacontenttype"] = {"value": ctype}
    definition: JSONObject = {
        "envelope": "CloudEvents/1.0",
        "description": (f"the reply to {reply.request_id} (paired by {reply.convention}): "
                        f"learned from {reply.count} answer(s); {REVIEW}"),
        "envelopemetadata": metadata,
    }
    if reply.options:
        definition["protocol"] = reply.protocol
        definition["protocoloptions"] = reply.options
    else:
        definition["description"] = (
            f"the reply to {reply.request_id} (paired by {reply.convention}); "
            f"{reply.protocol} {UNCONSTRAINED}; learned from {reply.count} answer(s); "
            f"{REVIEW}")
    return definition


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
    if proposal.reply is not None:
        metadata[CORRELATION_ATTRIBUTE] = _link(proposal.message_id)
    definition: JSONObject = {
        "envelope": "CloudEvents/1.0",
        "description": f"{where}: learned from {proposal.count} message(s); {REVIEW}",
        "envelopemetadata": metadata,
    }
    options = request_options(proposal)
    if options:
        definition["protocol"] = proposal.protocol
        definition["protocoloptions"] = options
    else:
        # A definition with a protocol must constrain something of it (it would match
        # every message of the protocol): without anything to constrain, say so.
        definition["description"] = (
            f"{proposal.protocol} {UNCONSTRAINED}; learned from {proposal.count} "
            f"message(s); {REVIEW}")
    return definition
