"""Match and render what the route read: deliveries in, a `Batch` out (`runtime/ledger.py`).

- One tight loop per batch: no task, future or await per message; metrics and report
  entries are counted per batch (`runtime/stats.py`).
- A batch is converted in slices of `CONVERT_SLICE`, with a turn of the event loop
  between them: a slow batch (a large catalog, a costly definition) must not starve the
  clients' own tasks -- Kafka heartbeats, NATS pings, MQTT keepalives -- or the broker
  drops the consumer while the gateway is merely busy.
- An event goes to every output or to none: one an output cannot render is
  dead-lettered as `undeliverable`, one over an output's size limit (`SizeLimited`) as
  `too-large`, before anything is sent.
- A message that did not convert (unmatched, ambiguous, invalid, undecodable by the
  adapter) is dead-lettered whole, as it came.
- Partition keys: a record for an output that partitions by key (Kafka) gets one as
  `routes[].partitionkey` says (`runtime/keys.py`), so order survives to its consumer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

from gateway.cloudevents.event import CloudEvent
from gateway.convert import Conversion, Converter
from gateway.deadletter import reasons
from gateway.envelope.outgoing import Mode, OutputFormat, RenderFailed
from gateway.matching.matcher import MatchResult
from gateway.ports import Delivery, size_limit
from gateway.protocols import find_profile
from gateway.protocols.profile import FieldRef
from gateway.record import NativeMessage
from gateway.runtime.keys import PartitionKeys
from gateway.runtime.ledger import Batch, Member, Message, Sent, WrittenMember
from gateway.runtime.output import Output
from gateway.runtime.stats import RouteStats
from gateway.runtime.wirepath import WirePath

#: Messages converted between two turns of the event loop.
CONVERT_SLICE = 250


class BatchMaker:
    def __init__(self, converter: Converter, outputs: Sequence[Output], mode: Mode,
                 keys: PartitionKeys, stats: RouteStats) -> None:
        self.converter = converter
        self.outputs = list(outputs)
        self.keys = keys
        self._stats = stats
        # Per output, in order: how it renders, and where it keeps its partitioning key
        # (Kafka), if it has one to fill.
        self._render_plan: list[tuple[OutputFormat, FieldRef | None]] = [
            (OutputFormat(o.protocol, mode, o.deliver, o.defaults, o.definitions),
             _key_place(o.protocol) if keys.enabled else None)
            for o in self.outputs]
        self._keyed = any(place is not None for _, place in self._render_plan)
        # The fused path, where every output can take it (`runtime/wirepath.py`).
        self._wire = WirePath.for_route(converter, self._render_plan, keys)

    @property
    def reads_no_bodies(self) -> bool:
        """The fast path may never read a received body's value (every output takes it
        as its bytes): the source may leave bodies unparsed (`ports.defer_bodies`)."""
        return self._wire is not None and self._wire.sends_bodies_unparsed

    async def make(self, deliveries: list[Delivery], started: float) -> Batch:
        """`convert` in slices, giving the event loop a turn between them."""
        batch = self.convert(deliveries[:CONVERT_SLICE], started)
        for start in range(CONVERT_SLICE, len(deliveries), CONVERT_SLICE):
            await asyncio.sleep(0)
            batch.extend(self.convert(deliveries[start:start + CONVERT_SLICE], started))
        return batch

    def convert(self, deliveries: list[Delivery], started: float) -> Batch:
        """Match and render `deliveries` in one loop."""
        sent = [Sent(output) for output in self.outputs]
        # The outputs' size limits, read once per batch (a limit may change with a
        # reconnect: NATS max_payload comes with the server's INFO).
        limits = [size_limit(output.producer) for output in self.outputs]
        checked = limits if any(limit is not None for limit in limits) else None
        tally = _Tally()
        # One receive time for the batch's messages that carry none: received together.
        now = datetime.now(UTC)
        self._stats.report_received(len(deliveries))
        messages = (self._convert(deliveries, sent, checked, tally, now) if self._wire is None
                    else self._write(self._wire, deliveries, sent, checked, tally, now))
        self._stats.report_converted(tally.matched, tally.rendered, now)
        self._stats.intake(tally.received, tally.matched, tally.unmatched)
        return Batch(messages, sent, started)

    def _convert(self, deliveries: list[Delivery], sent: list[Sent],
                 checked: list[int | None] | None, tally: _Tally,
                 now: datetime) -> list[Message]:
        """The general path: each message converted to events, rendered per output."""
        messages: list[Message] = []
        # A message the adapter could not decode is not converted: it has its own.
        converted = iter(self.converter.convert_batch(
            [d.message for d in deliveries if d.undecodable is None], now=now))
        for delivery in deliveries:
            tally.count(delivery.message)
            message = Message(delivery)
            messages.append(message)
            conversions = (next(converted) if delivery.undecodable is None
                           else _undecodable(delivery))
            self._place_conversions(message, conversions, sent, checked, tally, now)
        return messages

    def _write(self, wire: WirePath, deliveries: list[Delivery], sent: list[Sent],
               checked: list[int | None] | None, tally: _Tally,
               now: datetime) -> list[Message]:
        """The fused path (`runtime/wirepath.py`): each record written straight into the
        outputs' records where it can be, else converted as on the general path with the
        match made. Its loop is the route's hottest: per message, one call to the path
        and the ledger's objects, the counts kept in locals."""
        messages: list[Message] = []
        converter = self.converter
        write = wire.write
        # One output (the usual route): its records and owners appended here, its size
        # limit (if it has one) checked here; `_place` for several.
        single = sent[0] if len(sent) == 1 else None
        limit = checked[0] if checked is not None else None
        written_counts: dict[str, int] = {}  # per definition: members written
        received = tally.received
        for delivery in deliveries:
            record = delivery.message
            # `tally.count(record)`, inline: a call per message saved.
            counts = received.get(record.protocol) or tally.counts(record.protocol)
            counts[0] += 1
            counts[1] += record.body_length()
            if delivery.undecodable is not None:
                conversions = _undecodable(delivery)
            elif (written := write(record, now)) is None:
                conversions = converter.convert_all(record, now=now)
            elif isinstance(written, MatchResult):
                conversions = [converter.convert_matched(record, written, now)]
            else:
                match, records, made_id = written
                xid = match.definition.xid  # type: ignore[union-attr]  # written: matched
                member = WrittenMember(record, match, converter, now, delivery, xid, made_id)
                messages.append(Message(delivery, (member,)))
                if single is not None and (limit is None or records[0].body_length() <= limit):
                    single.records.append(records[0])
                    single.owners.append(member)
                else:  # several outputs, or over the one's limit (`_place` says so)
                    self._place(member, records, sent, checked)
                    if member.reason is not None:
                        self._tally(member, tally, now)
                        continue
                written_counts[xid] = written_counts.get(xid, 0) + 1
                continue
            message = Message(delivery)
            messages.append(message)
            self._place_conversions(message, conversions, sent, checked, tally, now, wire)
        tally.add_rendered(written_counts)
        return messages

    def _place_conversions(self, message: Message, conversions: list[Conversion],
                           sent: list[Sent], checked: list[int | None] | None,
                           tally: _Tally, now: datetime, wire: WirePath | None = None) -> None:
        """Render and place the events of `message` (its `conversions`); `wire`: the
        fused path, which learns from what rendered."""
        delivery = message.delivery
        record = delivery.message
        if len(conversions) == 1 and conversions[0].event is None:
            whole = Member(record, conversions[0], delivery)
            whole.reason = self._not_converted(record, conversions[0], now)
            tally.unmatched += whole.reason == reasons.UNMATCHED
            message.whole = whole
            return
        members: list[Member] = []
        message.members = members
        for conversion in conversions:
            member = Member(record, conversion, delivery)
            members.append(member)
            event = conversion.event
            if event is None:
                member.reason = self._not_converted(record, conversion, now, member)
                tally.unmatched += member.reason == reasons.UNMATCHED
                continue
            definition = conversion.match.definition
            assert definition is not None
            member.definition = definition.xid
            self._render(member, event, conversion, sent, checked)
            if (self._tally(member, tally, now) and wire is not None
                    and conversion.source_event is None):
                wire.learn(definition, record, event)

    def _tally(self, member: Member, tally: _Tally, now: datetime) -> bool:
        """Count `member` of a matched definition, placed or failed: matched, and
        rendered for every output unless it failed (then reported as such)."""
        xid = member.definition
        assert xid is not None
        matched = tally.matched
        matched[xid] = matched.get(xid, 0) + 1
        if member.reason is not None:
            self._stats.report_unrendered(member, xid, now)
            return False
        rendered = tally.rendered
        rendered[xid] = rendered.get(xid, 0) + 1
        return True

    def _not_converted(self, record: NativeMessage, conversion: Conversion,
                       now: datetime, member: Member | None = None) -> str:
        """The reason a conversion gave no event, counted where it is counted (the
        invalid-data metric, the conformance report). The report's sample of a batch
        `member` is that member, as its dead letter is, not the whole batch."""
        reason = conversion.reason or reasons.UNMATCHED
        if reason == reasons.INVALID_DATA:
            self._stats.invalid_data(conversion)
        if self._stats.report is not None:
            sampled = record if member is None else member.original()
            self._stats.report_unconverted(sampled, conversion, reason, now)
        return reason

    def _render(self, member: Member, event: CloudEvent, conversion: Conversion,
                sent: list[Sent], limits: list[int | None] | None) -> None:
        """Render `member` for every output; if one cannot take it, it goes to none of
        them (`limits`: the outputs' size limits, None when no output has one)."""
        context = conversion.match.context
        key = self.keys.key(member.source, context) if self._keyed else None
        rendered: list[NativeMessage] = []
        for output_format, place in self._render_plan:
            try:
                rendered.append(output_format.render(
                    event, context,
                    None if place is None or key is None else (place.field, key)))
            except RenderFailed as exc:
                member.reason = reasons.UNDELIVERABLE
                member.fail(f"{sent[len(rendered)].output.endpoint_id}: {exc}")
                return
        self._place(member, rendered, sent, limits)

    @staticmethod
    def _place(member: Member, rendered: list[NativeMessage], sent: list[Sent],
               limits: list[int | None] | None) -> None:
        """Give each output its record of `member`, unless one is over its output's size
        limit (`limits`: None when no output has one): then none of them."""
        if limits is not None:
            for target, record, limit in zip(sent, rendered, limits, strict=True):
                if limit is not None and (size := record.body_length()) > limit:
                    member.reason = reasons.TOO_LARGE
                    member.fail(
                        f"{target.output.endpoint_id}: body of {size} bytes is over the "
                        f"output's limit of {limit} bytes")
                    return
        for target, record in zip(sent, rendered, strict=True):
            target.records.append(record)
            target.owners.append(member)


