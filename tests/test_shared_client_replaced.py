"""The space's shared Sibyl client is rebuilt for a store replaced just after the client
opened it (kint/tenant_worker/shared_client.py, `SpaceClient.get`).

`get` records which file (device, inode) the client was built on, and builds a new client
when the path names another file. It read that file id *after* opening the client: a store
replaced between the open and that read was recorded as the client's own, so the client
stayed on the old, unlinked file for good, and what an op wrote through it was lost (the
case the module exists for). The id is now read before the open.

Real parts: a real Sibyl store, the worker's real SpaceClient and Sibyl's client as
`open_client` makes it. One thing is the test's: the store is replaced (renamed aside, a
second real store renamed in, as a restore or another tool would) right after the real
`open_client` returns, where no real timing could put it every time. Sibyl's account gate
is its NullEntitlementGate (its test support): no credentials exist here.
"""

from __future__ import annotations

import os
from pathlib import Path

from conftest import TENANT, write_store


def _replace(db: Path, other: Path) -> None:
    """The store at `db` moved aside (with what SQLite keeps beside it) and `other` put in
    its place: the path now names another file."""
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{db}{suffix}").exists():
            os.replace(f"{db}{suffix}", f"{db}.aside{suffix}")
    os.replace(other, db)


def test_a_store_replaced_just_after_the_client_opened_it_gets_a_new_client(
        tmp_path, monkeypatch):
    from sibyl_memory_client import testing

    from kint import sibyl_client
    from kint.tenant_worker.shared_client import SpaceClient

    monkeypatch.setattr(sibyl_client, "GATE_FACTORY",
                        lambda _path: testing.NullEntitlementGate())
    db = write_store(tmp_path / "memory.db", {"first": {"rule": "the first store's"}})
    other = write_store(tmp_path / "other" / "memory.db",
                        {"second": {"rule": "the store put in its place"}})
    real_open = sibyl_client.open_client
    opened: list[object] = []

    def open_then_replaced(*args, **kw):
        client = real_open(*args, **kw)
        if not opened:  # the first open only: the store is replaced as it returns
            _replace(db, other)
        opened.append(client)
        return client

    monkeypatch.setattr(sibyl_client, "open_client", open_then_replaced)
    space = SpaceClient(str(db), TENANT, tmp_path / "kint")
    with space.using():
        first = space.get()
        again = space.get()
        assert len(opened) == 2 and again is not first, (
            "the client stayed on the store file replaced under it")
        assert again.get_entity("rules", "second")["body"] == {
            "rule": "the store put in its place"}
    with space.released("the test's end"):
        pass
