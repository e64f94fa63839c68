"""The rekey journal (kint/custody/rekey_journal.py): what it keeps of a rotation in
flight, and that it keeps no key in the clear. The kills it is for: tests/test_key_faults.py.
"""

from __future__ import annotations

import pytest

from kint.custody.data_key import dek_id, new_data_key
from kint.custody.errors import NoLocalPassphrase, RekeyJournalCorrupt
from kint.custody.recovery_code import encode_recovery_code
from kint.custody.rekey_journal import (RekeyJournal, load_rekey_journal, rekey_journal_path,
                                        remove_rekey_journal, save_rekey_journal)
from kint.custody.wraps import KIND_SIGNATURE, wrap_data_key

SPACE = "ab" * 32
OTHER_SPACE = "cd" * 32


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("KINT_SESSION_PASSPHRASE", "the local secret of this test")
    return tmp_path


def _journal() -> RekeyJournal:
    dek, kek = new_data_key(), new_data_key()
    return RekeyJournal(dek, (wrap_data_key(dek, kek, KIND_SIGNATURE),), b"\x01" * 8)


def test_a_journal_reads_back_and_holds_no_key_in_the_clear(home):
    journal = _journal()
    path = save_rekey_journal(home, SPACE, journal)
    assert path == rekey_journal_path(home, SPACE) == home / f"rekey-{SPACE[:16]}.json"
    assert path.stat().st_mode & 0o777 == 0o600
    raw = path.read_bytes()
    for clear in (journal.dek, journal.dek.hex().encode(),
                  encode_recovery_code(journal.dek).encode()):
        assert clear not in raw
    back = load_rekey_journal(home, SPACE)
    assert back is not None and back.dek == journal.dek and back.wraps == journal.wraps
    assert back.old_dek_id == journal.old_dek_id and back.new_dek_id == dek_id(journal.dek)
    remove_rekey_journal(home, SPACE)
    assert load_rekey_journal(home, SPACE) is None


def test_a_journal_opens_only_for_its_space_and_its_local_secret(home, monkeypatch):
    path = save_rekey_journal(home, SPACE, _journal())
    moved = rekey_journal_path(home, OTHER_SPACE)
    moved.write_bytes(path.read_bytes())
    with pytest.raises(RekeyJournalCorrupt, match="does not open"):
        load_rekey_journal(home, OTHER_SPACE)
    monkeypatch.setenv("KINT_SESSION_PASSPHRASE", "another secret")
    with pytest.raises(RekeyJournalCorrupt, match="left as it is"):
        load_rekey_journal(home, SPACE)
    assert path.exists()  # never removed behind the user: it may be the only copy
    monkeypatch.delenv("KINT_SESSION_PASSPHRASE")
    monkeypatch.setenv("KINT_NO_KEYCHAIN", "1")
    with pytest.raises(NoLocalPassphrase):
        load_rekey_journal(home, SPACE)
    path.write_bytes(b"{not json")
    with pytest.raises(RekeyJournalCorrupt, match="truncated or garbled"):
        load_rekey_journal(home, SPACE)


def test_a_journal_keeps_how_long_the_new_key_is_kept_and_binds_it(home):
    """The rekey decides how long its new key is kept (`session`, or seconds) and the
    journal keeps it for whichever process settles the rotation, bound to the sealed key:
    edited, the journal does not open. One an older kint wrote has none (settled with the
    settling call's value), and still opens."""
    import orjson

    from kint.custody.vault_cache import SESSION

    for ttl in (SESSION, 2_592_000.0):
        journal = _journal()
        path = save_rekey_journal(home, SPACE, RekeyJournal(
            journal.dek, journal.wraps, journal.old_dek_id, key_ttl=ttl))
        assert load_rekey_journal(home, SPACE).key_ttl == ttl
    fields = orjson.loads(path.read_bytes())
    path.write_bytes(orjson.dumps({**fields, "key_ttl": SESSION}))
    with pytest.raises(RekeyJournalCorrupt, match="does not open"):
        load_rekey_journal(home, SPACE)
    older = save_rekey_journal(home, SPACE, _journal())
    assert "key_ttl" not in orjson.loads(older.read_bytes())
    assert load_rekey_journal(home, SPACE).key_ttl is None


