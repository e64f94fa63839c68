"""kint.settings names its exports three times, and the three must agree.

The package loads its submodules on first use (`__getattr__` over `_MODULE_OF`), imports
the same names under TYPE_CHECKING for type checkers, and lists them in a literal
`__all__` so that pyflakes (`make lint`) counts those imports as exports. A name added to
one list and not the others would be an export that fails at its first use, or one a
checker never sees.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import kint.settings as settings


def _type_checking_names() -> set[str]:
    """The names kint/settings/__init__.py imports under `if TYPE_CHECKING:`."""
    tree = ast.parse(Path(settings.__file__).read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom):
                    names.update(alias.asname or alias.name for alias in inner.names)
    return names


def test_all_the_lazy_map_and_the_type_checking_imports_name_the_same_exports():
    assert len(settings.__all__) == len(set(settings.__all__))
    assert set(settings.__all__) == set(settings._MODULE_OF) == _type_checking_names()


def test_every_export_is_the_object_of_the_module_the_map_names():
    for name in settings.__all__:
        module = importlib.import_module(f"kint.settings.{settings._MODULE_OF[name]}")
        assert getattr(settings, name) is getattr(module, name), name
