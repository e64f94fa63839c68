"""A key added with `kint connect --add-passphrase` stays in every later epoch's header,
whichever machine pushes it (05-keys.md, "One data key, many wraps": the extra passphrase
wrap opens the same data key without the wallet, and every epoch pushed after that carries
it), on the session's devchain.

Machine A connects with the wallet and anchors; machine B connects with the same wallet
(its wraps: the wallet's only). A adds a passphrase and anchors again. B pulls that epoch,
then anchors one of its own: its header must still carry the passphrase wrap, or the
passphrase that opened the vault an epoch ago no longer opens it.
"""

from __future__ import annotations

import json
from pathlib import Path

from chain_machines import (authorize_machine, connect_with_wallet, devchain_anchor, kjson,
                            ok, owner_account, wallet_signature)
from conftest import sibyl_client, write_store
from machines_together import new_machines
from kint.custody.session_key import session_address
from kint.custody.vault_message import canonical_payload
from kint.epochs.envelope import Header
from kint.spaces import space_id

EXTRA = "the extra passphrase"


def _head_header(chain_home, owner: str, space: str) -> tuple[int, Header]:
    anchor = devchain_anchor(chain_home)
    head = anchor.head(owner, space)
    event = anchor.epoch_log(owner, space, head.seq, head.block)
    blob = anchor.push_calldata(event.tx_hash, owner, space, event.prev, event.digest)
    return head.seq, Header.decode(blob)


def _write(sb, name: str) -> None:
    client = sibyl_client(sb.sibyl_db, sb.tenant)
    try:
        client.set_entity("notes", name, {"by": name})
    finally:
        client.storage.close()


def test_a_passphrase_added_on_one_machine_is_carried_by_every_later_epoch(tmp_path,
                                                                           chain_home):
    a, b, c = new_machines([tmp_path / "a", tmp_path / "b", tmp_path / "c"], chain_home)
    try:
        write_store(a.sibyl_db, tenant=a.tenant)
        owner = kjson(a, "connect", "--dev")["owner"]
        space = space_id(a.tenant)
        ok(a.kint("push"))
        wallet = owner_account(a, owner)
        assert connect_with_wallet(b, wallet)["source"] == "chain head header"
        # B's session key, read from its keystore (what `kint status` names, without a
        # command started for it).
        authorize_machine(chain_home, wallet, session_address(b.kint_home))
        ok(b.kint("pull"))

        # `kint canonical-payload`'s message, made in this process (the owner's alone).
        payload = canonical_payload(owner).decode()
        signature_file = tmp_path / "signature.txt"
        signature_file.write_text(wallet_signature(wallet, payload) + "\n")
        ok(a.kint("connect", "--owner", owner, "--signature-file", str(signature_file),
                  "--add-passphrase", input=EXTRA + "\n"))
        _write(a, "after-the-passphrase")
        ok(a.kint("push"))
        seq, header = _head_header(chain_home, owner, space)
        assert [w.kind for w in header.wraps] == [0x01, 0x02], header.wraps
        added = header.wraps[1]

        ok(b.kint("pull"))
        _write(b, "from-b")
        ok(b.kint("push"))
        later, header = _head_header(chain_home, owner, space)
        assert later == seq + 1
        assert added in header.wraps, (added, header.wraps)

        # The consequence: the passphrase alone still opens the vault at the head.
        joined = ok(c.kint("connect", "--owner", owner, "--smart-account",
                           "--passphrase-stdin", "--json", input=EXTRA + "\n"))
        assert json.loads(joined.stdout)["source"] == "chain head header"
    finally:
        for sb in (a, b, c):
            sb.shutdown()


def test_only_wraps_under_the_files_data_key_are_taken_in_and_only_added(tmp_path):
    """The merge on its own, with v0.3.0's vector wraps: a header under the file's data key
    adds the wraps the file lacks (once, in header order) and keeps the file's own; a
    header under another data key (before or after a rotation) adds nothing; nor does a
    header carrying fewer wraps take any away."""
    from types import SimpleNamespace

    from kint.custody.data_key import dek_id
    from kint.custody.wraps import Wrap, read_wraps, write_wraps
    from kint.tenant_worker.header_wraps import take_in_header_wraps

    vectors = json.loads((Path(__file__).parent / "vectors" / "kint-v0.3.0.json").read_text())
    space, dek = vectors["space"], bytes.fromhex(vectors["dek"])
    wraps = tuple(Wrap.decode(bytes.fromhex(w["bytes"])) for w in vectors["wraps"])
    ctx = SimpleNamespace(config=SimpleNamespace(home=tmp_path, space_id=space,
                                                 space16=space[:16]),
                          enrolment=lambda: None)

    def header(key: bytes, carried: tuple[Wrap, ...]) -> Header:
        return Header(flags=0, nonce=bytes(12), rows_root=bytes(32), dek_id=dek_id(key),
                      bucket=4096, wraps=carried)

    write_wraps(tmp_path, space, dek_id(dek), wraps[:1])
    assert take_in_header_wraps(ctx, [header(b"\x44" * 32, wraps)]) == 0
    assert take_in_header_wraps(ctx, [header(dek, wraps[2:]), header(dek, wraps)]) == 2
    assert read_wraps(tmp_path, space).wraps == (wraps[0], wraps[2], wraps[1])
    assert take_in_header_wraps(ctx, [header(dek, wraps[:1])]) == 0
    assert read_wraps(tmp_path, space).wraps == (wraps[0], wraps[2], wraps[1])


def test_the_merge_stops_at_the_most_wraps_a_header_carries(tmp_path, caplog):
    """A header's wrap count is one byte (v0.3.0's 06-epochs.md): a file one short of it
    takes one more wrap and leaves the rest out with a warning, so the next push can still
    build its header (before, the file grew past it and every push failed INTERNAL)."""
    import logging
    from types import SimpleNamespace

    from kint.custody.data_key import dek_id
    from kint.custody.wraps import Wrap, read_wraps, write_wraps
    from kint.epochs.envelope import MAX_WRAPS
    from kint.tenant_worker.header_wraps import take_in_header_wraps

    def wrap(n: int) -> Wrap:
        return Wrap(kind=0x02, tag=n.to_bytes(16, "big"), nonce=bytes(12), wrapped=bytes(48))

    space, dek = "ab" * 32, b"\x55" * 32
    ctx = SimpleNamespace(config=SimpleNamespace(home=tmp_path, space_id=space,
                                                 space16=space[:16]),
                          enrolment=lambda: None)
    write_wraps(tmp_path, space, dek_id(dek), [wrap(n) for n in range(MAX_WRAPS - 1)])
    carried = tuple(wrap(n) for n in range(MAX_WRAPS - 1, MAX_WRAPS + 2))  # 3 new ones
    header = Header(flags=0, nonce=bytes(12), rows_root=bytes(32), dek_id=dek_id(dek),
                    bucket=4096, wraps=carried)
    with caplog.at_level(logging.WARNING, logger="kint.worker"):
        assert take_in_header_wraps(ctx, [header]) == 1
    held = read_wraps(tmp_path, space).wraps
    assert len(held) == MAX_WRAPS and held[-1] == carried[0]
    assert "2 key wrap(s) another machine added are not kept" in caplog.text
    Header(flags=0, nonce=bytes(12), rows_root=bytes(32), dek_id=dek_id(dek), bucket=4096,
           wraps=held)  # what the next push builds
    assert take_in_header_wraps(ctx, [header]) == 0
