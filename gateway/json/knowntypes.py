"""What is known of the content types received so far: a fact per type, worked out once.

A sender's content types repeat (one per topic or client, as a rule), and every received
record with one is asked whether it is JSON (`record.from_wire`) and whether it is a
CloudEvent (`cloudevents.mediatype`): split, stripped and lower-cased per record, that was
about a third of a microsecond of each Kafka record's making. The renderers ask whether it
is a media type at all (`envelope/render.py`, `media_type_seen`), in a table of their
own. The tables are bounded in number and in length, as the keys are a sender's text:
past the bound a type is worked out each time, as before.
"""

from __future__ import annotations

__all__ = ["KnownTypes"]


class KnownTypes(dict[str, bool]):
    """One fact (a bool) per content type seen, up to `max_types` types of at most
    `max_length` characters (by default `MAX_TYPES` and `MAX_LENGTH`)."""

    MAX_TYPES = 1024
    MAX_LENGTH = 200

    def __init__(self, max_types: int = MAX_TYPES, max_length: int = MAX_LENGTH) -> None:
        super().__init__()
        self.max_types = max_types
        self.max_length = max_length

    def keep(self, content_type: str, fact: bool) -> None:
        if len(self) < self.max_types and len(content_type) <= self.max_length:
            self[content_type] = fact
