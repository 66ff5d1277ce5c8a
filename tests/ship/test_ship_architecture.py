"""docs/architecture.md: linked from the README, its profile table names every
`ProtocolProfile` field, and the "Adding a protocol" checklist names files that exist (a
`<protocol>` path exists for the protocols there are)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from gateway.protocols import ProtocolProfile

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
PATH = re.compile(r"`((?:gateway|adapters|harness|tests|docs)/[^`\s]*)`")


def _checklist() -> str:
    text = PAGE.read_text()
    return text[text.index("## Adding a protocol"):]


def test_the_readme_links_the_architecture_page() -> None:
    # Its links, and the page's, are checked with the other docs (test_ship_docs.py).
    assert "(docs/architecture.md)" in (ROOT / "README.md").read_text()


def test_the_profile_table_names_every_profile_field() -> None:
    text = PAGE.read_text()
    for field in dataclasses.fields(ProtocolProfile):
        assert f"`{field.name}`" in text, f"ProtocolProfile.{field.name} is not documented"


def test_the_checklist_names_files_that_exist() -> None:
    paths = PATH.findall(_checklist())
    assert len(paths) >= 10
    for path in paths:
        concrete = path.replace("<protocol>", "kafka")
        assert (ROOT / concrete).exists(), f"docs/architecture.md names {path}"
