"""Where connect takes the data key from, and what it refuses (05-keys.md, "One data key,
many wraps", "The recovery code" and "Rotate the data key"), decided from what the chain and
this machine hold and nothing else: the choosing functions of kint/tenant_worker/connect_key.py
(and recovery_binding.py, which binds a recovery code),
fed v0.3.0's vector wraps (tests/vectors/kint-v0.3.0.json) and headers built here.

The vault here is the vectors' data key (0x22 x 32) under three keys; a rotation moves it to
a new data key (0x44 x 32) that carries only the passphrase key, so the wallet signature key
is the one a rotation dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from kint.custody.data_key import dek_id
from kint.custody.recovery_code import encode_recovery_code
from kint.custody.wraps import (KIND_PASSPHRASE, KIND_SIGNATURE, Wrap, WrapsFile, unwrap,
                                wrap_data_key)
from kint.epochs.envelope import Header
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker.connect_key import (SOURCE_CODE, SOURCE_FRESH, SOURCE_HEADER,
                                            SOURCE_LOCAL, SuppliedKey, key_from_recovery_code,
                                            key_from_supplied, with_extra_passphrase)
from kint.tenant_worker.head_header import ReadableHeader
from kint.tenant_worker.recovery_binding import HeldHere

V = json.loads((Path(__file__).parent / "vectors" / "kint-v0.3.0.json").read_text("utf-8"))
OWNER = V["owner"]
SPACE = bytes.fromhex(V["space"])
DEK = bytes.fromhex(V["dek"])
WRAPS = tuple(Wrap.decode(bytes.fromhex(w["bytes"])) for w in V["wraps"])
SIGNATURE_KEY = SuppliedKey(KIND_SIGNATURE, bytes.fromhex(V["keks"]["signature"]["kek"]))
PASSPHRASE_KEY = SuppliedKey(KIND_PASSPHRASE, bytes.fromhex(V["keks"]["passphrase"]["kek"]))
STRANGER_KEY = SuppliedKey(KIND_SIGNATURE, b"\x55" * 32)

NEW_DEK = b"\x44" * 32
NEW_WRAPS = (wrap_data_key(NEW_DEK, PASSPHRASE_KEY.kek, KIND_PASSPHRASE),)
UNREADABLE = ProtocolError(ErrorCode.RPC_UNAVAILABLE, "cannot read the chain head: timeout")


def head(dek: bytes, wraps: tuple[Wrap, ...], seq: int = 3) -> ReadableHeader:
    header = Header(flags=0, nonce=bytes(12), rows_root=bytes(32), dek_id=dek_id(dek),
                    bucket=4096, wraps=wraps)
    return ReadableHeader(seq, 100 + seq, header, header.encode())


def local(dek: bytes, wraps: tuple[Wrap, ...]) -> WrapsFile:
    return WrapsFile(SPACE, dek_id(dek), wraps)


def refusal(fn, *args) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        fn(*args)
    return info.value


def test_the_vector_wraps_carry_the_keys_these_tests_name():
    assert {w.tag for w in WRAPS} >= {SIGNATURE_KEY.tag, PASSPHRASE_KEY.tag}
    assert STRANGER_KEY.tag not in {w.tag for w in WRAPS}


# --- a supplied key --------------------------------------------------------------------


def test_local_wraps_answer_while_they_hold_the_key_the_head_was_sealed_with():
    found = key_from_supplied(OWNER, SIGNATURE_KEY, head(DEK, WRAPS[1:]), local(DEK, WRAPS),
                               None)
    assert (found.source, found.dek, found.wraps) == (SOURCE_LOCAL, DEK, WRAPS)
    assert found.key_tag == SIGNATURE_KEY.tag and not found.fresh


def test_after_a_rotation_the_header_decides_over_local_wraps():
    """Local wraps from before a rotation give way to the head header, whose wrap of this
    key opens the new data key; the wraps kept are the header's."""
    found = key_from_supplied(OWNER, PASSPHRASE_KEY, head(NEW_DEK, NEW_WRAPS),
                               local(DEK, WRAPS), None)
    assert (found.source, found.dek, found.wraps) == (SOURCE_HEADER, NEW_DEK, NEW_WRAPS)


def test_a_key_the_rotation_dropped_is_told_so():
    err = refusal(key_from_supplied, OWNER, SIGNATURE_KEY, head(NEW_DEK, NEW_WRAPS),
                  local(DEK, WRAPS), None)
    assert err.code is ErrorCode.WRONG_KEY
    assert str(err) == (f"the data key of this vault was rotated and this key (tag "
                        f"{SIGNATURE_KEY.tag.hex()[:8]}) was not carried over: it opens the "
                        f"epochs sealed before the rotation and nothing after it")


@pytest.mark.parametrize("held", [None, "other-vault"], ids=["no-local-wraps",
                                                              "local-wraps-without-this-key"])