def test_a_journal_with_its_key_ttl_is_a_version_an_older_kint_does_not_read(home):
    """A journal with `key_ttl` is version 2: an older kint reads version 1 only, and took
    one with the field for altered or sealed under another secret (the AAD binds it), which
    sent the user the wrong way; as version 2 it is one it does not read, left in place
    (kint 71f1910 says "is not a rekey journal (truncated or garbled)"). This kint reads
    both (and a version 1 with the field, as kint wrote it for a while), refuses a version
    2 without it, and names a newer version as one."""
    import orjson

    from kint.custody.vault_cache import SESSION

    journal = _journal()
    path = save_rekey_journal(home, SPACE, RekeyJournal(
        journal.dek, journal.wraps, journal.old_dek_id, key_ttl=SESSION))
    fields = orjson.loads(path.read_bytes())
    assert fields["v"] == 2 and fields["key_ttl"] == SESSION
    path.write_bytes(orjson.dumps({**fields, "v": 1}))
    assert load_rekey_journal(home, SPACE).key_ttl == SESSION
    path.write_bytes(orjson.dumps({k: v for k, v in fields.items() if k != "key_ttl"}))
    with pytest.raises(RekeyJournalCorrupt, match="truncated or garbled"):
        load_rekey_journal(home, SPACE)  # a version 2 without its key_ttl
    path.write_bytes(orjson.dumps({**fields, "v": 3}))
    with pytest.raises(RekeyJournalCorrupt, match="written by a newer kint .journal version 3"):
        load_rekey_journal(home, SPACE)
    assert path.exists()
    older = save_rekey_journal(home, SPACE, _journal())  # no key_ttl: still version 1
    assert orjson.loads(older.read_bytes())["v"] == 1


def _space_context(home):
    """The space's context as its worker holds it, for calling its ops in process."""
    from kint.tenant_worker.config import WorkerConfig
    from kint.tenant_worker.space import SpaceContext
    from kint.tenant_worker.store import StoreReader

    config = WorkerConfig(space_id=SPACE, label="t", tenant="t", db=str(home / "memory.db"),
                          kint_home=str(home), back_address="ipc:///unused",
                          supervisor_pid=1, idle_beat_s=2.5)
    return SpaceContext(config=config, store=StoreReader(config.db, "t"))


def _v2_fields(home) -> dict:
    import orjson

    from kint.custody.vault_cache import SESSION

    journal = _journal()
    path = save_rekey_journal(home, SPACE, RekeyJournal(
        journal.dek, journal.wraps, journal.old_dek_id, key_ttl=SESSION))
    return orjson.loads(path.read_bytes())


def test_a_newer_journal_is_refused_with_a_hint_that_keeps_it(home):
    """A newer kint's journal is not damaged: the hint of a garbled one (move it aside)
    would drop what may be the only copy of the key the chain's head is sealed under. Its
    own hint sends the user, and an agent's human, to the kint that wrote it."""
    import orjson

    from kint.agent_server.agent_hints import agent_error
    from kint.client import KintError
    from kint.protocol import ErrorCode
    from kint.protocol.hints import REKEY_JOURNAL_HINT, REKEY_JOURNAL_NEWER_HINT
    from kint.tenant_worker.custody_errors import as_protocol_error

    path = rekey_journal_path(home, SPACE)
    path.write_bytes(orjson.dumps({**_v2_fields(home), "v": 3}))
    with pytest.raises(RekeyJournalCorrupt) as raised:
        load_rekey_journal(home, SPACE)
    refused = as_protocol_error(raised.value)
    assert refused.code is ErrorCode.CORRUPT_STATE
    assert "newer kint" in refused.message and "left as it is" in refused.message
    assert refused.hint == REKEY_JOURNAL_NEWER_HINT != REKEY_JOURNAL_HINT
    assert "do not move the file aside" in refused.hint
    said = agent_error("memory_push", KintError(refused.code.value, refused.message,
                                                refused.hint)).hint
    assert said == f"stop and tell the human: {REKEY_JOURNAL_NEWER_HINT}"
    assert path.exists()
    # Its exit status is a garbled journal's, on purpose (docs/faults.md): v0.3.0's table
    # (09-cli.md) has none for state another version wrote; the hint tells them apart.
    from kint.commands.exit_codes import ERROR, PUSH_PULL_REFUSED, exit_code_for

    for command in ("push", "compact", "rekey", "pull", "join"):
        assert exit_code_for(command, refused.code) == PUSH_PULL_REFUSED, command
    for command in ("recovery-code", "status", "doctor", "verify", "connect"):
        assert exit_code_for(command, refused.code) == ERROR, command


def test_doctor_keeps_a_newer_kints_journal_where_it_moved_a_garbled_one_aside(home):
    """doctor's "state files" check gave one hint for every file it names, "move the file
    named aside", a newer kint's rekey journal too: each file now gets the hint of the op
    that meets it."""
    import orjson

    from kint.protocol.hints import REKEY_JOURNAL_HINT, REKEY_JOURNAL_NEWER_HINT
    from kint.tenant_worker.doctor import doctor

    home.chmod(0o700)
    ctx = _space_context(home)
    path = rekey_journal_path(home, SPACE)
    path.write_bytes(orjson.dumps({**_v2_fields(home), "v": 3}))

    def state_files() -> dict:
        checks = [c for c in doctor(ctx, {})["checks"] if c["name"] == "state files"]
        assert len(checks) == 1 and not checks[0]["ok"], checks
        assert str(path) in checks[0]["detail"], checks
        return checks[0]

    assert state_files()["hint"] == REKEY_JOURNAL_NEWER_HINT
    path.write_bytes(b'{"v": 2, "new_dek_id": "')
    assert state_files()["hint"] == REKEY_JOURNAL_HINT
    assert path.exists()