def _undecodable(delivery: Delivery) -> list[Conversion]:
    """The conversion of a message the adapter could not decode (dead-lettered whole,
    with the adapter's words for why)."""
    return [Conversion(delivery.message, MatchResult("unmatched"), None,
                       reasons.UNDECODABLE, delivery.undecodable or "")]


class _Tally:
    """What a batch counts for the metrics and the conformance report: messages and
    bytes received per protocol, members matched and rendered per definition, messages
    that matched none."""

    __slots__ = ("matched", "received", "rendered", "unmatched")

    def __init__(self) -> None:
        self.received: dict[str, list[int]] = {}  # protocol -> [messages, bytes]
        self.matched: dict[str, int] = {}
        self.rendered: dict[str, int] = {}  # of the matched: rendered for every output
        self.unmatched = 0

    def count(self, record: NativeMessage) -> None:
        """One message received."""
        counts = self.received.get(record.protocol) or self.counts(record.protocol)
        counts[0] += 1
        counts[1] += record.body_length()

    def counts(self, protocol: str) -> list[int]:
        """The [messages, bytes] received of `protocol`, made at the first."""
        counts = self.received.get(protocol)
        if counts is None:
            counts = self.received[protocol] = [0, 0]
        return counts

    def add_rendered(self, written: dict[str, int]) -> None:
        """Members matched and rendered for every output, per definition, at once."""
        for xid, count in written.items():
            self.matched[xid] = self.matched.get(xid, 0) + count
            self.rendered[xid] = self.rendered.get(xid, 0) + count


def _key_place(protocol: str) -> FieldRef | None:
    prof = find_profile(protocol)
    return prof.partition_key if prof is not None else None


__all__ = ["CONVERT_SLICE", "BatchMaker"]
