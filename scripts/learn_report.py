"""How well `xrgw learn` recovers the 31 real catalogs in tests/data/xregistry-catalogs.

For each catalog: render native samples from each of its definitions (the template
aspect, `gateway.envelope.native.render_native`, as tests/unit/core/test_real_catalogs.py
does), with varying placeholder values and a JSON body carrying them; learn a draft from
the samples alone; load the draft (it must have no errors); match every sample against
the draft. A definition is *recovered* when all its samples match one draft definition
whose address template is the original's up to placeholder names. Prints one table row
per catalog (Markdown):

    python -m scripts.learn_report                 # 12 samples per definition
    python -m scripts.learn_report -n 30 --json    # rows as JSON
    python -m scripts.learn_report --bare          # bodies without the placeholder values
    python -m scripts.learn_report --values words  # placeholder values from a few words
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from gateway.convert import Converter
from gateway.definitions import load_catalog
from gateway.definitions.model import MessageDefinition
from gateway.envelope.native import context_names, render_native
from gateway.envelope.render import RenderError
from gateway.json.values import JSON, JSONObject
from gateway.learn import LearnOptions, draft_document, learn
from gateway.protocols import find_profile
from gateway.record import NativeMessage

ROOT = Path(__file__).resolve().parents[1]
CATALOGS = sorted(p for p in (ROOT / "tests/data/xregistry-catalogs").rglob("*")
                  if p.suffix in (".json", ".cereg"))
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")


@dataclass
class Row:
    catalog: str
    definitions: int  # definitions with a protocol and protocoloptions that render
    samples: int
    drafted: int  # definitions in the draft
    recovered: int
    matched: int
    ambiguous: int
    draft_errors: int
    unconstrained: int  # originals whose protocoloptions constrain nothing: not measured

    @property
    def recovered_share(self) -> float:
        return self.recovered / self.definitions if self.definitions else 1.0

    @property
    def matched_share(self) -> float:
        return self.matched / self.samples if self.samples else 1.0


#: Word-like placeholder values (`--values words`): what the id-like rule cannot tell
#: from a kind of message; only the payload field carrying them can.
WORDS = ("north", "south", "east", "west", "alpha", "beta", "gamma", "delta", "red", "blue")


def sample_value(rng: random.Random, values: str = "ids") -> str:
    """A placeholder value as traffic carries them: numbers, serials, hex ids (or, with
    `values="words"`, one of a few words)."""
    if values == "words":
        return rng.choice(WORDS)
    form = rng.randrange(3)
    if form == 0:
        return str(rng.randrange(1, 10**6))
    if form == 1:
        return f"dev-{rng.randrange(10**5):05d}"
    return f"{rng.getrandbits(48):012x}"


def render_samples(definition: MessageDefinition, count: int, rng: random.Random,
                   values: str = "ids", bare: bool = False) -> list[NativeMessage]:
    """`count` records of `definition`, each with its own placeholder values; the JSON
    body carries them under their names (unless `bare`), as payloads usually do."""
    names = sorted(context_names(definition))
    out: list[NativeMessage] = []
    for seq in range(count):
        context = {name: sample_value(rng, values) for name in names}
        record = render_native(definition, None, context)
        if isinstance(record, RenderError):
            return []
        body: JSONObject = {} if bare else {**context}
        body.update({"seq": seq, "reading": round(rng.random() * 100, 3)})
        out.append(NativeMessage(record.protocol, record.fields, data=body))
    return out


def address_template(definition: MessageDefinition) -> str | None:
    prof = find_profile(definition.protocol)
    if prof is None or prof.address is None:
        return None
    for constraint in definition.protocol_options:
        if (constraint.field == prof.address.field and constraint.name == prof.address.name
                and constraint.prop.has_value and constraint.prop.value is not None):
            value: JSON = constraint.prop.value
            return str(value)
    return None


def equivalent(first: str | None, second: str | None) -> bool:
    def shape(t: str | None) -> str | None:
        return None if t is None else _PLACEHOLDER.sub("{}", t)
    return shape(first) == shape(second)


def measure(path: Path, per_definition: int = 12, seed: int = 7,
            options: LearnOptions | None = None, values: str = "ids", bare: bool = False
            ) -> Row:
    rng = random.Random(f"{seed}:{path.name}")
    catalog = load_catalog([path])
    with_protocol = [d for d in catalog.messages() if d.protocol is not None]
    # A definition that constrains nothing of its protocol (test-filters: its
    # protocoloptions hold only endpoint notes) matches every message of it: there is no
    # address to recover, and its samples carry nothing to learn from.
    originals = [d for d in with_protocol if d.protocol_options]
    samples: list[tuple[MessageDefinition, NativeMessage]] = []
    for definition in originals:
        samples += [(definition, r) for r in
                    render_samples(definition, per_definition, rng, values, bare)]
    rendered = {d.xid for d, _ in samples}
    result = learn((r for _, r in samples), options or LearnOptions())
    document = draft_document(result.proposals, options or LearnOptions())
    with tempfile.TemporaryDirectory() as folder:
        draft_path = Path(folder) / "draft.xreg.json"
        draft_path.write_text(json.dumps(document), encoding="utf-8")
        draft = load_catalog([draft_path])
    learned = list(draft.messages())
    matcher = Converter(learned).matcher if learned else None
    matched = ambiguous = 0
    found: dict[str, set[str | None]] = {}
    for definition, record in samples:
        result_of = matcher.match(record) if matcher is not None else None
        hit = None if result_of is None else result_of.definition
        if hit is not None:
            matched += 1
            if len(result_of.tied if result_of else ()) > 1:
                ambiguous += 1
        found.setdefault(definition.xid, set()).add(None if hit is None else hit.xid)
    by_xid = {d.xid: d for d in learned}
    recovered = 0
    for definition in originals:
        hits = found.get(definition.xid, set())
        if len(hits) == 1 and None not in hits:
            [xid] = hits
            assert xid is not None
            if equivalent(address_template(definition), address_template(by_xid[xid])):
                recovered += 1
    return Row(path.name, len(rendered), len(samples), len(learned), recovered, matched,
               ambiguous, len(draft.errors), len(with_protocol) - len(originals))


def table(rows: Sequence[Row]) -> str:
    lines = ["| catalog | definitions | samples | draft definitions | recovered | matched "
             "| ambiguous | draft errors | not measured |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    total = Row("**all**", *(sum(getattr(r, f) for r in rows) for f in
                             ("definitions", "samples", "drafted", "recovered", "matched",
                              "ambiguous", "draft_errors", "unconstrained")))
    for row in [*rows, total]:
        lines.append(f"| {row.catalog} | {row.definitions} | {row.samples} | {row.drafted} "
                     f"| {row.recovered} ({row.recovered_share:.1%}) "
                     f"| {row.matched} ({row.matched_share:.1%}) | {row.ambiguous} "
                     f"| {row.draft_errors} | {row.unconstrained} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-n", type=int, default=12, help="samples per definition")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--values", choices=["ids", "words"], default="ids",
                        help="placeholder values: id-like (default) or a few words")
    parser.add_argument("--bare", action="store_true",
                        help="bodies without the placeholder values (nothing to name "
                             "placeholders after)")
    parser.add_argument("--json", action="store_true", help="rows as JSON Lines")
    args = parser.parse_args(argv)
    rows = [measure(path, args.n, args.seed, values=args.values, bare=args.bare)
            for path in CATALOGS]
    if args.json:
        for row in rows:
            print(json.dumps(asdict(row)))
    else:
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
