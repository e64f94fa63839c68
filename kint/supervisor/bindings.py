"""Which store each space is bound to, kept across supervisor restarts.

A space is one store: a second store asking for a space already bound is refused
SPACE_CONFLICT. The supervisor learns bindings from the requests it routes; kept only in
memory, a restart (a crash, `kint supervisor stop`, an upgrade) forgot them and let the
next store take the space. They are saved to run/bindings.json (0600, atomic) as they are
made and read back at start. A binding whose store file no longer exists gives way to the
next store that asks (a store moved or deleted is not a conflict).

Only a path that can be a Sibyl store binds: a folder, a symlink or a file that is not
SQLite (`kint --db ~/notes`) never opens, and bound it would shut the tenant's real store
out of its space for good (kint.spaces.store_problem).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import orjson

from kint.paths import atomic_write, run_dir
from kint.spaces import store_problem

log = logging.getLogger("kint.supervisor")

BINDINGS_FILE = "bindings.json"
MAX_BINDINGS = 10_000  # far past any machine's stores: a bigger file is not ours


@dataclass(frozen=True)
class Binding:
    label: str
    tenant: str
    db: str


def read_bindings(path: Path) -> tuple[dict[str, Binding], int]:
    """The well-formed bindings in `path` and how many entries it held ({} when there is no
    file). ValueError, saying why, when the file cannot be trusted. Changes nothing."""
    try:
        raw = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return {}, 0
    except (OSError, orjson.JSONDecodeError) as err:
        raise ValueError(f"it does not read ({err})") from err
    if not isinstance(raw, dict) or len(raw) > MAX_BINDINGS:
        raise ValueError("it is not a map of bindings")
    out = {sid: Binding(item["label"], item["tenant"], item["db"])
           for sid, item in raw.items()
           if isinstance(sid, str) and len(sid) == 64 and isinstance(item, dict)
           and all(isinstance(item.get(k), str) for k in ("label", "tenant", "db"))}
    return out, len(raw)


def bound_stores(home: Path) -> list[Path]:
    """The stores a supervisor starting now would hold bound (none when the file cannot be
    trusted: it would set the file aside), read without changing anything: `kint doctor`
    keeps their folders out of its walk of the home, as that start's tightening does."""
    try:
        return [Path(b.db) for b in read_bindings(run_dir(home) / BINDINGS_FILE)[0].values()]
    except ValueError:
        return []


class Bindings:
    def __init__(self, home: Path) -> None:
        self.path = run_dir(home) / BINDINGS_FILE
        self._by_space: dict[str, Binding] = self._load()

    def _load(self) -> dict[str, Binding]:
        try:
            out, held = read_bindings(self.path)
        except ValueError as err:
            return self._set_aside(str(err))
        if len(out) != held:
            log.warning("ignoring malformed entries of %s", self.path)
        return out

    def _set_aside(self, why: str) -> dict[str, Binding]:
        """A corrupt bindings file is never rewritten in place: it is kept, renamed, for the
        user to read, and the supervisor starts with no bindings (it relearns them from
        the stores that exist)."""
        aside = self.path.with_name(f"{BINDINGS_FILE}.corrupt")
        try:
            os.replace(self.path, aside)
        except OSError:
            aside = self.path
        log.warning("%s cannot be trusted (%s); kept as %s, and the spaces are bound again as "
                    "their stores are used", self.path, why, aside)
        return {}

    def get(self, space_id: str) -> Binding | None:
        """The space's binding, unless its store is gone or can never be one (then it is
        forgotten)."""
        bound = self._by_space.get(space_id)
        if bound is not None and not _is_store(bound.db):
            log.info("space %s: %s is no store; the binding gives way", space_id[:16],
                     bound.db)
            del self._by_space[space_id]
            self._save()
            return None
        return bound

    def stores(self) -> list[Path]:
        """Every bound store's path (kept out of the walk that tightens KINT_HOME)."""
        return [Path(b.db) for b in self._by_space.values()]

    def holds(self, space_id: str, label: str, tenant: str, db: str) -> bool:
        """Whether the space is bound to this store as it is: asked on every routed call,
        so without building a Binding to compare."""
        bound = self._by_space.get(space_id)
        return (bound is not None and bound.db == db and bound.tenant == tenant
                and bound.label == label)

    def bind_if_exists(self, space_id: str, binding: Binding) -> None:
        """Bind the space to its store, if the store exists and can be one: only such a
        store binds its space (a mistyped `--db` never takes a space from its real store:
        docs/faults.md). A binding already held as it is asks nothing of the disk, so
        routing a call to a bound space costs no stat of its store."""
        if self._by_space.get(space_id) == binding or not _is_store(binding.db):
            return
        self._by_space[space_id] = binding
        self._save()

    def _save(self) -> None:
        data = {sid: {"label": b.label, "tenant": b.tenant, "db": b.db}
                for sid, b in self._by_space.items()}
        try:
            atomic_write(self.path, orjson.dumps(data))
        except OSError as err:
            log.warning("could not save %s: %s", self.path, err)


def _is_store(db: str) -> bool:
    """`db` exists and can be a Sibyl store."""
    return os.path.exists(db) and store_problem(db) is None
