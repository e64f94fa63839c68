"""No line of kint/, tests/ or bench/ over 100 characters: the project's width (README,
"Development": `make lint` fails on a longer line), which nothing checked, so ~29 lines of
kint/ had grown past it (note 29), and ~40 of tests/ and bench/ while only kint/ was
checked, and a reader of a side-by-side diff or a review lost their ends.

A test of the suite, and a script `make lint` runs beside pyflakes, so a long line fails
in seconds, before the suite's minutes. Characters, not bytes: a line of prose with an
arrow or a dash counts as it reads.
"""

from __future__ import annotations

import sys
from pathlib import Path

WIDTH = 100
REPO = Path(__file__).resolve().parent.parent
# The folders of the project's own Python: the package, its tests and its benchmarks.
CHECKED = ("kint", "tests", "bench")


def too_long(root: Path = REPO / "kint", width: int = WIDTH) -> list[str]:
    """`path:line: N characters` for every line of a .py file under `root` past `width`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if len(line) > width:
                found.append(f"{path.relative_to(root.parent)}:{number}: {len(line)} "
                             f"characters (at most {width})")
    return found


def too_long_anywhere() -> list[str]:
    """`too_long` over every folder of CHECKED."""
    return [entry for folder in CHECKED for entry in too_long(REPO / folder)]


def test_no_line_of_kint_tests_or_bench_is_over_the_width():
    assert too_long_anywhere() == []


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
