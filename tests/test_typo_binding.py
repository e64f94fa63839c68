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


def test_a_folder_or_a_file_that_is_no_store_is_refused_and_binds_nothing(sandbox):
    """`kint --db ~/notes` (a folder) or `--db README.md`: one BAD_REQUEST line naming the
    path, exit 2, and nothing sent, so the tenant's space stays with its real store (a
    worker started on such a path failed at every start, the space was quarantined and
    bound to it, and the real store got SPACE_CONFLICT from then on)."""
    from conftest import write_store
    from machines_together import side_by_side

    write_store(sandbox.sibyl_db)
    notes = sandbox.root / "notes"
    notes.mkdir()
    readme = sandbox.root / "README.md"
    readme.write_text("# not a store\n")
    cases = ((notes, "is a folder, not a regular file"), (readme, "is not a SQLite database"))
    commands = (["status"], ["verify", "release rule"], ["export"])
    # Every refusal is made before anything is sent: one lane per path, side by side
    # (machines_together.side_by_side), each run checked after.
    lanes = side_by_side(*(lambda path=path: [sandbox.kint("--db", str(path), *command)
                                              for command in commands]
                           for path, _ in cases))
    for (path, why), outs in zip(cases, lanes):
        for command, out in zip(commands, outs):
            assert out.returncode == 2, (command, out.stdout, out.stderr)
            assert out.stderr.splitlines() == [
                f"kint: error: store {path} {why} [BAD_REQUEST]",
                "hint: check --db or SIBYL_MEMORY_DB: give the store file itself (memory.db)",
            ], out.stderr
    out = sandbox.kint("status", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["store"]["path"] == str(sandbox.sibyl_db)


def test_only_a_path_that_can_be_a_store_binds_and_a_bad_binding_gives_way(tmp_path):
    """A folder, a symlink or a file that is not SQLite never binds its space, and one such
    binding saved before (by a kint without this check) gives way at the next start."""
    from kint.supervisor.bindings import Binding, Bindings

    home = tmp_path / "kint"
    (home / "run").mkdir(parents=True, mode=0o700)
    folder = tmp_path / "notes"
    folder.mkdir()
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    store = tmp_path / "memory.db"
    store.write_bytes(b"")
    link = tmp_path / "link.db"
    link.symlink_to(store)
    bindings = Bindings(home)
    for path in (folder, text, link):
        bindings.bind_if_exists("ab" * 32, Binding("t", "t", str(path)))
        assert bindings.get("ab" * 32) is None, path
    (home / "run" / "bindings.json").write_text(json.dumps(
        {"cd" * 32: {"label": "t", "tenant": "t", "db": str(folder)}}))
    assert Bindings(home).get("cd" * 32) is None
    bindings = Bindings(home)
    bindings.bind_if_exists("ab" * 32, Binding("t", "t", str(store)))
    assert Bindings(home).get("ab" * 32) == Binding("t", "t", str(store))


def test_a_conflict_over_a_store_that_does_not_exist_says_so(sandbox):
    """The space is its real store's; a `--db` that does not exist is refused SPACE_CONFLICT,
    and the hint names the missing path, not KINT_SPACE (which would split the memory)."""
    from conftest import write_store

    write_store(sandbox.sibyl_db)
    assert sandbox.kint("status").returncode == 0
    typo = sandbox.sibyl_db.parent / "memroy.db"
    for command in (["status"], ["doctor"]):
        out = sandbox.kint("--db", str(typo), *command)
        assert out.returncode in (1, 2), out.stderr
        assert (f"hint: {typo} does not exist: check --db or SIBYL_MEMORY_DB"
                in out.stdout + out.stderr), (command, out.stdout, out.stderr)
    assert not typo.exists()


def test_a_client_that_is_not_the_command_line_cannot_quarantine_a_space_either(sandbox):
    """kint-server with SIBYL_MEMORY_DB naming a folder sends its requests as they are: the
    supervisor refuses the path before it starts a worker on it, so the tenant's space is
    never quarantined for its real store."""
    import pytest
    from conftest import write_store

    from kint.client import KintError

    write_store(sandbox.sibyl_db)
    sandbox.start()
    notes = sandbox.root / "notes"
    notes.mkdir()
    for _ in range(3):  # a worker failing at every start was quarantined after a few
        with pytest.raises(KintError) as refused:
            sandbox.call("status", notes)
        assert refused.value.code == "BAD_REQUEST", refused.value.message
        assert refused.value.message == f"store {notes} is a folder, not a regular file"
    out = sandbox.kint("status", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["store"]["path"] == str(sandbox.sibyl_db)


def test_a_space_serving_a_missing_store_does_not_move_to_a_folder(sandbox):
    """A space whose worker serves a store that does not exist moves to an existing store
    that asks for it; a folder (or any path that can never be a store) is refused instead,
    as for a space with no worker: moved there, its worker would fail at every start."""
    import pytest

    from kint.client import KintError

    sandbox.start()
    typo = sandbox.root / "memroy.db"
    sandbox.call("status", typo, timeout_s=60)  # the space's worker, on a missing store
    assert not typo.exists()
    notes = sandbox.root / "notes"
    notes.mkdir()
    with pytest.raises(KintError) as refused:
        sandbox.call("status", notes, timeout_s=60)
    assert refused.value.code == "BAD_REQUEST", refused.value.message
    assert refused.value.message == f"store {notes} is a folder, not a regular file"
