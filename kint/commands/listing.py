"""A command's entry in `kint --help`, read from its module's source without importing it.

The top-level help lists every command with its short help, which click takes from the
command's docstring. Importing each command's module to get it loaded web3, eth_account
and requests (~0.6 s of ~0.75 s for `kint --help`). The docstring is in the source: it is
read from there with `ast`, and click's own `Command` shortens it, so the listing stays
what click would print and the docstring stays the only place the text is written.

A literal `help=` or `short_help=` on the decorator is read as click reads it. A command
whose decorator could change its listing otherwise (a computed help, `deprecated=`,
`hidden=`, `cls=`), or whose source cannot be read, is left out: the caller imports it.
"""

from __future__ import annotations

import ast
import importlib.util

import click

# Keywords of `@click.command`/`@click.group`, besides a literal `help`/`short_help`, that
# change what the listing shows.
_CHANGES_LISTING = frozenset({"deprecated", "hidden", "cls"})


def _source(module: str) -> str | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    try:
        with open(spec.origin, encoding="utf-8") as file:
            return file.read()
    except OSError:
        return None


def _help_texts(function: ast.FunctionDef) -> dict[str, str | None] | None:
    """The `help` and `short_help` click gives the command `function` makes: the docstring,
    or literal strings on its decorator. None when not a command, or when its decorator
    could change the listing in a way the source alone does not say."""
    texts: dict[str, str | None] | None = None
    for decorator in function.decorator_list:
        if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)):
            continue
        if decorator.func.attr not in ("command", "group"):
            continue
        texts = {"help": ast.get_docstring(function, clean=False), "short_help": None}
        for keyword in decorator.keywords:
            if keyword.arg in ("help", "short_help"):
                if not (isinstance(keyword.value, ast.Constant)
                        and isinstance(keyword.value.value, str)):
                    return None
                texts[keyword.arg] = keyword.value.value
            elif keyword.arg is None or keyword.arg in _CHANGES_LISTING:
                return None
    return texts


def listed_commands(wanted: dict[str, tuple[str, str]]) -> dict[str, click.Command]:
    """For each name in `wanted` (name -> module, function), a stand-in `click.Command` with
    the help click would give the real one, for those whose source says it all."""
    trees: dict[str, ast.Module | None] = {}
    found: dict[str, click.Command] = {}
    for name, (module, attribute) in wanted.items():
        if module not in trees:
            source = _source(module)
            trees[module] = None if source is None else ast.parse(source)
        tree = trees[module]
        if tree is None:
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == attribute:
                texts = _help_texts(node)
                if texts is not None:
                    found[name] = click.Command(name, **texts)
                break
    return found
