"""The map a newcomer reads is the tree they clone: README's "Code layout" names every
package and top-level module of kint/, every package says in its `__init__` docstring why
it exists, the packages that list their modules list all of them, and every test file the
docs name as the proof of a promise (docs/faults.md's last column, mostly) is there.

A module added, a package split or a test file renamed or merged would otherwise leave the
docs pointing at nothing; each check reads the files as they are, so it costs no machine.
The code, docs/ and README also name no document a clone lacks (the design notes, the
behaviour seeds): a newcomer must be able to open what a docstring points at. A link within
a page names one of its headings, and docs/faults.md's short table links every fault's
section, so a reader scanning the table reaches each one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KINT = ROOT / "kint"
README = ROOT / "README.md"

# The packages whose __init__ docstring lists their modules: each must list every one.
LISTING_PACKAGES = ["supervisor", "tenant_worker", "settings", "chain", "chain/devchain",
                    "custody", "harnesses"]


def _layout_block() -> str:
    text = README.read_text()
    return text.split("\n## Code layout\n", 1)[1].split("```text", 1)[1].split("```", 1)[0]


def _packages() -> list[Path]:
    return sorted(p.parent for p in KINT.glob("*/__init__.py"))


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def _modules(package: Path) -> list[str]:
    return sorted(p.stem for p in package.glob("*.py") if p.stem != "__init__")


def test_readme_code_layout_names_every_package_and_top_level_module():
    named = set(re.findall(r"kint/[\w/]+?(?:/|\.py)|[\w]+\.py|[\w]+/", _layout_block()))
    for package in _packages():
        assert f"kint/{package.name}/" in named, f"README's Code layout lacks kint/{package.name}/"
    for module in _modules(KINT):
        assert f"kint/{module}.py" in named or f"{module}.py" in named, \
            f"README's Code layout lacks kint/{module}.py"


@pytest.mark.parametrize("package", [p.name for p in _packages()])
def test_every_package_says_why_it_exists(package):
    said = _docstring(KINT / package / "__init__.py")
    assert len(said.split()) >= 12, f"kint/{package}/__init__.py has no docstring to speak of"


@pytest.mark.parametrize("package", LISTING_PACKAGES)
def test_a_package_that_lists_its_modules_lists_every_one(package):
    said = _docstring(KINT / package / "__init__.py")
    missing = [m for m in _modules(KINT / package) if not re.search(rf"\b{m}\b", said)]
    assert not missing, f"kint/{package}/__init__.py does not name {missing}"


# Names of documents the checkout does not hold: "DESIGN §N" / "DESIGN.md" (the design
# notes) and "seed 000" / "seed 001" (the behaviour specs). What they said is in docs/
# (docs/how-it-works.md, mostly); a pointer to them leaves a reader with nothing to open.
ABSENT_DOCUMENTS = re.compile(r"DESIGN|(?i:seed[ _]0\d\d)")


def test_nothing_points_at_a_document_the_checkout_lacks():
    """The code, docs/ and README point only at what a clone holds (or at v0.3.0's
    published pages, by name)."""
    files = [README, *sorted((ROOT / "docs").glob("*.md")), *sorted(KINT.rglob("*.py"))]
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
             for path in files
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if ABSENT_DOCUMENTS.search(line)]
    assert not found, "\n".join(found)


def test_every_test_file_the_docs_name_exists():
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        for name in set(re.findall(r"tests/[\w/]+\.py", page.read_text())):
            assert (ROOT / name).is_file(), f"{page.name} names {name}, which is not there"


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, every character but a letter, a
    digit, a space, `-` or `_` dropped (code's backticks, a quote's apostrophe), spaces as
    `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    """The anchors of a page's headings (outside fenced code), a repeated one as GitHub
    numbers it (`name`, `name-1`, ...)."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", prose, re.M):
        base = anchor = _slug(heading)
        number = 0
        while anchor in found:
            number += 1
            anchor = f"{base}-{number}"
        found.add(anchor)
    return found


def test_every_link_within_a_page_names_one_of_its_headings():
    """A link to `#anchor` lands on a heading of its own page: docs/faults.md's table links
    each fault to its section, and a heading reworded would leave the link going nowhere."""
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        missing = set(re.findall(r"\]\(#([^)\s]+)\)", text)) - _anchors(text)
        assert not missing, f"{page.name} links to {sorted(missing)}, no heading of its own"


def test_the_faults_table_links_every_fault_section():
    """docs/faults.md: each fault has its section (a `###` heading) and a row of the table
    that links to it, one for one, in the sections' order: a fault written below and left
    out of the table is one a reader scanning the table never sees. And each row's test
    files are its section's **Tested by** files, in their order: the page says them twice,
    and a file added to one place only would otherwise pass unseen."""
    text = (ROOT / "docs" / "faults.md").read_text()
    sections = [_slug(h) for h in re.findall(r"^### (.+)$", text, re.M)]
    rows = re.findall(r"^\| \[[^\]]+\]\(#([^)]+)\) \|.*\|(.*)\|$", text, re.M)
    assert sections and [anchor for anchor, _ in rows] == sections, (len(rows), len(sections))
    bodies = re.split(r"^### .+$", text, flags=re.M)[1:]
    for (anchor, tests), body in zip(rows, bodies):
        assert "**Tested by:**" in body, f"{anchor} says no **Tested by:**"
        tested_by = body.split("**Tested by:**", 1)[1]
        files = re.findall(r"`(tests/[^`]+)`", tested_by)
        assert re.findall(r"`(tests/[^`]+)`", tests) == files, anchor
