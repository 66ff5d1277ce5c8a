"""Survival per package of the last `make mutate` run (mutmut's results in mutants/).

    python -m scripts.mutation_summary            # the table
    python -m scripts.mutation_summary --survivors  # and the names of the survivors

A mutant is *killed* when a test failed (or timed out) with it, *survived* when the fast
suite passed with it; *no tests* means no test of the fast suite runs its function at all
(counted as surviving: nothing would notice the change); *not checked* ones were not run
yet (an interrupted run). Survival = (survived + no tests) / checked.

*Equivalent* mutants are the survivors docs/testing.md lists with a reason, in rows
"| `module.function` | 3, 5-7 | reason |" (`module.Class.method` for a method); the
last column is the share of the checked non-equivalent mutants that survive. A listed
mutant that a test kills is reported as a stale entry.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

#: The packages `make mutate` covers (pyproject.toml [tool.mutmut] only_mutate).
PACKAGES = ("gateway.matching", "gateway.templates.template", "gateway.templates.match",
            "gateway.protocols.accessors",
            "gateway.envelope.partitioning", "gateway.envelope", "gateway.runtime",
            "gateway.json.body", "gateway.cloudevents.bindings.headers",
            "gateway.ports.inbox", "gateway.ports.pending",
            "adapters.kafka.commits", "adapters.nats.acks")
#: Files of which only some functions are counted: the push consumers' settlement code
#: (the rest of them talks to a broker and is left to the integration tests). Label ->
#: mutmut's mangled function names (`module.xǁClassǁmethod`).
SETTLEMENT: dict[str, tuple[str, ...]] = {
    "adapters.mqtt.consumer settlement": (
        "adapters.mqtt.consumer.x\u01c1MqttConsumer\u01c1_settle",
    ),
    "adapters.nats.consumer settlement": tuple(
        f"adapters.nats.consumer.x\u01c1NatsConsumer\u01c1{name}"
        for name in ("_settler", "_ack_all_settler", "_send_ack", "_ack", "_nak")),
    "adapters.amqp.consumer settlement": (
        "adapters.amqp.consumer.x\u01c1_ReceiverHandler\u01c1settle_burst",
        "adapters.amqp.consumer.x\u01c1_ReceiverHandler\u01c1_return_credit",
        "adapters.amqp.consumer.x\u01c1_Settler\u01c1__init__",
        "adapters.amqp.consumer.x\u01c1_Settler\u01c1settle",
        "adapters.amqp.consumer.x\u01c1_Settler\u01c1flush",
    ),
    "adapters.http.consumer settlement": (
        "adapters.http.consumer.x\u01c1_Pending\u01c1settle",
        "adapters.http.consumer.x\u01c1_Pending\u01c1waiting",
    ),
}
_EQUIVALENT_ROW = re.compile(r"^\| `([\w.]+)` \| ([\d ,\-]+) \|")
KILLED = {1, 3, 24, -24, 36, 37, 152, 255}  # a failing test, a timeout, the type checker
SURVIVED = {0}
NO_TESTS = {5, 33}


def package_of(mutant: str) -> str:
    function = mutant.partition("__mutmut_")[0]
    for label, functions in SETTLEMENT.items():
        if function in functions:
            return label
    return next((p for p in PACKAGES if mutant.startswith(p + ".")), "other")


def _numbers(text: str) -> list[int]:
    found: list[int] = []
    for part in text.replace(" ", "").split(","):
        first, _, last = part.partition("-")
        found += range(int(first), int(last or first) + 1)
    return found


def equivalents(docs: Path, modules: set[str]) -> set[str]:
    """The mutant names docs/testing.md lists as equivalent (see the module's docstring)."""
    names: set[str] = set()
    if not docs.exists():
        return names
    for line in docs.read_text().splitlines():
        row = _EQUIVALENT_ROW.match(line)
        if row is None:
            continue
        dotted = row.group(1)
        module = max((m for m in modules if dotted.startswith(m + ".")), key=len, default=None)
        if module is None:
            continue
        function = dotted[len(module) + 1:]
        cls, _, name = function.rpartition(".")
        mangled = f"x\u01c1{cls}\u01c1{name}" if cls else f"x_{name}"
        names |= {f"{module}.{mangled}__mutmut_{n}" for n in _numbers(row.group(2))}
    return names


def collect(root: Path, docs: Path) -> tuple[dict[str, Counter[str]], list[str], list[str]]:
    counts: dict[str, Counter[str]] = {p: Counter() for p in (*PACKAGES, *SETTLEMENT)}
    survivors: list[str] = []
    codes: dict[str, int | None] = {}
    modules: set[str] = set()
    for meta in sorted(root.rglob("*.meta")):
        codes.update(json.loads(meta.read_text()).get("exit_code_by_key", {}))
        module = str(meta.relative_to(root)).removesuffix(".py.meta").replace("/", ".")
        modules.add(module.removesuffix(".__init__"))
    listed = equivalents(docs, modules)
    for mutant, code in codes.items():
        package = package_of(mutant)
        if package not in counts:
            continue
        if code is None:
            kind = "not checked"
        elif code in KILLED:
            kind = "killed"
        elif code in SURVIVED | NO_TESTS:
            kind = "equivalent" if mutant in listed else "surviving"
            if mutant not in listed:
                survivors.append(mutant)
        else:
            kind = "suspicious"
        counts[package][kind] += 1
    stale = sorted(m for m in listed if codes.get(m) in KILLED)
    return counts, survivors, stale


def table(counts: dict[str, Counter[str]]) -> str:
    head = ("package", "mutants", "checked", "killed", "equivalent", "surviving",
            "% surviving non-equivalent")
    rows = [head]
    for package, c in counts.items():
        if not c:
            continue
        checked = c["killed"] + c["equivalent"] + c["surviving"] + c["suspicious"]
        judged = checked - c["equivalent"]
        rate = f"{100 * c['surviving'] / judged:.1f}%" if judged else "-"
        rows.append((package, str(sum(c.values())), str(checked), str(c["killed"]),
                     str(c["equivalent"]), str(c["surviving"]), rate))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["| " + " | ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
             + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mutants", default="mutants", help="mutmut's working folder")
    parser.add_argument("--docs", default="docs/testing.md", help="where equivalents are listed")
    parser.add_argument("--survivors", action="store_true", help="list the survivors")
    args = parser.parse_args()
    counts, survivors, stale = collect(Path(args.mutants), Path(args.docs))
    print(table(counts))
    if stale:
        print("\nlisted as equivalent but killed (stale entries):", *stale, sep="\n")
    if args.survivors:
        print("\nsurviving, not listed as equivalent:", *survivors, sep="\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