def test_a_key_no_wrap_in_the_head_carries_is_the_wrong_key(held):
    """With no local wrap of this key, a dropped key and a wrong one look alike: the
    ordinary wrong-key refusal (05-keys.md, "Rotate the data key")."""
    mine = local(NEW_DEK, NEW_WRAPS) if held else None
    for key in (STRANGER_KEY, SIGNATURE_KEY):
        err = refusal(key_from_supplied, OWNER, key, head(NEW_DEK, NEW_WRAPS), mine, None)
        assert err.code is ErrorCode.WRONG_KEY
        assert str(err) == (f"this key (tag {key.tag.hex()[:8]}) does not open the vault "
                            f"anchored under {OWNER}: the wraps in the head epoch carry "
                            f"different tags. Wrong wallet, wrong passphrase, or wrong tenant.")


def test_a_header_wrap_that_opens_another_data_key_is_refused():
    """The tag finds the wrap, and the key it opens must be the one whose dek_id the header
    names: a wrap copied from another vault does not hand over that vault's key."""
    err = refusal(key_from_supplied, OWNER, SIGNATURE_KEY, head(NEW_DEK, WRAPS), None, None)
    assert err.code is ErrorCode.WRONG_KEY and "dek_id mismatch" in str(err)
    assert "no rekey's epoch" in str(err) and "--over-skipped" in err.hint, err.hint
    # A wrap that opens was made with this key: unless it is a copy, its writer holds the
    # key, and the way out rotates it away too (a wrap that does not open says nothing of it).
    assert "whoever wrote it holds this key too" in err.hint and "--drop-missing" in err.hint


def test_a_forged_wrap_under_this_machines_tag_is_no_rekeys_epoch():
    """A kek tag is public (every header carries it): a leaked session key can put this
    machine's on random bytes, so its epoch passes the pull for another machine's rekey
    (data_key.wrapped_for_here), whose hint is to connect again. That connect finds the
    wrap does not open and says so: no rekey made the epoch, the key is to be revoked and
    `kint compact --over-skipped` anchors over it. Before, the custody error's own words
    (`its bytes were altered`) with no way past them. The GAP hint says the same."""
    forged = Wrap(KIND_SIGNATURE, SIGNATURE_KEY.tag, b"\x01" * 12, b"\x02" * 48)
    err = refusal(key_from_supplied, OWNER, SIGNATURE_KEY, head(NEW_DEK, (forged,)), None,
                  None)
    assert err.code is ErrorCode.WRONG_KEY, err
    assert f"(tag {SIGNATURE_KEY.tag.hex()[:8]}) does not open: this is no rekey's epoch" \
        in str(err), str(err)
    assert "revokes the leaked session key" in err.hint and \
        "`kint compact --over-skipped`" in err.hint, err.hint
    from kint.tenant_worker.push_refusals import gap_hint
    rotated = gap_hint(SimpleNamespace(rotated_gap=True, unread_gap=None))
    assert "no rekey made it" in rotated and err.hint in rotated, rotated


def test_an_unreadable_chain_falls_back_to_local_wraps_and_never_starts_a_vault():
    found = key_from_supplied(OWNER, SIGNATURE_KEY, None, local(DEK, WRAPS), UNREADABLE)
    assert (found.source, found.dek) == (SOURCE_LOCAL, DEK)
    for held in (None, local(NEW_DEK, NEW_WRAPS)):
        assert refusal(key_from_supplied, OWNER, SIGNATURE_KEY, None, held,
                       UNREADABLE) is UNREADABLE


def test_a_fresh_vault_only_when_the_chain_was_read_empty_and_no_wraps_are_here():
    found = key_from_supplied(OWNER, SIGNATURE_KEY, None, None, None)
    assert found.source == SOURCE_FRESH and found.fresh and len(found.dek) == 32
    (wrap,) = found.wraps
    assert (wrap.kind, wrap.tag) == (KIND_SIGNATURE, SIGNATURE_KEY.tag)
    err = refusal(key_from_supplied, OWNER, SIGNATURE_KEY, None, local(NEW_DEK, NEW_WRAPS),
                  None)
    assert err.code is ErrorCode.WRONG_KEY and "does not open the vault" in str(err)
    # No epoch on chain, so no head epoch was read: the wraps compared are this machine's
    # (a vault started here and not anchored yet, a wrong passphrase typed at the second
    # connect). The refusal named "the wraps in the head epoch" of "the vault anchored".
    assert str(err) == (f"this key (tag {SIGNATURE_KEY.tag.hex()[:8]}) does not open the "
                        f"vault of {OWNER} this machine holds: its wraps here carry "
                        f"different tags (no epoch header was read from the chain). Wrong "
                        f"wallet, wrong passphrase, or wrong tenant.")


# --- the recovery code -----------------------------------------------------------------


def code_refusal(code_dek: bytes, header, held: HeldHere,
                 chain_error=UNREADABLE) -> ProtocolError:
    return refusal(key_from_recovery_code, encode_recovery_code(code_dek), OWNER, header, held,
                   chain_error)


