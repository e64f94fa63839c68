"""kint's modules import one another without cycles, counting imports inside functions.

A cycle hidden behind a function-level import still ties two modules into one: neither
can be read, tested or moved without the other, and the import that breaks the cycle at
load time moves the failure to the first call. Imports under `if TYPE_CHECKING:` are type
hints only and do not count; a package importing its own submodules (or a submodule its
package) is how packages work and does not count either.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kint

ROOT = Path(kint.__file__).parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for inner in ast.walk(node))
    return skipped


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every kint module `name` imports, at any depth of its code."""
    tree = ast.parse(path.read_text())
    skipped = _type_checking_nodes(tree)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{alias.name}" for alias in node.names)
    return {m for m in out if m in modules and m != name
            and not m.startswith(name + ".") and not name.startswith(m + ".")}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_import_cycles_even_through_imports_inside_functions() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert len(graph) > 100  # the walk found the package, not an empty folder
    cycles = _cycles(graph)
    described = ["; ".join(f"{a} -> {b}" for a in cycle for b in sorted(graph[a] & set(cycle)))
                 for cycle in cycles]
    assert not cycles, "import cycles:\n" + "\n".join(described)


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The check above can fail: a two-module loop and a three-module loop are found, a
    chain is not."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert sorted(_cycles(graph)) == [["a", "b"], ["c", "d", "e"]]


def _reach(graph: dict[str, set[str]], name: str) -> set[str]:
    """Every module `name` imports, directly or through others."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def test_the_layers_that_share_wording_do_not_import_one_another() -> None:
    """Custody never reaches the protocol layer, and kint.outcomes, the sentences both say
    (nothing dropped), imports nothing at all, so either can take them: before, custody
    kept a copy of the protocol's sentence, which could drift from it unseen."""
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert graph["kint.outcomes"] == set()
    assert "kint.outcomes" in graph["kint.protocol.errors"]
    for name in [m for m in graph if m.startswith("kint.custody")]:
        assert not {m for m in _reach(graph, name) if m.startswith("kint.protocol")}, name
    assert "kint.outcomes" in graph["kint.custody.vault_cache"]
    from kint.outcomes import NOTHING_ANCHORED_OR_DROPPED, NOTHING_DROPPED

    for sentence in (NOTHING_DROPPED, NOTHING_ANCHORED_OR_DROPPED):
        written = sorted(str(path.relative_to(ROOT)) for path in modules.values()
                         if f'"{sentence}"' in path.read_text())
        assert written == ["outcomes.py"], (sentence, written)


def test_the_pid_lock_leans_on_no_worker_module() -> None:
    """The supervisor's pid lock (kint.supervisor.pidlock), which every client loads to ask
    who holds the home, reaches no module of the worker package, even inside a function:
    which process holds a lock file, as the kernel says, is kint.lock_table's, shared by the
    pid lock and a space's worker lock. It was kint.tenant_worker.lock_table, and the pid
    lock, a supervisor module, leaned on the worker package for it."""
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    reached = _reach(graph, "kint.supervisor.pidlock")
    assert "kint.lock_table" in reached
    assert not {m for m in reached if m.startswith("kint.tenant_worker")}, sorted(reached)
