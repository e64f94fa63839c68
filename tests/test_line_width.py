"""No line of kint/ over 100 characters: the project's width (docs/development.md), which
nothing checked, so ~29 lines had grown past it (note 29) and a reader of a side-by-side
diff or a review lost their ends.

A test of the suite, and a script `make lint` runs beside pyflakes, so a long line fails
in seconds, before the suite's minutes. Characters, not bytes: a line of prose with an
arrow or a dash counts as it reads.
"""

from __future__ import annotations

import sys
from pathlib import Path

WIDTH = 100
KINT = Path(__file__).resolve().parent.parent / "kint"


def too_long(root: Path = KINT, width: int = WIDTH) -> list[str]:
    """`path:line: N characters` for every line of a .py file under `root` past `width`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if len(line) > width:
                found.append(f"{path.relative_to(root.parent)}:{number}: {len(line)} "
                             f"characters (at most {width})")
    return found


def test_no_line_of_kint_is_over_the_width():
    assert too_long() == []


def test_the_check_finds_a_long_line(tmp_path):
    """The check itself: a line of 101 characters is named, one of 100 is not."""
    (tmp_path / "kint").mkdir()
    (tmp_path / "kint" / "a.py").write_text("x" * 100 + "\n" + "y" * 101 + "\n")
    assert too_long(tmp_path / "kint") == ["kint/a.py:2: 101 characters (at most 100)"]


if __name__ == "__main__":
    lines = too_long()
    for entry in lines:
        print(entry)
    sys.exit(1 if lines else 0)
