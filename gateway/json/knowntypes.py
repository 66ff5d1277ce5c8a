"""What is known of the content types received so far: a fact per type, worked out once.

A sender's content types repeat (one per topic or client, as a rule), and every received
record with one is asked whether it is JSON (`record.from_wire`) and whether it is a
CloudEvent (`cloudevents.mediatype`): split, stripped and lower-cased per record, that was
about a third of a microsecond of each Kafka record's making. The renderers ask whether it
is a media type at all (`envelope/render.py`, `media_type_seen`), in a table of their
own, and the Kafka consumer keeps the text of each content-type header value (bytes on
the wire). The tables are bounded in number and in length, as the keys are a sender's text:
past the bound a type is worked out each time, as before.
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["MAX_LENGTH", "MAX_TYPES", "keep"]

MAX_TYPES = 1024
MAX_LENGTH = 200


Key = TypeVar("Key", str, bytes)
Fact = TypeVar("Fact")


def keep(table: dict[Key, Fact], key: Key, fact: Fact, max_types: int = MAX_TYPES,
         max_length: int = MAX_LENGTH) -> None:
    """Remember `fact` of `key` (a content type, or its bytes) in `table`, unless the
    table holds `max_types` already or the key is longer than `max_length`. The tables are plain
    dicts, read with `.get` where they are asked: CPython specialises that call for a dict
    and not for a subclass of one."""
    if len(table) < max_types and len(key) <= max_length:
        table[key] = fact
