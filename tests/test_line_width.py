"""No line of kint/, tests/ or bench/ over 100 characters: the project's width (README,
"Development": `make lint` fails on a longer line), which nothing checked, so ~29 lines of
kint/ had grown past it (note 29), and ~40 of tests/ and bench/ while only kint/ was
checked, and a reader of a side-by-side diff or a review lost their ends.

The Markdown too (every .md of the project's own: README.md, docs/, bench/, deploy/'s and
tests/vectors/'s READMEs): only .py files were checked, and README.md had 31 lines past the
width, docs/ ~100 besides their tables, bench/ ~65. Exempt there, each because no wrap can
shorten it without changing what it says:
- a table row and a heading: Markdown ends either at its line's end (tests/test_docs_tables.py);
- a line that is one word after its indentation or list marker: a URL, a link's destination
  (bench/RESULTS.md's contents, anchors of long headings), a hash; no such line is a URL now;
- a code block announced by `<!-- wide: why -->` on the line before it: kint's output
  quoted word for word (a refusal, a JSON answer, a notice), where a break would show one
  the program does not print. Every other code block (commands, listings) is checked.
A code block is fenced, or indented (4 spaces, after a blank line, outside a list): both are
measured as code, never as prose, and either may be announced wide, so that a long quoted
output is never reflowed like a paragraph (the rewrap did so to an indented `kint status`
in docs/commands.md). Quote kint's output in a fenced ```text block all the same: a reader
of the source sees where it starts and ends. A fence's own line is measured as its block is.

A test of the suite, and a script `make lint` runs beside pyflakes, so a long line fails
in seconds, before the suite's minutes. Characters, not bytes: a line of prose with an
arrow or a dash counts as it reads.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

WIDTH = 100
REPO = Path(__file__).resolve().parent.parent
# The folders of the project's own Python: the package, its tests and its benchmarks.
CHECKED = ("kint", "tests", "bench")
# Folders that hold no Markdown of the project's own: tools' caches, the venvs' and
# node_modules' links (a dependency's README is not ours to wrap).
NOT_OURS = re.compile(r"^(\.|node_modules$)")
# The comment that exempts the code block whose first line (its fence, or its first indented
# line) is the next line; `why` is required.
WIDE = re.compile(r"^\s*<!-- wide: \S.* -->\s*$")
# A line of one word after its indentation, a quote's and a list item's marker.
ONE_WORD = re.compile(r"^\s*(?:>\s*)*(?:[-*+]\s+|\d+[.)]\s+)?\S+\s*$")
# An ATX heading (up to 3 spaces, 1 to 6 #, then a space or the line's end) and a table row
# (a pipe at either end, as every row of the project's tables is written).
HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")
TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
# A line of an indented code block (4 spaces or a tab), and a list item's first line.
INDENTED = re.compile(r"^(    |\t)")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])(\s|$)")


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
    fenced = indented = wide = False
    after_blank = True  # the page's first line starts a block as one after a blank line does
    in_list = False
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        stripped = line.lstrip()
        announced = number > 1 and bool(WIDE.match(lines[number - 2]))
        blank = not stripped
        if stripped.startswith(("```", "~~~")) and (fenced or in_list
                                                    or not INDENTED.match(line)):
            wide = not fenced and announced
            fenced = not fenced
            indented = False
        elif not fenced and not blank:
            if INDENTED.match(line) and (indented or ((after_blank or announced)
                                                      and not in_list)):
                wide = wide if indented else announced
                indented = True
            else:
                indented = False
                if LIST_ITEM.match(line):
                    in_list = True
                elif not line[0].isspace():
                    in_list = False
        after_blank = blank
        if len(line) <= width or ((fenced or indented) and wide):
            continue
        if (not fenced and not indented
                and (TABLE_ROW.match(line) or HEADING.match(line) or ONE_WORD.match(line))):
            continue
        found.append((number, len(line)))
    return found


def markdown_pages() -> list[Path]:
    """Every .md under the checkout but in NOT_OURS's folders, which the walk does not enter
    (a real .venv or node_modules, as in a main checkout, holds thousands of files)."""
    found = []
    for folder, subfolders, files in os.walk(REPO):
        subfolders[:] = [name for name in subfolders if not NOT_OURS.match(name)]
        found += [Path(folder) / name for name in files if name.endswith(".md")]
    return sorted(found)


def too_long_anywhere() -> list[str]:
    """`too_long` over every folder of CHECKED, and `too_long_markdown` over every page."""
    found = [entry for folder in CHECKED for entry in too_long(REPO / folder)]
    for page in markdown_pages():
        found += [f"{page.relative_to(REPO)}:{number}: {count} characters (at most {WIDTH})"
                  for number, count in too_long_markdown(page.read_text(encoding="utf-8"))]
    return found


def test_no_line_of_kint_tests_or_bench_is_over_the_width():
    assert too_long_anywhere() == []


def test_the_markdown_pages_are_found():
    """The walk names the pages (a walk that found nothing would check nothing), the READMEs
    of deploy/ and tests/vectors/ among them, and none of a cache's, a venv's or
    node_modules' (a dependency's README past the width is not the project's to mend)."""
    names = {str(page.relative_to(REPO)) for page in markdown_pages()}
    assert {"README.md", "docs/commands.md", "bench/RESULTS.md", "deploy/hermes/README.md",
            "deploy/mcp/README.md", "tests/vectors/README.md"} <= names, names
    assert not [name for name in names
                if name.startswith((".", "node_modules/")) or "/." in name], names


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


def test_an_indented_code_block_is_code_and_may_be_announced_wide():
    """A 4-space indented block after a blank line is code, as a fenced one is: measured as
    code (one long word there is named, where prose's is exempt), and exempt when announced
    wide, so that quoted output in one need not be reflowed as prose (docs/commands.md's
    `kint status` lines were). Indented lines that continue a paragraph or a list item are
    prose. A fence's own line is measured; a line that starts with `#` but is no heading,
    or with `|` but is no table row, is prose."""
    long = "word " * 20 + "w"  # 101 characters
    word = "    " + "x" * 120   # one long word, indented
    text = "\n".join([
        "Quoted:", "", word,                    # 3: an indented block's: code, measured
        "<!-- wide: kint's output, word for word -->", "    " + long,  # 5: announced: exempt
        "", "    " + long,                      # 7: the same block, past a blank line: exempt
        "", "text", word,                       # 10: a paragraph's continuation: prose
        "", "- item", "", word,                 # 14: a list item's paragraph: prose
        "", "```" + "x" * 98,                   # 16: a fence's line
        "```",
        "#" + long[1:],                         # 18: no heading (no space after the #)
        "| " + long,                            # 19: no table row (no pipe at its end)
    ])
    assert [number for number, _ in too_long_markdown(text)] == [3, 16, 18, 19]


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
