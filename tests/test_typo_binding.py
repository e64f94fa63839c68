"""A typo does not bind a space (issue 14, item 5): `kint --db <a path that does not
exist>` and read-only commands must not take the tenant's space from its real store, and a
corrupt bindings file is kept for the user, never rewritten in place."""

from __future__ import annotations

import json


def test_a_mistyped_store_does_not_take_the_space(sandbox):
    from conftest import write_store

    write_store(sandbox.sibyl_db)
    sandbox.start()
    typo = sandbox.sibyl_db.parent / "memroy.db"
    for command in (["status"], ["history", "entity", "x", "--category", "c"]):
        sandbox.kint("--db", str(typo), *command)
    assert not typo.exists()
    out = sandbox.kint("status", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["store"]["path"] == str(sandbox.sibyl_db)
    bindings = json.loads((sandbox.kint_home / "run" / "bindings.json").read_text())
    assert all(b["db"] != str(typo) for b in bindings.values())
    # and after a restart the real store still owns its space
    sandbox.kint("supervisor", "stop", timeout=60)
    sandbox.start()
    assert sandbox.kint("status").returncode == 0


def test_a_corrupt_bindings_file_is_kept_not_rewritten(sandbox):
    from conftest import write_store

    write_store(sandbox.sibyl_db)
    run = sandbox.kint_home / "run"
    run.mkdir(parents=True, mode=0o700)
    sandbox.kint_home.chmod(0o700)
    (run / "bindings.json").write_text("{not json")
    sandbox.start()
    assert sandbox.kint("status").returncode == 0
    assert (run / "bindings.json.corrupt").read_text() == "{not json"


def test_a_binding_needs_its_store_and_once_held_costs_no_stat(tmp_path, monkeypatch):
    """Only a store that exists binds its space; a binding already held as it is asks
    nothing of the disk, so routing a call to a bound space costs no stat of its store."""
    import os

    from kint.supervisor.bindings import Binding, Bindings

    home = tmp_path / "kint"
    (home / "run").mkdir(parents=True, mode=0o700)
    store = tmp_path / "memory.db"
    sid, binding = "ab" * 32, Binding("t@hermes:p", "t", str(store))
    bindings = Bindings(home)
    bindings.bind_if_exists(sid, binding)  # the store does not exist (a typo)
    assert bindings.get(sid) is None and not bindings.path.exists()
    store.write_bytes(b"")
    bindings.bind_if_exists(sid, binding)
    assert Bindings(home).get(sid) == binding  # saved, and read back at a start

    stats: list[str] = []
    real_exists = os.path.exists
    monkeypatch.setattr(os.path, "exists", lambda p: stats.append(str(p)) or real_exists(p))
    for _ in range(100):  # a hundred calls routed to the bound space
        bindings.bind_if_exists(sid, binding)
    assert stats == []
    other = Binding("t@hermes:p", "t", str(tmp_path / "other.db"))
    bindings.bind_if_exists(sid, other)  # a different store is looked at, and is missing
    assert stats == [other.db] and bindings.get(sid) == binding
