"""`kint connect` reads the chain before it stretches a passphrase (kint/tenant_worker/
connect.py): a vault passphrase, or a salt passphrase beside a signature, costs a scrypt
(N = 2^17, 128 MiB, ~0.4 s on a quiet core, under the lock every worker of the home
shares), and a chain that cannot be read with no wraps on this machine is a refusal
whatever the key: nothing would be opened with it. The refusal is the one it was
(RPC_UNAVAILABLE); only the stretch is gone. A secret that is wrong on its face (a
signature that is not the owner's, an empty passphrase) is still refused before the chain
is asked.

The worker's op runs in-process on a real space context, its chain an endpoint nothing
listens on; the session key (its own scrypt, not this test's subject) is stood in for."""

from __future__ import annotations

import pytest
from eth_account import Account

import kint.custody.keks as keks
import kint.tenant_worker.connect as connect_module
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker.config import WorkerConfig
from kint.tenant_worker.dev_owner import derive_signature
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.store import StoreReader

OWNER = Account.from_key(b"\x11" * 32)


@pytest.fixture
def space(tmp_path, monkeypatch):
    """A space context whose chain endpoint refuses every connection, and the passphrases
    its ops stretched."""
    monkeypatch.setenv("KINT_RPC_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("KINT_OFFLINE", raising=False)
    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    db = tmp_path / "memory.db"
    cfg = WorkerConfig(space_id="ab" * 32, label="t", tenant="t", db=str(db),
                       kint_home=str(home), back_address="ipc:///unused", supervisor_pid=1,
                       idle_beat_s=2.5)
    monkeypatch.setattr(connect_module, "create_session_key",
                        lambda home: ("0x" + "22" * 20, False))
    stretched: list[str] = []
    real = keks.stretch_passphrase

    def counted(passphrase, owner, *, home=None):
        key = real(passphrase, owner, home=home)  # an empty one is refused, not stretched
        stretched.append(passphrase)
        return key

    monkeypatch.setattr(keks, "stretch_passphrase", counted)
    return SpaceContext(config=cfg, store=StoreReader(str(db), "t")), stretched


def _refusal(ctx: SpaceContext, **args) -> ProtocolError:
    with pytest.raises(ProtocolError) as raised:
        connect_module.connect(ctx, {"owner": OWNER.address, **args})
    return raised.value


def test_an_unreadable_chain_is_told_before_any_passphrase_is_stretched(space):
    ctx, stretched = space
    for args in ({"passphrase": "vault words"},
                 {"signature": derive_signature(OWNER), "salt_passphrase": "salt words"}):
        refused = _refusal(ctx, **args)
        assert refused.code is ErrorCode.RPC_UNAVAILABLE, refused
        assert stretched == [], f"{sorted(args)}: stretched before a chain that was not read"


def test_a_secret_wrong_on_its_face_is_refused_before_the_chain_is_read(space):
    ctx, stretched = space
    not_the_owners = derive_signature(Account.from_key(b"\x33" * 32))
    refused = _refusal(ctx, signature=not_the_owners)
    assert refused.code is ErrorCode.WRONG_KEY and "recovers to" in refused.message, refused
    for args in ({"passphrase": ""}, {"signature": derive_signature(OWNER), "salt_passphrase": ""}):
        refused = _refusal(ctx, **args)
        assert refused.code is not ErrorCode.RPC_UNAVAILABLE, (args, refused)
    assert stretched == []
