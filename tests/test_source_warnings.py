"""Every module of kint compiles without a warning: an invalid escape sequence in a
docstring (`\\d`) is a DeprecationWarning today and a SyntaxWarning in later Pythons,
printed wherever the module is compiled, a user's terminal included."""

from __future__ import annotations

import warnings
from pathlib import Path

KINT = Path(__file__).resolve().parent.parent / "kint"


def test_every_module_compiles_without_a_warning() -> None:
    warned = []
    for path in sorted(KINT.rglob("*.py")):
        with warnings.catch_warnings():
            # Only the compiler's warnings: "error" for every category would also raise
            # an earlier test's unclosed-socket ResourceWarning, if the collector ran here.
            warnings.simplefilter("error", SyntaxWarning)
            warnings.simplefilter("error", DeprecationWarning)
            try:
                compile(path.read_text(), str(path), "exec")
            except (SyntaxWarning, DeprecationWarning) as warning:
                warned.append(f"{path.relative_to(KINT)}: {warning}")
    assert not warned, warned
