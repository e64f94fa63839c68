"""A worker that starts with a push journal settles it at once (rekey_settle.settle_at_start),
and leaves it for the next push, pull or rekey when it cannot: a chain that does not
answer, a lock held, a key that does not open. A state file that does not read is one more
such case (review18): since lane left18, `connected` asks the mirror and watermark of a
space on another contract and raises CorruptStateFile when neither reads, and the push
journal's check reads the mirror too. That escaped the start as an exception with a
traceback in the log ("an op escaped its handler"); it is now one warning line, and the
next op names the file (CORRUPT_STATE)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from kint.tenant_worker import rekey_settle
from kint.tenant_worker.head_lock import HeadTurn
from kint.tenant_worker.state_format import CorruptStateFile


def test_an_unread_state_file_leaves_the_journal_for_the_next_op(tmp_path, monkeypatch,
                                                                  caplog):
    pending = tmp_path / "pending-0123456789abcdef.json"
    pending.write_text("{}")
    ctx = SimpleNamespace(
        head_ops=HeadTurn(),
        config=SimpleNamespace(space16="0123456789abcdef", home=tmp_path,
                               space_id="01" * 32),
        state=SimpleNamespace(files={"pending": pending,
                                     "head_lock": tmp_path / "head-0123456789abcdef.lock"}))
    mirror = tmp_path / "mirror-0123456789abcdef.json.gz"

    def unread(_ctx):
        raise CorruptStateFile(mirror, "is not valid JSON (truncated or garbled)")

    monkeypatch.setattr(rekey_settle, "connected", unread)
    with caplog.at_level(logging.WARNING, logger="kint.worker"):
        rekey_settle.settle_at_start(ctx)  # returns: nothing escapes the start
    said = [r.getMessage() for r in caplog.records]
    assert any("left for the next push, pull or rekey" in m and str(mirror) in m
               for m in said), said
    assert pending.exists()  # left as it was, for the next op
