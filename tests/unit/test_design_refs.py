"""Every "invariant N" and "DESIGN.md §N" cited in the code is an entry of docs/DESIGN.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "DESIGN.md"
CITING = ("services", "tests", "bench")

# "invariant 5", "invariants 2-4", "invariants 2 and 8", "inv. 8"
INVARIANTS = re.compile(r"\b(?:invariants?|inv\.)\s+(\d+)(?:\s*(-|and)\s*(\d+))?", re.I)
SECTIONS = re.compile(r"DESIGN\.md\s+§(\d+)")


def cited(pattern: re.Pattern[str], text: str) -> set[int]:
    """The numbers ``pattern`` cites in ``text`` (a range cites every number in it)."""
    numbers: set[int] = set()
    for match in pattern.finditer(text):
        first, separator, other = (*match.groups(), None, None)[:3]
        if other is None:
            numbers.add(int(first))
        elif separator == "and":
            numbers.update({int(first), int(other)})
        else:
            numbers.update(range(int(first), int(other) + 1))
    return numbers


def design() -> tuple[set[int], set[int]]:
    """The invariant numbers (items of section 4) and the section numbers of DESIGN.md."""
    text = DESIGN.read_text(encoding="utf-8")
    sections = {int(n) for n in re.findall(r"^## (\d+)\.", text, re.M)}
    block = re.search(r"^## 4\. Invariants.*?(?=^## )", text, re.M | re.S)
    assert block is not None, "DESIGN.md has no '## 4. Invariants' section"
    invariants = {int(n) for n in re.findall(r"^\s*(\d+)\. \*\*", block.group(0), re.M)}
    return invariants, sections


def citations() -> dict[str, tuple[set[int], set[int]]]:
    """Per file of the code, tests and bench: the invariants and sections it cites."""
    found: dict[str, tuple[set[int], set[int]]] = {}
    for top in CITING:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path == Path(__file__).resolve():
                continue
            text = path.read_text(encoding="utf-8")
            refs = (cited(INVARIANTS, text), cited(SECTIONS, text))
            if refs[0] or refs[1]:
                found[str(path.relative_to(ROOT))] = refs
    return found


def test_the_patterns_read_ranges_and_pairs() -> None:
    """A range cites each number in it, "2 and 8" both; a section is read after DESIGN.md."""
    assert cited(INVARIANTS, "invariants 2-4, invariant 10, inv. 8 (invariants 5 and 7)") == {
        2, 3, 4, 5, 7, 8, 10,
    }  # fmt: skip
    assert cited(SECTIONS, "see DESIGN.md §6 and DESIGN.md §12") == {6, 12}


def test_every_cited_invariant_and_section_is_in_design_md() -> None:
    """No file cites an invariant or a section that docs/DESIGN.md does not have."""
    invariants, sections = design()
    assert invariants == set(range(1, 11))
    missing = {
        name: (sorted(inv - invariants), sorted(sec - sections))
        for name, (inv, sec) in citations().items()
        if not inv <= invariants or not sec <= sections
    }
    assert missing == {}
    assert citations()  # the code does cite the design
