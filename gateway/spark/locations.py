"""`kafka://HOST:PORT/TOPIC` and `file:DIR` locations of sources and sinks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Location:
    kind: Literal["kafka", "file"]
    path: str = ""  # file: the directory
    servers: str = ""  # kafka: bootstrap servers
    topic: str = ""

    def __str__(self) -> str:
        return f"file:{self.path}" if self.kind == "file" else (
            f"kafka://{self.servers}/{self.topic}")


def parse_location(text: str) -> Location:
    if text.startswith("file:"):
        path = text[len("file:"):]
        if path.startswith("//"):
            path = urlsplit(text).path
        if not path:
            raise ValueError(f"{text!r}: give a directory, e.g. file:/data/archive")
        return Location("file", path=path)
    if text.startswith("kafka://"):
        parts = urlsplit(text)
        topic = parts.path.strip("/")
        if not parts.netloc or not topic or "/" in topic:
            raise ValueError(f"{text!r}: expected kafka://HOST:PORT/TOPIC")
        return Location("kafka", servers=parts.netloc, topic=topic)
    raise ValueError(f"{text!r}: a location is kafka://HOST:PORT/TOPIC or file:DIR")
