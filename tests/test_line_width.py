"""No line of kint/, tests/ or bench/ over 100 characters: the project's width (README,
"Development": `make lint` fails on a longer line), which nothing checked, so ~29 lines of
kint/ had grown past it (note 29), and ~40 of tests/ and bench/ while only kint/ was
checked, and a reader of a side-by-side diff or a review lost their ends.

The Markdown too (README.md, docs/, bench/'s README.md and RESULTS.md): only .py files were
checked, and README.md had 31 lines past the width, docs/ ~100 besides their tables,
bench/ ~65. Exempt there, each because no wrap can shorten it without changing what it says:
- a table row and a heading: Markdown ends either at its line's end (tests/test_docs_tables.py);
- a line that is one word after its indentation or list marker: a URL, a link's destination
  (bench/RESULTS.md's contents, anchors of long headings), a hash; no such line is a URL now;
- a fenced block announced by `<!-- wide: why -->` on the line before it: kint's output
  quoted word for word (a refusal, a JSON answer, a notice), where a break would show one
  the program does not print. Every other fenced block (commands, listings) is checked.

A test of the suite, and a script `make lint` runs beside pyflakes, so a long line fails
in seconds, before the suite's minutes. Characters, not bytes: a line of prose with an
arrow or a dash counts as it reads.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

WIDTH = 100
REPO = Path(__file__).resolve().parent.parent
# The folders of the project's own Python: the package, its tests and its benchmarks.
CHECKED = ("kint", "tests", "bench")
# The project's Markdown: its README, its docs, its benchmarks' README and results.
MARKDOWN = ("README.md", "docs/**/*.md", "bench/*.md")
# The comment that exempts the fenced block whose fence is the next line; `why` is required.
WIDE = re.compile(r"^\s*<!-- wide: \S.* -->\s*$")
# A line of one word after its indentation, a quote's and a list item's marker.
ONE_WORD = re.compile(r"^\s*(?:>\s*)*(?:[-*+]\s+|\d+[.)]\s+)?\S+\s*$")


def too_long(root: Path = REPO / "kint", width: int = WIDTH) -> list[str]:
    """`path:line: N characters` for every line of a .py file under `root` past `width`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if len(line) > width:
                found.append(f"{path.relative_to(root.parent)}:{number}: {len(line)} "
                             f"characters (at most {width})")
    return found


def too_long_markdown(text: str, width: int = WIDTH) -> list[tuple[int, int]]:
    """(line number, characters) of each line of the Markdown `text` past `width` that no
    wrap could shorten without changing what it says is not (the module's docstring)."""
    found = []
    fenced = wide = False
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            wide = not fenced and number > 1 and bool(WIDE.match(lines[number - 2]))
            fenced = not fenced
            continue
        if len(line) <= width or (fenced and wide):
            continue
        if not fenced and (stripped.startswith(("|", "#")) or ONE_WORD.match(line)):
            continue
        found.append((number, len(line)))
    return found


def markdown_pages() -> list[Path]:
    return sorted({path for pattern in MARKDOWN for path in REPO.glob(pattern)})


def too_long_anywhere() -> list[str]:
    """`too_long` over every folder of CHECKED, and `too_long_markdown` over MARKDOWN."""
    found = [entry for folder in CHECKED for entry in too_long(REPO / folder)]
    for page in markdown_pages():
        found += [f"{page.relative_to(REPO)}:{number}: {count} characters (at most {WIDTH})"
                  for number, count in too_long_markdown(page.read_text(encoding="utf-8"))]
    return found


def test_no_line_of_kint_tests_or_bench_is_over_the_width():
    assert too_long_anywhere() == []


def test_the_markdown_pages_are_found():
    """The globs name the pages (a glob that matched nothing would check nothing)."""
    names = {str(page.relative_to(REPO)) for page in markdown_pages()}
    assert {"README.md", "docs/commands.md", "bench/RESULTS.md"} <= names, names


def test_the_markdown_check_finds_a_long_line_and_passes_only_the_exempt():
    """Prose, a list item and a fenced command past the width are named; a table row, a
    heading, one long word and a block announced as wide are not. An announcement a line
    above the fence, or one without its why, exempts nothing."""
    long = "word " * 20 + "w"  # 101 characters
    text = "\n".join([
        long,                                   # 1: prose
        "- " + long,                            # 2: a list item
        "| " + long + " |",                     # 3: a table row
        "## " + long,                           # 4: a heading
        "  " + "x" * 120,                       # 5: one word (a URL, a link's destination)
        "```sh", long, "```",                   # 7: a command
        "<!-- wide: kint's refusal, word for word -->", "```text", long, "```",  # 11
        "<!-- wide: quoted -->", "", "```text", long, "```",  # 16: not the line above
        "<!-- wide: -->", "```text", long, "```",  # 20: no why
    ])
    assert [number for number, _ in too_long_markdown(text)] == [1, 2, 7, 16, 20]
    assert too_long_markdown("x " * 50) == []  # 100 characters: at the width


def test_the_check_finds_a_long_line(tmp_path):
    """The check itself: a line of 101 characters is named, one of 100 is not."""
    (tmp_path / "kint").mkdir()
    (tmp_path / "kint" / "a.py").write_text("x" * 100 + "\n" + "y" * 101 + "\n")
    assert too_long(tmp_path / "kint") == ["kint/a.py:2: 101 characters (at most 100)"]


if __name__ == "__main__":
    lines = too_long_anywhere()
    for entry in lines:
        print(entry)
    sys.exit(1 if lines else 0)
