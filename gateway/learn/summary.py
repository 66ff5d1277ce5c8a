"""What the learner proposed, for a person (`summary_text`) and for a program
(`summary_json`): per definition its message count, address template, constants and left
out places, and per placeholder its cardinality - what the merge/split knobs act on."""

from __future__ import annotations

from gateway.json.values import JSONObject, as_text
from gateway.learn.assemble import required_reply_address
from gateway.learn.document import UNCONSTRAINED, replies_group
from gateway.learn.model import LearnOptions, LearnResult, Proposal, ReplyProposal


def summary_json(result: LearnResult, options: LearnOptions) -> JSONObject:
    return {
        "messages": result.messages,
        "invalid_lines": result.invalid,
        "invalid_examples": [example for example in result.invalid_examples],
        "definitions": [_proposal_json(p) for p in result.proposals],
        "left_out": [_proposal_json(p) for p in result.dropped],
        "unknown_paths": [path for path in result.unknown_paths],
        "replies": [_reply_json(r, options) for r in result.replies],
        "answers": result.answers,
        "forgotten_requests": result.forgotten_requests,
        "min_group_size": options.min_group_size,
        "max_constant_values": options.max_constant_values,
        "bounds": {"messages_of_untracked_shapes": result.overflow_messages,
                   "untracked_places": result.overflow_slots,
                   "folded_places": result.compactions},
    }


def _reply_json(reply: ReplyProposal, options: LearnOptions) -> JSONObject:
    return {
        "id": reply.message_id,
        "reply_definition": f"{replies_group(options)}/{reply.message_id}",
        "request": reply.request_id,
        "type": reply.type,
        "protocol": reply.protocol,
        "answers": reply.count,
        "paired_by": reply.convention,
        "constants": {slot.path: value for slot, value in sorted(reply.constants.items())},
    }


def _proposal_json(proposal: Proposal) -> JSONObject:
    return {
        "id": proposal.message_id,
        "type": proposal.type,
        "protocol": proposal.protocol,
        "messages": proposal.count,
        "address_field": proposal.address_field,
        "address": proposal.address,
        "placeholders": [
            {"name": info.name, "template": info.template, "path": info.path,
             "named_after": info.named_after,
             "cardinality": info.cardinality, "saturated": info.saturated}
            for info in proposal.placeholders.values()
        ],
        "constants": {slot.path: value for slot, value in sorted(proposal.constants.items())},
        "left_out": [path for path in _left_out(proposal)],
        "constrained": bool(proposal.options),
    }


def _left_out(proposal: Proposal) -> list[str]:
    """The varying places left out, but the reply address where the draft requires it."""
    required = required_reply_address(proposal)
    return sorted({slot.path for slot in proposal.left_out if slot.path != required})


def summary_text(result: LearnResult, options: LearnOptions) -> str:
    lines = [f"learned {result.messages} message(s) into {len(result.proposals)} "
             f"definition(s)"]
    if result.invalid:
        lines.append(f"skipped {result.invalid} line(s) that are not native records, e.g.")
        lines += [f"  {example}" for example in result.invalid_examples]
    if result.unknown_paths:
        lines.append(f"note: no message has the place(s) {', '.join(result.unknown_paths)} "
                     "given to --split-on/--merge (places look like topic_name[2], "
                     "headers.action)")
    for proposal in result.proposals:
        lines += _proposal_lines(proposal)
        if proposal.reply is not None:
            reply = proposal.reply
            lines.append(f"{reply.count:>9}  {reply.message_id}  {reply.protocol}  "
                         f"answers paired by {reply.convention}")
            lines.append(f"{'':>11}a reply route for {proposal.message_id}: reply: true, "
                         f"reply_definitions: [{replies_group(options)}/{reply.message_id}]")
    if result.answers:
        lines.append(f"{result.answers} answer(s) to earlier requests were paired with "
                     f"them, not learned as messages of their own")
    if result.forgotten_requests:
        lines.append(f"bounded: {result.forgotten_requests} request(s) were forgotten "
                     "unanswered (an answer to them is learned as a message)")
    if result.dropped:
        count = sum(p.count for p in result.dropped)
        lines.append(f"left out {len(result.dropped)} definition(s) of {count} message(s): "
                     f"fewer than --min-group-size {options.min_group_size} message(s) each")
        lines += [f"  {p.message_id} ({p.count}): {p.address_field or ''} {p.address or ''}"
                  for p in result.dropped[:20]]
    if result.overflow_messages or result.overflow_slots:
        lines.append(f"bounded: {result.overflow_messages} message(s) of further address "
                     f"shapes and {result.overflow_slots} further place(s) were counted, "
                     "not learned")
    return "\n".join(lines)


def _proposal_lines(proposal: Proposal) -> list[str]:
    where = (f"{proposal.address_field} {proposal.address}" if proposal.address
             else "(no address)")
    lines = [f"{proposal.count:>9}  {proposal.message_id}  {proposal.protocol}  {where}"]
    if not proposal.options:
        lines.append(f"{'':>11}written without protocol: {UNCONSTRAINED}")
    for info in proposal.placeholders.values():
        many = f">{info.cardinality}" if info.saturated else str(info.cardinality)
        after = f", named after payload {info.named_after}" if info.named_after else ""
        if info.composed is not None:
            after = ", made of payload fields"
        lines.append(f"{'':>11}{info.template} at {info.path}: {many} value(s){after}")
    if proposal.constants:
        text = ", ".join(f"{slot.path}={as_text(value)}"
                         for slot, value in sorted(proposal.constants.items())
                         if not slot.is_segment)
        if text:
            lines.append(f"{'':>11}constants: {text}")
    left_out = _left_out(proposal)
    if left_out:
        lines.append(f"{'':>11}left out (varying): {', '.join(left_out)}")
    if proposal.reply is not None and required_reply_address(proposal) is not None:
        lines.append(f"{'':>11}requires a reply address: every message was answered")
    return lines
