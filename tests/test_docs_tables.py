"""Every Markdown table row in README.md and docs/ is one line.

A table row wrapped like prose breaks the rendered table: GitHub's Markdown makes each
following line a row of its own, so the cell stops at the line's end and the rest lands in
the first column as rows that mean nothing (docs/commands.md's `config show` `--json` row
did so, and every other docs test passed). Fenced code blocks are left alone: a `|` there
is no table.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
DELIMITER = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")


def broken_rows(text: str) -> list[int]:
    """The line numbers (from 1) of table lines not followed by another row, a blank line
    or the page's end: the start of a row carried on past its line."""
    lines = text.splitlines()
    found = []
    fenced = in_table = False
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        following = lines[number] if number < len(lines) else ""
        if not in_table:
            in_table = line.lstrip().startswith("|") and bool(DELIMITER.match(following))
        if (in_table and line.lstrip().startswith("|") and following.strip()
                and not following.lstrip().startswith("|")):
            found.append(number)
        if in_table and not following.strip():
            in_table = False
    return found


def test_no_table_row_is_carried_onto_a_second_line():
    broken = [f"{page.relative_to(ROOT)}:{n}" for page in PAGES
              for n in broken_rows(page.read_text())]
    assert broken == [], f"a table row goes on past its line at {broken}"


def test_the_check_finds_a_row_carried_on_and_passes_a_whole_table():
    whole = "| flag | meaning |\n|---|---|\n| `--json` | the settings |\n\nprose\n"
    assert broken_rows(whole) == []
    carried = "| flag | meaning |\n|---|---|\n| `--json` | the settings;\nmore,\nand more |\n"
    assert broken_rows(carried) == [3]
    assert broken_rows("```text\n| a |\n|---|\nnot a row\n```\n") == []
