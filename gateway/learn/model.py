"""What the learner is told (`LearnOptions`) and what it proposes (`Proposal`,
`LearnResult`): plain data shared by the learner's stages and the `xrgw learn` command."""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.json.values import JSON, JSONObject
from gateway.learn.slots import Slot
from gateway.protocols import FieldRef


@dataclass(frozen=True)
class LearnOptions:
    """The knobs of `xrgw learn`.

    max_constant_values - a place with at most this many distinct (word-like) values splits
                          the messages into one definition per value; more, and it becomes
                          a placeholder;
    min_group_size      - a proposed definition seen in fewer messages is left out (one-off
                          messages), and reported;
    split_on / merge    - place paths (`topic_name[2]`, `headers.action`) always split on /
                          always generalised into a placeholder, whatever the counts say;
    type_prefix         - put before every proposed CloudEvents `type`;
    group               - the message group (and schema group) id of the draft.

    The caps bound memory whatever the input (a million distinct topics): see
    `gateway/learn/tally.py`.
    """

    max_constant_values: int = 64
    min_group_size: int = 2
    split_on: frozenset[str] = frozenset()
    merge: frozenset[str] = frozenset()
    type_prefix: str = ""
    group: str = "learned"
    # -- memory bounds --
    value_cap: int = 1000  # distinct values tracked per place; beyond, "many"
    vector_cap: int = 20000  # distinct value combinations tracked per address shape
    shape_cap: int = 1000  # address shapes (protocol + segment count) tracked
    slot_cap: int = 64  # places (headers, properties ...) tracked per shape
    samples_per_vector: int = 2  # bodies kept per combination, for the schema
    reply_waiting_cap: int = 10000  # requests remembered until their answer comes
    reply_lookback: int = 1000  # possible answers held back for a request read after them
    reply_pair_cap: int = 2000  # request/answer pairs sampled for reply definitions
    reply_body_cap: int = 500  # answer bodies kept for their schemas


@dataclass
class PlaceholderInfo:
    """One generalised place of a proposed definition."""

    path: str  # the place: `topic_name[3]`, `headers.deviceid`
    named_after: str | None  # the payload field carrying the same value, if any
    cardinality: int  # distinct values seen (a lower bound when `saturated`)
    saturated: bool  # more values than the learner tracks were seen
    name: str = ""  # the placeholder's name, set by `gateway.learn.assemble`
    # Made of several payload fields joined by literals (`slots.composition`): its
    # template then has one placeholder per field (`{a}-{b}`).
    composed: str | None = None
    template: str = ""  # what the place holds in the definition: `{name}` or `{a}-{b}`


@dataclass
class Proposal:
    """One proposed message definition: what the generaliser decided per place, then
    (`gateway.learn.assemble`) the definition's templates and names."""

    protocol: str
    count: int
    constants: dict[Slot, JSON]
    placeholders: dict[Slot, PlaceholderInfo]
    left_out: list[Slot]
    bodies: list[JSON] = field(default_factory=list)  # JSON bodies sampled
    content_types: dict[str, int] = field(default_factory=dict)
    non_json: int = 0  # messages whose body is not JSON
    # -- assembled --
    address_field: str | None = None  # e.g. "topic_name", "properties.subject"
    address: str | None = None  # the address template; None: the messages carry none
    options: JSONObject = field(default_factory=dict)  # protocoloptions, canonical shape
    type_parts: list[str] = field(default_factory=list)  # constant words of the type
    subject: str | None = None  # the most specific placeholder
    message_id: str = ""
    type: str = ""
    reply: ReplyProposal | None = None  # its answers' definition (`gateway.learn.replies`)


@dataclass
class ReplyProposal:
    """The proposed definition of the answers to the requests of one definition
    (`request_id`), from the request/answer pairs seen (`gateway.learn.replies`)."""

    protocol: str
    count: int  # answers sampled
    request_id: str  # the message id of the request's definition
    message_id: str  # `<request_id>.reply`
    type: str
    convention: str  # how requests and answers were paired, for people
    constants: dict[Slot, JSON]  # places with one value in every answer
    correlation: FieldRef | None  # where the answer carries the correlation, if anywhere
    bodies: list[JSON] = field(default_factory=list)
    content_types: dict[str, int] = field(default_factory=dict)
    non_json: int = 0
    every_request_answered: bool = False  # every message of the request's definition
    reply_to: FieldRef | None = None  # where the request carries its reply address
    options: JSONObject = field(default_factory=dict)  # protocoloptions, canonical shape


@dataclass
class LearnResult:
    proposals: list[Proposal]  # kept ones (count >= min_group_size)
    dropped: list[Proposal]  # one-off groups, left out
    messages: int = 0  # records learned from
    invalid: int = 0  # lines that were not records
    invalid_examples: list[str] = field(default_factory=list)  # first few, with line numbers
    overflow_messages: int = 0  # messages of shapes beyond shape_cap (not learned)
    overflow_slots: int = 0  # places beyond slot_cap (ignored)
    compactions: int = 0  # times a shape's combinations were folded to stay bounded
    unknown_paths: list[str] = field(default_factory=list)  # --split-on/--merge, no place
    replies: list[ReplyProposal] = field(default_factory=list)  # proposed reply definitions
    answers: int = 0  # records recognised as answers to an earlier request (not learned)
    forgotten_requests: int = 0  # requests forgotten unanswered (bounded memory)
