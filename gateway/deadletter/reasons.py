"""Dead-letter reason codes, shared by the CLI, the daemon and the Spark pipeline.

Every message that does not become a delivered CloudEvent ends with exactly one of these.
"""

from __future__ import annotations

from typing import Final

INVALID_RECORD: Final = "invalid-record"  # input is not a native message record
INVALID_CLOUDEVENT: Final = "invalid-cloudevent"  # claims to be a CloudEvent, breaks a rule
UNMATCHED: Final = "unmatched"  # no definition accepts the message
AMBIGUOUS: Final = "ambiguous"  # several equally specific definitions (policy deadletter)
MISSING_CONTEXT: Final = "missing-context"  # a template placeholder has no value
INVALID_ENVELOPE: Final = "invalid-envelope"  # the rendered CloudEvent would be invalid
NO_ENVELOPE: Final = "no-envelope"  # matched definition has no CloudEvents envelope
UNDELIVERABLE: Final = "undeliverable"  # outputs failed past the retry budget
NO_REPLY: Final = "no-reply"  # request-reply: no answer within the route's reply_timeout
UNCORRELATED_REPLY: Final = "uncorrelated-reply"  # an answer that names no request
# Request-reply with `reply_definitions`: the service's answer conforms to none of them
# (the letter holds the answer; the sender was told of a failure).
NONCONFORMING_REPLY: Final = "nonconforming-reply"
INVALID_DATA: Final = "invalid-data"  # the body fails its definition's schema (enforce)
TOO_LARGE: Final = "too-large"  # over an output's size limit: never sent, never retried
# The source adapter could not decode what the broker holds (a Kafka batch in a codec it
# cannot read, corrupt or failing its CRC, a header name that is not UTF-8): the raw bytes
# where they can be had, and where the message was (topic/partition/offset).
UNDECODABLE: Final = "undecodable"

ALL: Final = (
    INVALID_RECORD,
    INVALID_CLOUDEVENT,
    UNMATCHED,
    AMBIGUOUS,
    MISSING_CONTEXT,
    INVALID_ENVELOPE,
    NO_ENVELOPE,
    UNDELIVERABLE,
    NO_REPLY,
    UNCORRELATED_REPLY,
    NONCONFORMING_REPLY,
    INVALID_DATA,
    TOO_LARGE,
    UNDECODABLE,
)
