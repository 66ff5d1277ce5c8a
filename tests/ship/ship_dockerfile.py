"""A small Dockerfile reader for the ship tests: instructions per stage, with line
continuations joined, comments dropped and `${ARG}` defaults substituted."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Instruction:
    keyword: str
    value: str
    line: int

    def exec_form(self) -> list[str] | None:
        """The JSON array of an exec-form ENTRYPOINT/CMD/HEALTHCHECK CMD, else None."""
        text = self.value.strip()
        if text.startswith("CMD "):
            text = text[4:].strip()
        if text.startswith("["):
            parsed: list[str] = json.loads(text)
            return parsed
        return None


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction | None:
        found = self.all(keyword)
        return found[-1] if found else None


def instructions(path: Path) -> list[Instruction]:
    out: list[Instruction] = []
    pending = ""
    start = 0
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if pending and line.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text = pending + line
        pending = ""
        keyword, _, value = text.strip().partition(" ")
        out.append(Instruction(keyword.upper(), value.strip(), start))
    return out


def global_args(items: list[Instruction]) -> dict[str, str]:
    args: dict[str, str] = {}
    for item in items:
        if item.keyword == "FROM":
            break
        if item.keyword == "ARG":
            name, _, default = item.value.partition("=")
            args[name.strip()] = default.strip()
    return args


def substitute(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2),
                                                            m.group(0)), text)


def stages(path: Path) -> list[Stage]:
    items = instructions(path)
    args = global_args(items)
    out: list[Stage] = []
    for item in items:
        if item.keyword == "FROM":
            words = shlex.split(item.value)
            base = substitute(words[0], args)
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(out))
            out.append(Stage(name, base))
        elif out:
            out[-1].instructions.append(item)
    return out


def stage_args(stage: Stage) -> dict[str, str]:
    args: dict[str, str] = {}
    for item in stage.all("ARG"):
        name, _, default = item.value.partition("=")
        args[name.strip()] = default.strip()
    return args