@pytest.mark.parametrize("version", [True, 2.0, 1.0, "2", None, 0, -3])
def test_a_journal_whose_version_is_not_a_whole_number_it_reads_is_garbled(home, version):
    """`v` is an integer: `true` read as 1, or `2.0` as 2, was a journal whose version no
    kint wrote taken for one it did."""
    import orjson

    path = rekey_journal_path(home, SPACE)
    path.write_bytes(orjson.dumps({**_v2_fields(home), "v": version}))
    with pytest.raises(RekeyJournalCorrupt, match="truncated or garbled"):
        load_rekey_journal(home, SPACE)
    assert path.exists()


@pytest.mark.parametrize("ttl", [86400, 86400.0, ["session"], {"s": 1}, True])
def test_a_journal_whose_key_ttl_is_not_text_is_corrupt(home, ttl):
    """`key_ttl` is `session` or the seconds as text; any other JSON value is a journal
    that was garbled, never a TTL guessed from it."""
    import orjson

    journal = _journal()
    path = save_rekey_journal(home, SPACE, RekeyJournal(
        journal.dek, journal.wraps, journal.old_dek_id, key_ttl=86400.0))
    fields = orjson.loads(path.read_bytes())
    path.write_bytes(orjson.dumps({**fields, "key_ttl": ttl}))
    with pytest.raises(RekeyJournalCorrupt, match="truncated or garbled"):
        load_rekey_journal(home, SPACE)
    assert path.exists()


def test_a_journal_that_does_not_open_is_refused_with_what_to_do(tmp_path):
    from kint.protocol import ErrorCode
    from kint.tenant_worker.custody_errors import as_protocol_error

    refused = as_protocol_error(RekeyJournalCorrupt(tmp_path / "rekey-x.json", "is garbled"))
    assert refused.code is ErrorCode.CORRUPT_STATE
    assert "left as it is" in refused.message and "kint connect" in refused.hint


def test_finishing_a_rotation_keeps_a_key_added_under_the_new_data_key(home):
    """A rekey killed once its snapshot landed, then `kint connect --add-passphrase` before
    the rotation was settled (the chain unreadable at the worker's start): connect took the
    new key from the head header and added a passphrase wrap. Settling the journal later
    rewrites the wraps file: it keeps that wrap, and the enrolment names it. Before, the
    journal's wraps replaced the file, and the added passphrase stopped opening the
    vault at the next push."""
    import time

    from kint.custody.vault_cache import (DEFAULT_TTL_SECONDS, MEMORY, read_cached_key,
                                          vault_cache_path)
    from kint.custody.wraps import KIND_PASSPHRASE, read_wraps, write_wraps
    from kint.tenant_worker.enrolment import Enrolment, load_enrolment, save_enrolment
    from kint.tenant_worker.rekey_settle import keep_new_key

    home.chmod(0o700)
    ctx = _space_context(home)
    journal = _journal()
    added = wrap_data_key(journal.dek, new_data_key(), KIND_PASSPHRASE)
    write_wraps(home, SPACE, journal.new_dek_id, journal.wraps + (added,))
    owner = "0x" + "11" * 20
    save_enrolment(ctx.state.files["enrol"], Enrolment(
        space=SPACE, tenant="t", owner=owner, account="eoa", contract="0x" + "22" * 20,
        chain_id=31337, key_tags=[w.tag.hex() for w in journal.wraps + (added,)]))

    assert journal.key_ttl is None  # as an older kint's journal: the settling call decides
    keep_new_key(ctx, journal)
    kept = read_wraps(home, SPACE)
    assert kept is not None and kept.dek_id == journal.new_dek_id
    assert kept.wraps == journal.wraps + (added,)
    enrolment = load_enrolment(ctx.state.files["enrol"])
    assert enrolment.key_tags == [w.tag.hex() for w in kept.wraps]
    # No key held in memory and no KINT_KEY_TTL: the space's own value, 24 h on disk.
    cached = read_cached_key(home, SPACE)
    assert cached.where == "file" and cached.dek == journal.dek
    assert abs(cached.expires_at - (time.time() + DEFAULT_TTL_SECONDS)) < 600

    # Wraps under another data key (the one the rotation replaced) are not carried. The
    # old key held in memory only (KINT_KEY_TTL=session): the new one is kept there too,
    # never on disk (renew()'s rule, data_key.rotated_key_ttl).
    old = wrap_data_key(new_data_key(), new_data_key(), KIND_PASSPHRASE)
    write_wraps(home, SPACE, b"\x01" * 8, (old,))
    MEMORY.put(SPACE, new_data_key())
    try:
        keep_new_key(ctx, journal)
        assert read_wraps(home, SPACE).wraps == journal.wraps
        cached = read_cached_key(home, SPACE)
        assert cached.where == "memory" and cached.dek == journal.dek
        assert not vault_cache_path(home, SPACE).exists()
    finally:
        MEMORY.forget(SPACE)
