"""Reading the config YAML: the data, the position of every JSON path, and syntax problems.

Problems name JSON paths, but an operator edits lines; keeping each node's line and column
lets the loader say both. A mapping member is placed at its key (an unknown or misspelt
key is what is wrong; a nested block starts only on the next line), a list item at the
item. Duplicate keys are reported because PyYAML silently keeps the last one, which hides
a half-edited config. Syntax errors carry line and column but not PyYAML's snippet of the
line, which could show a secret written in the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from gateway.spec.problems import Position, Problem, json_path, with_positions
from gateway.spec.yamlpositions import Parts, TooManyNodes, node_positions

# Aliases let a few lines expand into billions of values ("billion laughs"); everything
# downstream walks the expanded tree, so the expansion is bounded here, once.
MAX_NODES = 100_000


@dataclass
class YamlDocument:
    data: object = None
    positions: dict[str, Position] = field(default_factory=dict)  # JSON path -> place
    problems: list[Problem] = field(default_factory=list)


def read_yaml(text: str, file: str) -> YamlDocument:
    doc = YamlDocument()
    try:
        loader = yaml.SafeLoader(text)
    except yaml.YAMLError as exc:  # e.g. control characters, found before any parsing
        doc.problems.append(Problem("error", file, "$", f"YAML error: {_first_line(exc)}",
                                    "save the config as plain UTF-8 YAML text"))
        return doc
    try:
        node = loader.get_single_node()
        if node is not None:
            def repeated(parts: Parts, key: str, at: yaml.Mark) -> None:
                # Placed at the repeat: the first one is where the path's position is.
                doc.problems.append(Problem(
                    "error", file, json_path(*parts, key), f"key '{key}' appears twice",
                    "keep one of them: YAML would silently use the last",
                    line=at.line + 1, column=at.column + 1))

            doc.positions = node_positions(node, MAX_NODES, repeated)
            doc.data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "invalid YAML"
        start = exc.context_mark if exc.problem_mark else None
        if exc.context and start is not None:
            # PyYAML notices a missing `]` or `}` only on a later line; say where it opened.
            what += f" ({exc.context} at line {start.line + 1}, column {start.column + 1})"
        doc.problems.append(Problem(
            "error", file, "$", f"YAML syntax error: {what}",
            "fix the YAML syntax there (indentation, quotes, colons)",
            line=mark.line + 1 if mark else None, column=mark.column + 1 if mark else None))
        doc.data = None
    except yaml.YAMLError as exc:
        doc.problems.append(Problem("error", file, "$", f"YAML error: {_first_line(exc)}",
                                    "save the config as plain UTF-8 YAML text"))
        doc.data = None
    except (ValueError, OverflowError) as exc:
        # PyYAML builds a date from anything shaped like one (`0000-0-0T0:00:00`) and
        # raises plain ValueError on an impossible one.
        doc.problems.append(Problem("error", file, "$", f"YAML value error: {exc}",
                                    "quote the value if it is not meant as a date"))
        doc.data = None
    except (TooManyNodes, RecursionError):
        doc.problems.append(Problem(
            "error", file, "$", f"the config expands to more than {MAX_NODES} values",
            "write the config out plainly; nest less deeply and use fewer YAML aliases"))
        doc.data = None
    finally:
        loader.dispose()
    return doc


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def locate(problems: list[Problem], doc: YamlDocument, file: str) -> list[Problem]:
    """The problems of `file` with the line and column of their path or nearest parent."""
    return with_positions(problems, file, doc.positions)
