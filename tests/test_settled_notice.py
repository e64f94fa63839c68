"""The settled notice's file (kint/tenant_worker/settled_notice.py) against what may stand
at its path, and against an enrolment that changed since it was kept. A real SpaceContext
over a temp KINT_HOME, with a real enrolment file; no worker, no chain: the notice is read
and removed by these functions alone (tests/test_pending_resend_settled.py has the commands
that say it)."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import asdict, fields, replace
from pathlib import Path

from unittest import mock

import orjson
import pytest

from kint.protocol.hints import WRITE_BACK_TAIL
from kint.tenant_worker import settled_notice
from kint.tenant_worker.config import WorkerConfig
from kint.tenant_worker.enrolment import Enrolment, save_enrolment
from kint.tenant_worker.overtaken import Overtaken
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.store import StoreReader
from kint.tenant_worker.unauthorized_journal import Unauthorized

SPACE = "ab" * 32
FOUND = Overtaken(2, 3, False)
ENROLMENT = Enrolment(space=SPACE, tenant="t", owner="0x" + "11" * 20, account="eoa",
                      contract="0x" + "22" * 20, chain_id=31337)


@pytest.fixture
def ctx(tmp_path):
    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    config = WorkerConfig(space_id=SPACE, label="t", tenant="t", db=str(tmp_path / "m.db"),
                          kint_home=str(home), back_address="ipc:///unused",
                          supervisor_pid=1, idle_beat_s=2.5)
    ctx = SpaceContext(config=config, store=StoreReader(config.db, "t"))
    save_enrolment(ctx.state.files["enrol"], ENROLMENT)
    return ctx


def _path(ctx):
    return ctx.config.home / f"settled-{ctx.config.space16}.json"


def test_a_kept_notice_is_found_until_said(ctx):
    settled_notice.keep(ctx, FOUND, settled_notice.vault(ctx))
    assert _path(ctx).stat().st_mode & 0o777 == 0o600
    assert settled_notice.found(ctx) == FOUND == settled_notice.found(ctx)
    settled_notice.said(ctx)
    assert settled_notice.found(ctx) is None and not _path(ctx).exists()


def test_a_directory_at_the_notice_is_logged_not_raised(ctx, caplog):
    """A directory where the notice goes: no notice, a line in the log, and said() does
    not raise either. It raised IsADirectoryError, which failed every push, pull, rekey and
    recovery-code (and the watcher's push) as INTERNAL."""
    _path(ctx).mkdir()
    with caplog.at_level(logging.WARNING, "kint.worker"):
        assert settled_notice.found(ctx) is None
        settled_notice.said(ctx)
    assert "cannot be removed (Is a directory)" in caplog.text, caplog.text
    assert _path(ctx).is_dir()


def test_a_fifo_at_the_notice_is_not_waited_on(ctx):
    """A FIFO where the notice goes: removed as a file that does not read, at once. It was
    opened to read and waited for a writer, under the head lock, holding the space."""
    os.mkfifo(_path(ctx), 0o600)
    got: list = []
    reader = threading.Thread(target=lambda: got.append(settled_notice.found(ctx)),
                              daemon=True)
    reader.start()
    reader.join(timeout=30)  # a guard against a hang, not a speed: it returns at once
    if reader.is_alive():  # let the stuck reader go: a writer opens the FIFO
        with open(_path(ctx), "wb"):
            pass
        reader.join()
        pytest.fail("found() waited on the FIFO for a writer")
    assert got == [None] and not _path(ctx).exists()


def test_a_link_at_the_notice_is_not_followed(ctx, tmp_path):
    """A symlink where the notice goes, to a file holding a notice: not read through
    (the link is removed, its target left)."""
    target = tmp_path / "elsewhere.json"
    target.write_bytes(orjson.dumps({"kind": "overtaken", "found": {
        "seq": 2, "head_seq": 3, "landed": False}}))
    _path(ctx).symlink_to(target)
    assert settled_notice.found(ctx) is None
    assert not _path(ctx).is_symlink() and target.exists()


def test_a_file_too_large_for_a_notice_is_not_read_whole(ctx):
    """Past MAX_BYTES it is no notice (whatever JSON follows the padding): removed."""
    settled_notice.keep(ctx, FOUND, settled_notice.vault(ctx))
    kept = _path(ctx).read_bytes()
    _path(ctx).write_bytes(b" " * settled_notice.MAX_BYTES + kept)
    assert settled_notice.found(ctx) is None and not _path(ctx).exists()


@pytest.mark.parametrize("changed", [{"owner": "0x" + "33" * 20},
                                     {"contract": "0x" + "44" * 20}, {"chain_id": 8453}],
                         ids=["owner", "contract", "chain"])
def test_a_notice_of_another_vault_is_dropped(ctx, changed):
    """A notice kept before connect moved the space to another owner, contract or chain
    (allowed while nothing of the old vault is seen here and no journal waits): dropped,
    not said. The new vault's first push was refused CHAIN_MOVED in the old vault's words."""
    settled_notice.keep(ctx, FOUND, settled_notice.vault(ctx))
    save_enrolment(ctx.state.files["enrol"], replace(ENROLMENT, **changed))
    assert settled_notice.found(ctx) is None and not _path(ctx).exists()


def test_a_notice_kept_without_its_vault_is_the_spaces(ctx):
    """One written before notices named their vault: taken as the space's."""
    _path(ctx).write_bytes(orjson.dumps({"kind": "overtaken", "found": {
        "seq": 2, "head_seq": 3, "landed": False}}))
    assert settled_notice.found(ctx) == FOUND


def test_an_enrolment_that_stops_reading_during_the_settlement_does_not_lose_what_it_found(
        ctx):
    """The journal settled and dropped, and the enrolment no longer reads by then (written
    over meanwhile): the settlement still returns what it found and keeps it, naming the
    vault it read before it began. It read the enrolment after dropping the journal, and
    the CORRUPT_STATE that raised lost the finding to the log. A stand-in for the chain's
    part only: `resolve_pending` here drops the journal and returns what a real one finds
    (test_pending_resend_settled.py has those), since nothing real can write over the
    enrolment at that one moment."""
    from kint.tenant_worker import rekey_settle

    pending = ctx.state.files["pending"]
    pending.write_bytes(b"{}")

    def settles(*_args):
        pending.unlink()
        ctx.state.files["enrol"].write_bytes(b"not an enrolment")
        return FOUND

    with mock.patch.object(rekey_settle, "resolve_pending", settles):
        outcome, found = rekey_settle.settle_journals(ctx, mock.sentinel.anchor,
                                                      ENROLMENT.owner,
                                                      sender=mock.sentinel.sender)
    assert (outcome, found) == (None, FOUND)
    kept = orjson.loads(_path(ctx).read_bytes())
    assert kept["vault"] == [ENROLMENT.owner, 31337, ENROLMENT.contract], kept
    save_enrolment(ctx.state.files["enrol"], ENROLMENT)
    assert settled_notice.found(ctx) == FOUND


REVOKED = Unauthorized(2, "0x" + "55" * 20, ENROLMENT.owner, False)


def test_what_holds_now_is_not_kept(ctx):
    """A notice said with `anchored_since` or `pulled_since` (what the store holds now)
    keeps no such field,
    so the previous kint, whose notice has none, reads it: it met a TypeError and removed
    the notice unsaid. Every field kept is one of that kint's."""
    settled_notice.keep(ctx, replace(REVOKED, anchored_since=True), settled_notice.vault(ctx))
    kept = orjson.loads(_path(ctx).read_bytes())["found"]
    before = {f.name for f in fields(Unauthorized)} - {"anchored_since"}
    assert set(kept) == before, kept
    settled_notice.keep(ctx, replace(FOUND, pulled_since=True), settled_notice.vault(ctx))
    kept = orjson.loads(_path(ctx).read_bytes())["found"]
    assert set(kept) == {f.name for f in fields(Overtaken)} - {"pulled_since"}, kept


def test_a_kept_anchored_since_is_not_trusted_nor_a_later_field_fatal(ctx):
    """A file holding `anchored_since: true` (as the kint before this one kept it) and a
    field a later kint may add: read with the fields this kint knows, `anchored_since`
    false until the store is counted again (no store here: the words as kept). A stored
    true was taken as it stood, saying nothing was left to anchor after new rows came; a
    field it did not know removed the notice unsaid."""
    found = {**asdict(REVOKED), "anchored_since": True, "later": 1}
    _path(ctx).write_bytes(orjson.dumps({"kind": "unauthorized", "found": found,
                                         "vault": settled_notice.vault(ctx)}))
    waits = settled_notice.waiting(ctx) or ""
    assert "nothing of it is left to anchor" not in waits and "epoch 2" in waits, waits
    assert settled_notice.found(ctx) == REVOKED and _path(ctx).exists()


def test_status_does_not_name_a_notice_of_another_vault(ctx):
    """`kint status` and `kint doctor` (`waiting`) leave out a notice kept for another
    vault than the space's now, as the next command drops it unsaid: they named an outcome
    no command would ever say. Read only: the file stays for that command."""
    settled_notice.keep(ctx, FOUND, settled_notice.vault(ctx))
    assert settled_notice.waiting(ctx) is not None
    save_enrolment(ctx.state.files["enrol"], replace(ENROLMENT, owner="0x" + "33" * 20))
    assert settled_notice.waiting(ctx) is None and _path(ctx).exists()
    assert settled_notice.found(ctx) is None and not _path(ctx).exists()


def _mirror_at(ctx, seq):
    """A mirror whose head is at `seq` (its rows are not what `_as_now` reads)."""
    from kint.tenant_worker.mirror_file import Head, Mirror

    ctx.state.save_mirror(Mirror(space_id=ctx.state.space_id, head=Head(seq=seq)))


@pytest.mark.parametrize("landed", [False, True], ids=["dropped", "landed"])
@pytest.mark.parametrize("mirror_seq, pulled", [
    (None, False), (FOUND.head_seq - 1, False), (FOUND.head_seq, True),
    (FOUND.head_seq + 1, True)], ids=["no-mirror", "one-below", "at-head", "past-head"])
def test_a_notice_is_pulled_past_once_the_mirror_reaches_the_head_it_names(
        ctx, landed, mirror_seq, pulled):
    """`pulled_since` (the push goes on past the notice, saying it) from a mirror at or
    above the head the notice was settled against, never below it: one below is the
    dropped journal's own prev (or a landed one recorded under the head), still behind,
    whose push refuses CHAIN_MOVED. No mirror (a fresh store) is not pulled either."""
    kept = replace(FOUND, landed=landed)
    settled_notice.keep(ctx, kept, settled_notice.vault(ctx))
    if mirror_seq is not None:
        _mirror_at(ctx, mirror_seq)
    assert settled_notice.found(ctx) == replace(kept, pulled_since=pulled)
    assert settled_notice.owes_nothing(settled_notice.found(ctx)) is pulled


def test_a_mirror_that_does_not_read_leaves_the_notice_behind_and_logged(ctx, caplog):
    """A mirror that does not read cannot say the store was pulled past the notice: the
    notice stays one to refuse on (the command's own read of the mirror names the file),
    and the log says why."""
    settled_notice.keep(ctx, FOUND, settled_notice.vault(ctx))
    ctx.state.files["mirror"].write_bytes(b"not a mirror")
    with caplog.at_level(logging.INFO, "kint.worker"):
        assert settled_notice.found(ctx) == FOUND
    assert "the mirror a kept notice is read against does not read" in caplog.text, \
        caplog.text


@pytest.mark.parametrize("unread", [False, True], ids=["kept", "unread"])
def test_memory_status_names_the_agents_tools_that_say_it(ctx, unread):
    """memory_status's `settled_notice` is `kint status`'s line, which named the commands
    that say the notice (`the next push, pull, rekey or recovery-code`): terminal commands,
    two of which kint-server has no tool for. The agent is given its own tools."""
    from kint.agent_server.results import status_result

    if unread:
        _path(ctx).write_bytes(b"{not json")
    else:
        settled_notice.keep(ctx, FOUND, settled_notice.vault(ctx))
    line = settled_notice.waiting(ctx)
    assert "rekey or recovery-code" in line, line  # the CLI's words kept
    said = status_result({"settled_notice": line})["settled_notice"]
    assert "rekey" not in said and "recovery-code" not in said, said
    assert "the agent's next memory_pull or memory_push" in said, said


@pytest.mark.parametrize("found", [FOUND, Unauthorized(2, "0x" + "ab" * 20, ENROLMENT.owner,
                                                       False)], ids=["overtaken", "unauthorized"])
def test_a_kept_dropped_notice_names_the_store_a_discarding_pull_moved_aside(ctx, found):
    """A `pull --discard-local` killed after it moved the store aside and before it said
    the notice left it kept, saying the rows the dropped journal carried were "still in the
    store": the restored one, which does not hold them. The pull names the copy in the kept
    notice as it moves it (the first copy named stays: one moved aside later held none)."""
    settled_notice.keep(ctx, found, settled_notice.vault(ctx))
    settled_notice.moved_aside(ctx, found, "/s/m.db.kint-backup-1")
    settled_notice.moved_aside(ctx, settled_notice.found(ctx), "/s/m.db.kint-backup-2")
    said = settled_notice.found(ctx)
    for line in (said.describe(), said.notice(), settled_notice.waiting(ctx)):
        assert "a discarding pull moved aside (/s/m.db.kint-backup-1), not anchored" in line, \
            line
        assert "still in the store" not in line and "backup-2" not in line, line
    assert "; write back from it what is still wanted" in said.notice(), said.notice()
    # Pulled up to the chain since (the pull's restore went that far before the kill): the
    # copy is still where the rows are.
    # `notice` too, with its write-back step: it was `describe` alone once pulled since.
    if isinstance(found, Overtaken):
        pulled = replace(said, pulled_since=True)
        assert "moved aside (/s/m.db.kint-backup-1)" in pulled.describe(), pulled.describe()
        assert pulled.notice() == f"{pulled.describe()}; {WRITE_BACK_TAIL}", pulled.notice()


def test_a_notice_that_owes_nothing_names_no_copy(ctx):
    """A kept notice whose rows were anchored since (Unauthorized) or whose chain the store
    was pulled up to since (Overtaken) before a discarding pull moved the store aside: the
    rows were gone from that store, yet the copy was named, and the notice (read as kept
    from then on, never worked out again) sent the user to write back from it rows it did
    not hold, "not anchored", with `kint push` to anchor them."""
    revoked = Unauthorized(2, "0x" + "ab" * 20, ENROLMENT.owner, False)
    for kept, owing_nothing in ((FOUND, replace(FOUND, pulled_since=True)),
                                (revoked, replace(revoked, anchored_since=True))):
        settled_notice.keep(ctx, kept, settled_notice.vault(ctx))
        settled_notice.moved_aside(ctx, owing_nothing, "/s/m.db.kint-backup-9")
        assert "backup-9" not in (settled_notice.waiting(ctx) or ""), settled_notice.waiting(ctx)
        assert settled_notice.found(ctx).moved_to is None


@pytest.mark.parametrize("unread", [False, True])
def test_a_journal_kept_for_its_key_names_the_copy_its_rows_went_to(ctx, unread):
    """An Unauthorized whose journal is kept (its transaction may still land) dropped no
    rows, but they are in the store, not anchored, until it lands: a store moved aside took
    them with it, and the notice said nothing of where they went (a key rotated instead
    drops the journal, and they are then only in that copy). It names the copy; no pull
    reaches it today (pending.py refuses a kept journal first), so it is right by
    construction."""
    kept = Unauthorized(2, "0x" + "ab" * 20, ENROLMENT.owner, False, kept="it may land",
                        unread=unread)
    settled_notice.keep(ctx, kept, settled_notice.vault(ctx))
    assert "moved aside" not in kept.describe()
    settled_notice.moved_aside(ctx, kept, "/s/m.db.kint-backup-1")
    said = settled_notice.found(ctx)
    copy = ("until it lands, the changes it carried are in the store a discarding pull "
            "moved aside (/s/m.db.kint-backup-1), not anchored")
    for line in (said.describe(), said.notice(), settled_notice.waiting(ctx)):
        assert copy in line, line
    assert said.notice() == f"{said.describe()}; {said.hint()}", said.notice()


@pytest.mark.parametrize("found", [FOUND, Unauthorized(2, "0x" + "ab" * 20, ENROLMENT.owner,
                                                       False)], ids=["overtaken", "unauthorized"])
def test_a_copy_named_before_the_move_is_where_the_rows_are_once_it_exists(ctx, tmp_path,
                                                                          found):
    """A discarding pull names the copy before its rename (`moving_aside`), then again
    after it (`moved_aside`). Killed between the rename and the second write, the notice
    said the rows were "still in the store" (the restored one, which does not hold them):
    the copy named before the move is where they are once it exists. Killed before the
    rename (the copy not there), the rows are still in the store, and it says so."""
    copy, store = tmp_path / "m.db.kint-backup-1", Path(ctx.config.db)
    store.write_bytes(b"the store")
    settled_notice.keep(ctx, found, settled_notice.vault(ctx))
    settled_notice.moving_aside(ctx, found, str(copy))
    assert "still in the store" in settled_notice.waiting(ctx)
    assert settled_notice.found(ctx).moved_to is None
    store.rename(copy)
    where = f"a discarding pull moved aside ({copy}), not anchored"
    said = settled_notice.found(ctx)
    for line in (said.notice(), settled_notice.waiting(ctx)):
        assert where in line and "still in the store" not in line, line
    # The pull's own rewrite after the rename leaves the same words.
    settled_notice.moved_aside(ctx, found, str(copy))
    assert settled_notice.found(ctx) == said


def test_a_file_of_the_copys_name_that_is_not_the_store_is_not_the_copy(ctx, tmp_path):
    """The copy named before the rename was taken as where the rows are as soon as any
    file had its name. A clock stepped back into the same second lets a later discard
    (whose notice owes nothing, so is not rewritten) choose the name again, after a pull
    killed before its rename left the rows in the store: that copy holds other rows. Only
    the store renamed (its device and inode, kept beside the name) is the copy."""
    copy, store = tmp_path / "m.db.kint-backup-1", Path(ctx.config.db)
    store.write_bytes(b"the store")
    settled_notice.keep(ctx, FOUND, settled_notice.vault(ctx))
    settled_notice.moving_aside(ctx, FOUND, str(copy))
    copy.write_bytes(b"another store, moved aside later under the same name")
    assert "still in the store" in settled_notice.waiting(ctx)
    assert settled_notice.found(ctx).moved_to is None


def test_a_copy_being_moved_to_by_no_path_does_not_read(ctx):
    """A kept `moving_to` that is not a string does not read, as `moved_to`'s."""
    _path(ctx).write_bytes(orjson.dumps({"kind": "overtaken", "found": asdict(FOUND),
                                         "vault": settled_notice.vault(ctx),
                                         "moving_to": 7}))
    assert "does not read (moving_to is int, not a path)" in settled_notice.waiting(ctx)


@pytest.mark.parametrize("rotated", [False, True])
@pytest.mark.parametrize("unread", [False, True])
def test_a_kept_journals_notice_says_what_its_refusal_says_to_do(rotated, unread):
    """A journal kept dropped no rows. No pull reaches its notice today (pending.py
    refuses it first), but were one to, it said "`kint push` anchors them" (fix30c's
    order), rows there were none of: it says what its refusal's hint says, as before."""
    kept = Unauthorized(3, "0x" + "ab" * 20, ENROLMENT.owner, rotated, kept="it may land",
                        unread=unread)
    notice, hint = kept.notice(), kept.refusal().hint
    assert hint is not None and notice == f"{kept.describe()}; {hint}", notice
    assert "anchors them" not in notice, notice


def test_an_enrolment_that_does_not_read_leaves_the_notice_as_it_was_and_logged(ctx, caplog):
    """The vault read to keep the notice again fails (the enrolment garbled after the
    settlement): the pull goes on (nothing raised, its store already moved), the notice is
    left as kept, and the log names the copy it could not name."""
    settled_notice.keep(ctx, FOUND, settled_notice.vault(ctx))
    before = _path(ctx).read_bytes()
    ctx.state.files["enrol"].write_bytes(b"not an enrolment")
    with caplog.at_level(logging.WARNING, "kint.worker"):
        settled_notice.moved_aside(ctx, FOUND, "/s/m.db.kint-backup-1")
    assert _path(ctx).read_bytes() == before
    assert "does not name the store moved aside to /s/m.db.kint-backup-1" in caplog.text, \
        caplog.text
    # Before the move, nothing moved yet: the line said "moved aside" there too.
    caplog.clear()
    with caplog.at_level(logging.WARNING, "kint.worker"):
        settled_notice.moving_aside(ctx, FOUND, "/s/m.db.kint-backup-2")
    assert "does not name the store being moved aside to /s/m.db.kint-backup-2" in \
        caplog.text, caplog.text


def test_a_copy_named_by_no_path_does_not_read(ctx, caplog):
    """A kept `moved_to` that is not a string (a file of another shape) read as it stood,
    and `kint status`, the pull and memory_status said the rows were "moved aside ({'x':
    [1, 2]})". It does not read: named so by `waiting`, removed with a line in the log by
    `found`, as any notice that does not read."""
    found = {**asdict(FOUND), "moved_to": {"x": [1, 2]}}
    _path(ctx).write_bytes(orjson.dumps({"kind": "overtaken", "found": found,
                                         "vault": settled_notice.vault(ctx)}))
    assert "does not read (moved_to is dict, not a path)" in settled_notice.waiting(ctx)
    with caplog.at_level(logging.WARNING, "kint.worker"):
        assert settled_notice.found(ctx) is None
    assert "moved_to is dict" in caplog.text and not _path(ctx).exists(), caplog.text


def test_a_journal_that_landed_names_no_copy(ctx):
    landed = Overtaken(2, 3, True)
    settled_notice.keep(ctx, landed, settled_notice.vault(ctx))
    settled_notice.moved_aside(ctx, landed, "/s/m.db.kint-backup-1")
    assert settled_notice.found(ctx) == landed
