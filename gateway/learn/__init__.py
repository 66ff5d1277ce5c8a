"""`xrgw learn`: propose an xRegistry document from native messages.

    result = learn(records, LearnOptions(type_prefix="com.example."))
    document = draft_document(result.proposals, options)

`learn` takes any iterable of native records (a JSON Lines file through
`gateway.record.read_records`, or a live consumer later), so it never holds more than its
bounded tallies (`tally.py`). The stages, one module each: `slots` (a record's places),
`tally` (bounded counts per address shape), `replies` (request/answer pairs, bounded),
`generalise` (constants, splits, placeholders), `assemble` (templates and names),
`schemas` (genson), `document` (the draft), `summary` (what was proposed, for people and
programs).
"""

from __future__ import annotations

from collections.abc import Iterable

from gateway.learn.assemble import assemble, assemble_reply
from gateway.learn.document import draft_document
from gateway.learn.generalise import propose
from gateway.learn.model import (
    LearnOptions,
    LearnResult,
    PlaceholderInfo,
    Proposal,
    ReplyProposal,
)
from gateway.learn.replies import ReplyPairs, reply_proposals
from gateway.learn.tally import Tallies
from gateway.record import NativeMessage, RecordError

#: Invalid lines quoted in the result (the rest are counted).
_INVALID_EXAMPLES = 5


def learn(records: Iterable[NativeMessage | RecordError | tuple[int, NativeMessage | RecordError]],
          options: LearnOptions | None = None) -> LearnResult:
    """Learn from `records` (records, or `read_records`' (line, record or error) pairs)."""
    options = options or LearnOptions()
    tallies = Tallies(options)
    pairs = ReplyPairs(options)
    result = LearnResult([], [])
    for item in records:
        line, record = item if isinstance(item, tuple) else (None, item)
        if isinstance(record, RecordError):
            result.invalid += 1
            if len(result.invalid_examples) < _INVALID_EXAMPLES:
                where = "" if line is None else f"line {line}: "
                result.invalid_examples.append(f"{where}{record}")
            continue
        result.messages += 1
        for seen in pairs.see(record):  # answers are not kinds of messages: not here
            tallies.add(seen)
    for seen in pairs.flush():
        tallies.add(seen)
    proposals: list[Proposal] = []
    for shape in sorted(tallies.shapes.values(), key=lambda s: (s.protocol, s.segments)):
        proposals.extend(propose(shape, options))
        result.overflow_slots += shape.overflow_slots
        result.compactions += shape.compactions
    result.overflow_messages = tallies.overflow_messages
    known = {slot.path for shape in tallies.shapes.values() for slot in shape.slots}
    result.unknown_paths = sorted((options.split_on | options.merge) - known)
    kept = [p for p in proposals if p.count >= options.min_group_size]
    result.dropped = [p for p in proposals if p.count < options.min_group_size]
    assemble(kept + result.dropped, options)
    result.proposals = kept
    result.answers, result.forgotten_requests = pairs.answered, pairs.forgotten
    result.replies = reply_proposals(pairs.pairs, kept, options)
    for reply in result.replies:
        assemble_reply(reply)
    return result


__all__ = ["LearnOptions", "LearnResult", "PlaceholderInfo", "Proposal", "ReplyProposal",
           "draft_document", "learn"]
