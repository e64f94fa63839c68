"""`kint doctor`'s proof that Sibyl's packages import, made once per state of the Python
environment and remembered in it.

Importing `sibyl_memory_mcp` loads the MCP SDK it serves with (pydantic, httpx, starlette,
uvicorn ...): about half a second of every doctor, for an answer that only changes when
the environment does. So the answer of a real import is remembered beside the venv
(`<venv>/kint-doctor-imports.json`), keyed by a fingerprint of everything an import
resolves through: the interpreter (its version and path), `sys.path` in its order (a
`PYTHONPATH` or another working folder is another environment), and for each of its
folders the names in it and its modification time. pip installs, upgrades, reinstalls
and removes a distribution by adding or removing entries in a site-packages folder (its
`*.dist-info` folder carries the version in its name), which changes both, so the next
doctor imports again and finds a broken install as it always did.

What it does not see: a file edited in place inside an installed package (no pip step
does that) or the source tree behind an editable install of a Sibyl package. Only a
success is remembered; a failure is looked at again by every doctor, with the import's
own error.

Only a venv's own folder keeps the memo (sys.prefix differs from sys.base_prefix): a
system Python's prefix is shared by every user and not theirs to write, and there every
doctor imports, as before. Whoever can write the memo can write the venv's code too, so
trusting it trusts nothing more than running from that venv already does.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from pathlib import Path

import orjson

from kint.paths import replace_file

MEMO_FILE = "kint-doctor-imports.json"
MEMO_FORMAT = 1
# Environments remembered at once (a shell with a PYTHONPATH and one without, a script run
# with `python -c` from another folder): each keeps its answer while the others run.
MEMO_KEPT = 8
DETAIL_CHARS = 200  # an import error can be long; the doctor's line stays one line


def memo_path() -> Path | None:
    """Where this environment's answer is kept, or None outside a venv."""
    if sys.prefix == sys.base_prefix:
        return None
    return Path(sys.prefix) / MEMO_FILE


def _path_entry(entry: str) -> list:
    """One `sys.path` entry as an import sees it: missing, a file (a zip) by its size and
    time, or a folder by its time and its names (the names catch a change inside one tick
    of a coarse clock). Not paths.file_signature: a folder is known by its names too, and
    the entry must be JSON for the memo's digest."""
    try:
        st = os.stat(entry or ".")
    except OSError:
        return [entry, None]
    if not os.path.isdir(entry or "."):
        return [entry, st.st_ino, st.st_size, st.st_mtime_ns]
    try:
        names = sorted(os.listdir(entry or "."))
    except OSError:
        names = None
    digest = hashlib.sha256("\0".join(names).encode(errors="surrogateescape")).hexdigest() \
        if names is not None else None
    return [entry, st.st_ino, st.st_mtime_ns, digest]


def environment_fingerprint(modules: list[str]) -> str:
    """What an import of `modules` resolves through, as one digest."""
    state = [MEMO_FORMAT, sys.version, sys.executable, sys.prefix, sorted(modules),
             [_path_entry(entry) for entry in sys.path]]
    return hashlib.sha256(orjson.dumps(state)).hexdigest()


def _remembered(memo: Path) -> list[str]:
    """The fingerprints of the latest environments whose imports were proven, newest first."""
    try:
        found = orjson.loads(memo.read_bytes())
    except (OSError, ValueError):
        return []
    proven = found.get("proven") if isinstance(found, dict) else None
    return [p for p in proven if isinstance(p, str)] if isinstance(proven, list) else []


def _remember(memo: Path, fingerprint: str) -> None:
    """Best effort: a venv this user may not write keeps no memo, and doctor imports."""
    kept = [fingerprint, *(p for p in _remembered(memo) if p != fingerprint)][:MEMO_KEPT]
    try:
        replace_file(memo, orjson.dumps({"format": MEMO_FORMAT, "proven": kept}), mode=0o644)
    except OSError:
        pass


def import_problems(modules: list[str]) -> list[str]:
    """Why each of `modules` does not import (empty when all do): from the memo when this
    environment proved them before, else by importing them. The fingerprint is taken after
    the imports, which may have written bytecode folders on the path."""
    memo = memo_path()
    if memo is not None and environment_fingerprint(modules) in _remembered(memo):
        return []
    problems = []
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as err:  # noqa: BLE001 - any import failure is the finding
            problems.append(f"{module} does not import: {type(err).__name__}: {err}"
                            [:DETAIL_CHARS])
    if not problems and memo is not None:
        _remember(memo, environment_fingerprint(modules))
    return problems
