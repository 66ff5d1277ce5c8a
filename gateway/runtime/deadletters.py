"""A route's dead letters: what failed of a batch, written to the dead-letter endpoint,
held until written.

- The dead letter is the last resort: while it is down, the batch is held (with its
  window slots) and tried again, so intake stops -- back-pressure instead of dropping,
  and instead of nacking into a redelivery storm. Only a stopping route gives the
  messages back to the source. Holding is the `deadletter-held` stall: at once when the
  dead letter refused a letter for good, after `stall_after` when it is unreachable.
- A letter refused for its size (the dead letter's known limit, or `Outcome.too_large`)
  is written again at once without its body (`withheld_body`: size and SHA-256
  instead): it would be refused for ever.
- Without a dead letter (`deadletter: log`) what failed is logged and counted, and the
  source is told it was not taken (nacked for good).
- What a dead letter and its log line say of a sender's message goes through the
  route's redactor first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from gateway.deadletter import reasons
from gateway.deadletter.format import deadletter_record, withheld_body
from gateway.envelope.outgoing import with_defaults
from gateway.matching.matcher import Explanation
from gateway.ports import Outcome, size_limit
from gateway.record import NativeMessage
from gateway.redaction.redactor import Redactor
from gateway.runtime.ledger import FailedPart, Letter, Message, failed_parts, sort_letters
from gateway.runtime.output import Output
from gateway.runtime.sender import Sender
from gateway.runtime.stalls import DEADLETTER_HELD, Stalls
from gateway.runtime.stats import RouteStats
from gateway.runtime.window import Window


class DeadLetters:
    def __init__(self, deadletter: Output | None, source_endpoint: str, redactor: Redactor,
                 sender: Sender, window: Window, stats: RouteStats, stalls: Stalls) -> None:
        self.output = deadletter
        self.source_endpoint = source_endpoint
        self.redactor = redactor
        self._sender = sender
        self._window = window
        self._stats = stats
        self._stalls = stalls

    async def write(self, messages: list[Message], dropped: dict[Message, str]) -> set[Message]:
        """Dead-letter what failed of a batch's messages, in one submit; the messages
        whose dead letter failed (a stopping route nacks them for redelivery). Without a
        dead letter, `dropped` gets each message of which something was dropped, with the
        reason code only: the detail may quote the message, and an HTTP sender gets it as
        its answer (the log line has it)."""
        letters: list[Letter] = []
        deadletter = self.output
        for message in messages:
            members = message.members
            if message.whole is None and len(members) == 1 and members[0].reason is None:
                continue  # nearly every message (`failed_parts` gives none): no call for it
            for part in failed_parts(message):
                letter = self._letter(message, part)
                if deadletter is None:
                    self._stats.dropped("message", letter.reason, letter.detail,
                                        self.source_endpoint, letter.definition)
                    dropped.setdefault(message, letter.reason)
                else:
                    letters.append(letter)
        if not letters or deadletter is None:
            return set()
        limit = size_limit(deadletter.producer)
        for letter in letters:
            if limit is not None and letter.original.body_length() > limit:
                # The dead letter's limit is known: the body cannot go there.
                letter.record = self._without_body(deadletter, letter, limit)
            else:
                letter.record = with_defaults(deadletter_record(
                    letter.original, protocol=deadletter.protocol, reason=letter.reason,
                    detail=letter.detail, explain=letter.explain,
                    source_endpoint=self.source_endpoint), deadletter.defaults)
        return await self._hold(deadletter, letters)

    def _letter(self, message: Message, part: FailedPart) -> Letter:
        """The letter of one failed part, its detail and explanation redacted."""
        original, member, detail, explain = part
        secrets = self.redactor.secrets(original)
        letter = Letter(message, original, member.reason or reasons.UNMATCHED,
                        self.redactor.text(detail, secrets), member.definition)
        letter.explain = self.redactor.explanations(explain, secrets)
        return letter

    def _without_body(self, deadletter: Output, letter: Letter, limit: int | None,
                      refusal: str | None = None) -> NativeMessage:
        """`letter` as a dead letter without its body (size and digest instead)."""
        why = (f"the dead letter's limit is {limit} bytes" if refusal is None
               else f"the dead letter refused it: {refusal}")
        letter.withheld = True
        return with_defaults(withheld_body(
            letter.original, protocol=deadletter.protocol, reason=letter.reason,
            detail=f"{letter.detail}; body left out ({why})",
            source_endpoint=self.source_endpoint), deadletter.defaults)

    async def _hold(self, deadletter: Output, letters: list[Letter]) -> set[Message]:
        """Write `letters` until they are written (see the module docstring)."""
        endpoint = deadletter.endpoint_id
        while True:
            why, last = await self._attempt(deadletter, letters)
            round_ = sort_letters(letters, why, last)
            for letter in round_.written:
                self._stats.deadlettered(letter.reason)
            if not round_.remaining:
                self._stalls.cleared(DEADLETTER_HELD, endpoint)
                return set()
            letters = round_.remaining
            for letter, refusal in round_.too_large:
                letter.record = self._without_body(deadletter, letter, None, refusal)
            if round_.too_large:
                continue  # rebuilt without their bodies: try at once
            first = round_.permanent or next(f for f in why if f is not None)
            error = f"{endpoint}: {first}"
            if self._window.stopping:
                self._stats.deadletter_gave_back(len(letters), endpoint, letters[0].reason,
                                                 letters[0].definition, error)
                return {letter.message for letter in letters}
            # Logged by the stall watch: once when it begins, then at most once a minute.
            self._stalls.failing(DEADLETTER_HELD, endpoint, error,
                                 at_once=round_.permanent is not None)
            await asyncio.sleep(self._sender.retry.max_backoff)

    async def _attempt(self, deadletter: Output, letters: list[Letter]
                       ) -> tuple[list[str | None], list[Outcome | None]]:
        """One write of `letters`, with the retry policy's retries: per letter None once
        written, else why not, and the refusal."""
        sender = self._sender
        records = [letter.record for letter in letters]
        results = await sender.send(deadletter, records)
        failed = sender.account(deadletter, records, results)
        why: list[str | None] = [None] * len(records)
        last: list[Outcome | None] = [None] * len(records)
        if failed:
            retried = [results[i] for i in failed]  # retry_failed leaves the last ones here
            given_up = await sender.retry_failed(deadletter, [records[i] for i in failed],
                                                 retried)
            for index, reason, outcome in zip(failed, given_up, retried, strict=True):
                why[index] = reason
                last[index] = outcome
        sender.follow(deadletter)
        return why, last

    async def stray(self, endpoint: str, answer: NativeMessage,
                    reason: str = reasons.UNCORRELATED_REPLY, detail: str | None = None,
                    explain: Sequence[Explanation] = ()) -> None:
        """Dead-letter an answer on `endpoint`'s reply address that no request takes: it
        carries no correlation (`uncorrelated-reply`, the default), or it conforms to no
        reply definition (`nonconforming-reply`, with `detail` and `explain`)."""
        if detail is None:
            detail = (f"an answer on {endpoint}'s reply address carries no correlation "
                      "(correlation data, reply subject token or correlationid attribute)")
        else:  # the matcher's words may quote the answer: hidden as a sender's would be
            secrets = self.redactor.secrets(answer)
            detail = self.redactor.text(detail, secrets)
            explain = self.redactor.explanations(explain, secrets)
        deadletter = self.output
        if deadletter is None:
            self._stats.dropped("answer", reason, detail, endpoint)
            return
        record = with_defaults(deadletter_record(
            answer, protocol=deadletter.protocol, reason=reason, detail=detail,
            explain=explain, source_endpoint=endpoint), deadletter.defaults)
        results = await self._sender.send(deadletter, [record])
        self._sender.account(deadletter, [record], results)
        if results[0].delivered:
            self._stats.deadlettered(reason)
        else:
            self._stats.stray_lost(endpoint, reason)


__all__ = ["DeadLetters"]
