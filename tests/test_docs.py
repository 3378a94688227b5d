"""The README's reference tables are generated from the code (scripts/docs.py): a change to a
command, an option, an MCP tool or an HTTP endpoint that the README does not show fails here."""

from __future__ import annotations

from scripts import docs


def test_the_readmes_generated_tables_are_the_codes() -> None:
    current = docs.README.read_text(encoding="utf-8")
    stale = docs.stale_regions(current, docs.generated(current))
    assert not stale, f"README.md's generated tables are stale ({', '.join(stale)}): run `{docs.COMMAND}`"


def test_a_table_cell_stays_one_cell() -> None:
    assert docs.cell("a|b\n  c") == "a\\|b c"
    assert docs.table(["x", "y"], [("1", "2|3")]) == "| x | y |\n|---|---|\n| 1 | 2\\|3 |\n"