def test_a_recovery_code_is_bound_to_the_head_header_and_keeps_its_wraps():
    found = key_from_recovery_code(encode_recovery_code(DEK), OWNER, head(DEK, WRAPS), HeldHere(),
                                None)
    assert (found.source, found.dek, found.wraps) == (SOURCE_CODE, DEK, WRAPS)
    assert found.key_tag is None and not found.fresh


def test_a_recovery_code_of_another_vault_is_refused():
    """After a rotation the old code no longer belongs to the vault; nor does a code
    checked against this machine's wraps when the chain cannot be read."""
    for header, held in ((head(NEW_DEK, NEW_WRAPS), HeldHere(wraps=local(DEK, WRAPS))),
                         (None, HeldHere(wraps=local(NEW_DEK, NEW_WRAPS)))):
        err = code_refusal(DEK, header, held)
        assert err.code is ErrorCode.WRONG_KEY
        assert str(err) == ("this recovery code does not belong to the vault anchored under "
                            "this owner")
    found = key_from_recovery_code(encode_recovery_code(NEW_DEK), OWNER, None,
                                HeldHere(wraps=local(NEW_DEK, NEW_WRAPS)), UNREADABLE)
    assert (found.dek, found.wraps) == (NEW_DEK, NEW_WRAPS)


def test_with_no_header_the_first_source_this_machine_holds_decides():
    """05-keys.md: with the chain unread, the cached data key, else (this kint) the wraps
    file, else the newest cached epoch header. The first there decides, so an old code is
    refused on a machine whose cached key was rotated, though an older cached header would
    take it; each refusal names the source."""
    old_header = (2, head(DEK, WRAPS).header)
    rotated = HeldHere(cached_key=NEW_DEK, wraps=local(DEK, WRAPS), newest_cached=old_header)
    err = code_refusal(DEK, None, rotated)
    assert "checked against this machine's cached data key" in err.hint
    err = code_refusal(DEK, None, HeldHere(wraps=local(NEW_DEK, NEW_WRAPS),
                                           newest_cached=old_header))
    assert "checked against this machine's wraps file" in err.hint
    err = code_refusal(NEW_DEK, None, HeldHere(newest_cached=old_header))
    assert "the header of epoch 2 in this machine's epoch cache" in err.hint
    # Bound by the cached key, the wraps come from whichever source holds that key.
    found = key_from_recovery_code(encode_recovery_code(DEK), OWNER, None,
                                HeldHere(cached_key=DEK, newest_cached=old_header), UNREADABLE)
    assert (found.source, found.dek, found.wraps) == (SOURCE_CODE, DEK, WRAPS)
    found = key_from_recovery_code(encode_recovery_code(DEK), OWNER, None,
                                HeldHere(newest_cached=old_header), None)
    assert found.wraps == WRAPS


def test_a_cached_key_with_no_wraps_of_it_here_waits_for_the_chain():
    """Bound by the cached key alone, nothing here holds wraps to push with: refused, and
    the chain (which hands over the head's wraps) is the way out."""
    err = code_refusal(DEK, None, HeldHere(cached_key=DEK))
    assert err.code is ErrorCode.NOT_CONNECTED and "holds no wraps of it" in str(err)
    assert err.hint.startswith("connect again when the chain can be read")


def test_a_recovery_code_never_starts_a_vault():
    """With nothing to check against it is refused, saying why the chain offered nothing:
    it was read and holds no epochs, or it could not be read."""
    err = code_refusal(DEK, None, HeldHere(), None)
    assert err.code is ErrorCode.WRONG_KEY
    assert str(err).startswith("a recovery code cannot start a vault: the chain holds no "
                               "epochs for owner")
    err = code_refusal(DEK, None, HeldHere())
    assert str(err).startswith("a recovery code cannot start a vault: the chain could not be "
                               "read (cannot read the chain head: timeout)")
    assert err.hint.startswith("connect again when the chain can be read")


# --- --add-passphrase ------------------------------------------------------------------


def test_an_extra_passphrase_adds_the_passphrase_paths_wrap_once(tmp_path):
    """05-keys.md: `kint connect --add-passphrase` adds a kind 0x02 wrap derived exactly as
    the passphrase path derives its key, so the passphrase alone opens the same data key;
    the vector's passphrase gives the vector's passphrase wrap tag. A passphrase whose wrap
    is already there adds nothing, and none given (the prompt left empty) adds nothing."""
    ctx = SimpleNamespace(config=SimpleNamespace(space_id=V["space"], home=tmp_path))
    vector = V["keks"]["passphrase"]
    wallet_only = WRAPS[:1]
    added = with_extra_passphrase(ctx, OWNER, DEK, wallet_only, vector["passphrase"])
    assert added[:1] == wallet_only and len(added) == 2
    extra = added[1]
    assert (extra.kind, extra.tag.hex()) == (KIND_PASSPHRASE, vector["tag"])
    assert unwrap(extra, bytes.fromhex(vector["kek"])) == DEK
    assert with_extra_passphrase(ctx, OWNER, DEK, WRAPS, vector["passphrase"]) == WRAPS
    for nothing in (None, ""):
        assert with_extra_passphrase(ctx, OWNER, DEK, wallet_only, nothing) == wallet_only
