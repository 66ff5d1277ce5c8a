"""Sending a route's records to an output, and sending them again.

- The route is the one owner of retries: a producer makes one attempt and may say how
  long the receiver wants it to wait (`Outcome.retry_after`), which the next attempt
  honours within the policy's longest backoff. Failed records of one submit are retried
  together; only transient failures are retried (`gateway/policies/retry.py`
  says for how long).
- Order: while records of an output failed retryably and were not sent again, new
  submits to it are held back (`HELD`) and the settler resends in order
  (`runtime/resend.py`).
- A producer that raises (it should report Outcomes instead), or a confirmation that
  does, fails the whole submission, retryably: nothing is lost to an exception.
- A reply route's outputs get `Requester.request` instead of `submit`; the dead letter
  never does.
- An output that keeps failing is the `output-unavailable` stall; the dead letter
  failing is `deadletter-held` (`runtime/stalls.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial

from gateway.policies.retry import RetryPolicy
from gateway.ports import Confirmation, Outcome, Requester, confirmed
from gateway.record import NativeMessage
from gateway.runtime.ledger import Member, after_attempt, still_awaited
from gateway.runtime.output import Output
from gateway.runtime.resend import HELD, ResendFirst
from gateway.runtime.stalls import DEADLETTER_HELD, OUTPUT_UNAVAILABLE, Cause, Stalls
from gateway.runtime.stats import RouteStats


class Sender:
    def __init__(self, outputs: Sequence[Output], deadletter: Output | None,
                 retry: RetryPolicy, reply_timeout: float | None, stats: RouteStats,
                 stalls: Stalls) -> None:
        self.deadletter = deadletter
        self.retry = retry
        # Request-reply: how long each request waits for its answer; None: not a reply route.
        self.reply_timeout = reply_timeout
        self._stats = stats
        self._stalls = stalls
        # Per output (not the dead letter, which only the settler writes, in order).
        self._resend_first = {id(o): ResendFirst() for o in outputs}

    async def submit(self, output: Output, records: list[NativeMessage]) -> Confirmation:
        """Submit (a reply route's outputs: request), unless held back for resends."""
        order = self._resend_first.get(id(output))
        if order is None:
            return await self._submit_now(output, records)
        if not order.admit(records):
            return confirmed([HELD] * len(records))
        confirmation = await self._submit_now(output, records)
        # Failures are owed when they happen, not when the settler gets to the batch (by
        # then the pump may have sent newer records past them): a callback on a future,
        # else a task of its own.
        if isinstance(confirmation, asyncio.Future):
            confirmation.add_done_callback(partial(_owe_failed, order, records))
            return confirmation
        return asyncio.ensure_future(_owed_if_failed(order, records, confirmation))

    async def _submit_now(self, output: Output, records: list[NativeMessage]) -> Confirmation:
        try:
            producer = output.producer
            if (self.reply_timeout is not None and output is not self.deadletter
                    and isinstance(producer, Requester)):
                return await producer.request(records, self.reply_timeout)
            return await producer.submit(records)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._stats.submit_raised(output.endpoint_id, len(records))
            return _refused(len(records), f"{type(exc).__name__}: {exc}")

    async def send(self, output: Output, records: list[NativeMessage]) -> list[Outcome]:
        """Submit and wait for the outcomes."""
        return await outcomes(await self.submit(output, records), len(records))

    def account(self, output: Output, records: Sequence[NativeMessage],
                results: Sequence[Outcome]) -> list[int]:
        """Count what was delivered; the indexes of the failed records."""
        return self._stats.account(output, records, results, output is self.deadletter)

    def follow(self, output: Output) -> None:
        """Keep `xrgw_endpoint_connected` in step with the producer (which reconnects on
        its own inside submit())."""
        self._stats.follow(output.endpoint_id, output.producer.connected)

    async def retry_failed(self, output: Output, records: list[NativeMessage],
                           results: list[Outcome], owners: Sequence[Member] = ()
                           ) -> list[str | None]:
        """Send failed records again, together, within the retry policy; for each record
        None once delivered, else why it was given up. `results` ends with each record's
        last outcome. A record whose sender stopped waiting (`owners`: an HTTP request
        answered 504) is not sent again (`ABANDONED`): the sender was told to, and a
        late copy would be a duplicate of its retry."""
        why: list[str | None] = [o.reason or "failed" for o in results]
        todo = [i for i, o in enumerate(results) if o.retryable]
        cause: Cause = DEADLETTER_HELD if output is self.deadletter else OUTPUT_UNAVAILABLE
        attempt = 1
        while todo and self.retry.allows(attempt):
            if owners:
                todo = self._still_awaited(todo, owners, why)
                if not todo:
                    break
            self._stalls.failing(cause, output.endpoint_id, why[todo[0]] or "failed")
            asked = max((w for i in todo if (w := results[i].retry_after) is not None),
                        default=None)
            await asyncio.sleep(self.retry.delay(attempt - 1, at_least=asked))
            batch = [records[i] for i in todo]
            # No explicit connect() here: producers reconnect inside submit() behind a
            # backoff gate and fail fast meanwhile, so a dead sink costs one quick failure
            # per attempt instead of a connect timeout per message.
            again = await self.send(output, batch)
            failed = set(self.account(output, batch, again))
            todo = after_attempt(todo, again, failed, results, why)
            attempt += 1
            self.follow(output)
        if cause is OUTPUT_UNAVAILABLE:  # the dead letter's hold clears its own
            self._stalls.cleared(cause, output.endpoint_id)
        return why

    def _still_awaited(self, todo: list[int], owners: Sequence[Member],
                       why: list[str | None]) -> list[int]:
        keep = still_awaited(todo, owners, why)
        if len(keep) < len(todo):
            self._stats.not_sent_again(len(todo) - len(keep))
        return keep


async def outcomes(confirmation: Confirmation, count: int) -> list[Outcome]:
    """The outcomes of a confirmation; a confirmation that raises (it should not) fails
    all of its records, retryably."""
    try:
        results = await confirmation
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return [Outcome.failed(f"{type(exc).__name__}: {exc}")] * count
    if len(results) != count:
        return [Outcome.failed(f"producer reported {len(results)} outcomes for "
                               f"{count} messages")] * count
    return results


async def _owed_if_failed(order: ResendFirst, records: list[NativeMessage],
                          confirmation: Confirmation) -> list[Outcome]:
    results = await outcomes(confirmation, len(records))
    order.settled(records, results)
    return results


def _owe_failed(order: ResendFirst, records: list[NativeMessage],
                done: asyncio.Future[list[Outcome]]) -> None:
    """`_owed_if_failed` as a done callback: the outcomes `outcomes` will make of it."""
    results = None if done.cancelled() or done.exception() is not None else done.result()
    if results is None or len(results) != len(records):
        results = [Outcome.failed("no outcomes")] * len(records)
    order.settled(records, results)


async def _refused(count: int, reason: str) -> list[Outcome]:
    return [Outcome.failed(reason)] * count


__all__ = ["Sender", "outcomes"]
