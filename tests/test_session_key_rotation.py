"""`kint session-key rotate` while the space's worker runs: its next push is signed by the
new key, with no restart.

kint v0.3.0's flow (docs: keys, "The session key" and "Expiry and revocation"): rotate is
local, the new key needs its own authorization (`kint authorize direct`, the owner key in
KINT_OWNER_KEY) and a little ETH, and the owner may revoke the old one (revokeSessionKey).
Everything is real: the session's anvil, the supervisor and its worker, the keystore files,
the `kint` commands. The ETH comes from anvil's setBalance, where on Base a transfer would.
"""

from __future__ import annotations

import json
import os

from chain_machines import (SESSION_SCRYPT_N, devchain_anchor, kjson, new_machine, ok,
                            owner_account)
from conftest import write_rules
from kint.chain import devchain
from kint.custody import session_key
from kint.tenant_worker.config import WorkerConfig
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.store import StoreReader


def test_a_rotated_key_signs_the_next_push_in_the_same_worker(tmp_path, chain_home):
    """The worker unlocked the session key once and kept it for its life: after a rotate
    (and the old key's revocation) its pushes went on being signed by the old key and were
    refused ("session key 0x... is not authorized") until the worker restarted. It notices
    the keystore file changed and unlocks the new one."""
    # Never recycled for its memory (KINT_WORKER_RECYCLE_MIB=0): a worker that connected and
    # pushed holds 21.7-22.8 MiB of its own, about the 22 MiB default, and a loaded box's
    # quiet spell between the two pushes had it replaced, which undoes the premise (one
    # worker's life), not what is tested.
    sb = new_machine(tmp_path / "machine", chain_home, KINT_WORKER_RECYCLE_MIB="0")
    try:
        connected = kjson(sb, "connect", "--dev")
        owner = owner_account(sb, connected["owner"])
        anchor = devchain_anchor(chain_home)
        write_rules(sb.sibyl_db, sb.tenant, first="the first rule, pushed by the first key")
        first = kjson(sb, "push")["epochs"][-1]
        old = anchor.w3.eth.get_transaction(first["tx"])["from"]
        assert old == connected["session"]
        worker = kjson(sb, "status")["worker"]["pid"]

        out = ok(sb.kint("session-key", "rotate"))
        said_old, new = out.stdout.strip().removeprefix("rotated: ").split(" -> ")
        assert said_old == old and new != old
        ok(sb.kint("authorize", "direct", env={"KINT_OWNER_KEY": owner.key.hex()}))
        devchain.fund(anchor.config.rpc_urls[0], new, 10**17)
        anchor.transact(owner, anchor.encode_revoke_session_key(old))
        assert anchor.can_write(owner.address, new) and not anchor.can_write(owner.address, old)

        write_rules(sb.sibyl_db, sb.tenant, second="the second rule, pushed by the new key")
        pushed = sb.kint("push", "--json")
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr
        second = json.loads(pushed.stdout)["epochs"][-1]
        assert second["seq"] == first["seq"] + 1
        assert anchor.w3.eth.get_transaction(second["tx"])["from"] == new
        status = kjson(sb, "status")
        assert status["worker"]["pid"] == worker, "the worker was restarted"
        # status names the key that signs now, and the chain's facts are that key's
        assert status["session"] == status["session_key"]["address"] == new, status
        assert status["session_key"]["authorized"] is True, status
    finally:
        sb.shutdown()


def test_the_key_is_unlocked_again_only_when_its_file_changed(tmp_path, monkeypatch):
    """In-process, the real keystores (at the tests' scrypt cost) and the real unlock,
    counted: an unlock costs ~1 s of scrypt at kint's own cost, so a use with the same file
    unlocks nothing; a rotate's new file, or the key written back at the same path, is
    unlocked once."""
    home = tmp_path / "kint"
    monkeypatch.setenv("KINT_SESSION_PASSPHRASE", "a passphrase of this test's own")
    first, _ = session_key.create_session_key(home, scrypt_n=SESSION_SCRYPT_N)
    unlocks: list[object] = []
    real = session_key.unlock_session_key
    monkeypatch.setattr(session_key, "unlock_session_key",
                        lambda *a, **kw: unlocks.append(a) or real(*a, **kw))
    cfg = WorkerConfig(space_id="ab" * 32, label="t", tenant="t", db=str(tmp_path / "m.db"),
                       kint_home=str(home), back_address="ipc:///unused", supervisor_pid=1,
                       idle_beat_s=2.5)
    ctx = SpaceContext(config=cfg, store=StoreReader(cfg.db, "t"))

    kept = ctx.session_account()
    assert kept.address == first and ctx.session_account() is kept and len(unlocks) == 1
    _, new = session_key.rotate_session_key(home, scrypt_n=SESSION_SCRYPT_N)
    assert ctx.session_account().address == new and len(unlocks) == 2
    assert ctx.session_account().address == new and len(unlocks) == 2
    # The first key put back (same bytes, a new file): the file is another, so unlocked.
    path = session_key.session_key_path(home)
    os.replace(session_key.session_key_path(home, old=True), path)
    assert ctx.session_account().address == first and len(unlocks) == 3
