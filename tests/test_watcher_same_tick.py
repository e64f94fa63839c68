"""The store watcher does not take a push for the whole change when a commit after the
push's read may have left the store's signature as it was (kint/tenant_worker/watcher.py,
store.SettledRule).

After a push, the watcher cleared the store's dirty mark when the signature read again
matched the one read before the push. A commit within one tick of the files' clock, inside
the size a restarted WAL already had, changes neither times nor sizes
(tests/test_store_same_tick.py): one that landed while the push ran was never pushed, and
the store read as clean until the next write. A signature read within two seconds of the
files' last change now clears nothing: the store stays dirty, and the next tick looks
again. A held push likewise is tried again at the next tick, not only at the next change.

Real parts: a real Watcher over a real store written by Sibyl's own client, its clock in
the test's hands. Two stand-ins: the push (it records, and makes the second commit while
"running", where a real push's timing cannot be had), and, as in
tests/test_store_same_tick.py, the files' times set back after that commit, which is what
a commit inside the same tick leaves.
"""

from __future__ import annotations

import time

import pytest

from conftest import sibyl_client, write_store
from kint.protocol import ErrorCode, ProtocolError
from support.same_tick import restarted_wal, same_tick_commit


@pytest.mark.parametrize("held", [False, True])
def test_a_commit_inside_the_tick_of_a_pushed_change_is_looked_at_again(tmp_path,
                                                                         monkeypatch, held):
    """The push goes through (the store must stay dirty), or is held (its hold must not
    wait for a change it may have missed: the commit puts back what held it)."""
    from kint.tenant_worker.watcher import Watcher

    db = str(write_store(tmp_path / "memory.db"))
    monkeypatch.setenv("KINT_QUIET_SECONDS", "0")
    monkeypatch.setenv("KINT_SIZE_TRIGGER_BYTES", "1000000")
    client = sibyl_client(db)
    wal_size = restarted_wal(db, client)
    pushed: list[str] = []

    def push(reason: str) -> dict:
        pushed.append(reason)
        if len(pushed) == 1:  # lands after the push read its rows, inside their tick
            same_tick_commit(db, client, wal_size, "while-pushing")
            if held:
                raise ProtocolError(ErrorCode.HELD, "held")
        return {"message": "anchored"}

    try:
        watcher = Watcher(db, lambda: (1, 0), push, generation=lambda: 0)
        now = time.monotonic()
        client.set_entity("notes", "to-push", {"n": 1})  # a write just now: its tick
        watcher.tick(now)
        assert pushed == ["watcher"]
        assert watcher.dirty, "the commit the push did not read was taken as pushed"
        watcher.tick(now + 1)  # the next tick pushes what the first may have missed
        assert pushed == ["watcher", "watcher"], "the commit inside the tick was not pushed"
    finally:
        client.storage.close()
