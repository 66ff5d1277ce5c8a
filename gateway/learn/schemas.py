"""The payload of a proposed definition: a JSON Schema inferred with `genson` from the
JSON bodies sampled, or, for bodies that are not JSON, their content type."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from genson import SchemaBuilder  # type: ignore[import-untyped]

from gateway.json.values import JSON, JSONObject
from gateway.learn.model import Proposal, ReplyProposal

SCHEMA_FORMAT = "JsonSchema/draft-07"
_DRAFT_07 = "http://json-schema.org/draft-07/schema#"
OCTET_STREAM = "application/octet-stream"


def infer_schema(bodies: Sequence[JSON]) -> JSONObject | None:
    """The schema every sampled body satisfies; None without JSON bodies."""
    if not bodies:
        return None
    builder = SchemaBuilder(schema_uri=_DRAFT_07)
    for body in bodies:
        builder.add_object(body)
    return cast(JSONObject, builder.to_schema())


def content_type(proposal: Proposal | ReplyProposal) -> str | None:
    """The datacontenttype to propose: the content type every message carried, else
    application/json for JSON bodies, application/octet-stream for others."""
    if len(proposal.content_types) == 1:
        [only] = proposal.content_types
        if proposal.content_types[only] == proposal.count:
            return only
    if proposal.bodies and not proposal.non_json:
        return "application/json"
    if proposal.non_json:
        return OCTET_STREAM
    return None
