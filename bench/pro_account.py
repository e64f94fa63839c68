"""A Pro Sibyl account on a throwaway signing key, for the benchmarks that need more than
the free tier's 5 MiB (10,000 rows are ~25 MB of store).

Why not a stand-in: with this account every write, the benchmark's own and those kint's
workers replay, goes through Sibyl's REAL `EntitlementGate` and REAL `CapGate`. What is
made up is only what a paid machine would hold on disk after signing in, minted here the
way Sibyl's own test support does it (`sibyl_memory_client.testing`):

- `~/.sibyl-memory/credentials.json` with tier `pro`, and an entitlement token with tier
  `pro` and no cap, signed by a `TestSigner` key;
- next to each store, the `tier_cache.json` a device holds once Sibyl's server has said
  "uncapped" (`cap_bytes: null`, account-matched, fresh). `CapGate.check` honours it only
  while the verified entitlement also says paid (Sibyl's SEC-13 rule), which it does.

The signer's public key is trusted in this process (`trust_in_process`) and, through
`KINT_TEST_TRUSTED_KEY`, in the workers of the test supervisor (tests/support/
kint_test_gate.py), exactly as the test suite's `Sandbox.start_entitled` does. Sibyl's
network guard is on in both, so nothing can reach Sibyl's API.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


_guarded = False


class _Patcher:
    """The one method of pytest's monkeypatch that Sibyl's test helpers call, for a
    benchmark process that keeps the patch until it exits."""

    @staticmethod
    def setattr(target: Any, name: str, value: Any) -> None:
        setattr(target, name, value)


class ProAccount:
    """One throwaway Pro account: install it in a HOME, trust it, open clients on it."""

    TIER = "pro"

    def __init__(self) -> None:
        from sibyl_memory_client import testing

        self.signer = testing.TestSigner()
        self.account_id = testing.TEST_ACCOUNT_ID
        self.session_token = testing.TEST_SESSION_TOKEN

    @classmethod
    def signed_in_here(cls) -> "ProAccount":
        """A fresh account, installed in this process's HOME and trusted in this process
        (`corpus.write_store(..., account=...)` opens its clients from that HOME)."""
        account = cls()
        account.install(Path.home())
        account.trust_in_process()
        return account

    def install(self, home: Path, store_dirs: list[Path] | None = None) -> Path:
        """Sign `home` in as this account; mark each folder in `store_dirs` (default: the
        SDK's `~/.sibyl-memory`) with the uncapped tier cache. Returns credentials.json."""
        from sibyl_memory_client import testing

        folder = home / ".sibyl-memory"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        creds = testing.write_credentials(folder, tier=self.TIER)
        testing.write_entitlement(folder, self.signer.mint(tier=self.TIER, cap=None,
                                                           src=self.TIER))
        for store_dir in store_dirs or [folder]:
            self.mark_uncapped(store_dir)
        return creds

    def mark_uncapped(self, store_dir: Path) -> None:
        """The tier cache Sibyl's `CapGate` keeps beside a store (kint's client and
        `MemoryClient.local` both put it there) after the server has said "uncapped"."""
        from sibyl_memory_client._capcheck import TierCache, TierCacheEntry

        store_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        TierCache(store_dir / "tier_cache.json").store(TierCacheEntry(
            account_id=self.account_id, tier=self.TIER, checked_at=time.time(),
            cap_bytes=None))

    def supervisor_env(self) -> dict[str, str]:
        """What the test supervisor's workers need to run Sibyl's real account gate
        trusting this signer (in place of `KINT_TEST_GATE=null`)."""
        return {"KINT_TEST_TRUSTED_KEY": f"{self.signer.kid}:{self.signer.public_raw.hex()}"}

    def trust_in_process(self) -> None:
        """Trust the signer here, route any entitlement refresh through it, and refuse
        every non-loopback connection (Sibyl's own guard)."""
        from sibyl_memory_client import testing

        global _guarded
        testing.patch_trusted_keys(_Patcher(), self.signer)
        if not _guarded:  # the guard wraps socket.connect: once per process is enough
            testing.forbid_external_network(_Patcher())
            _guarded = True

    def open_client(self, db: Path, tenant: str, home: Path) -> Any:
        """`MemoryClient.local` as a signed-in Pro machine opens it: Sibyl's own gates."""
        from sibyl_memory_client import MemoryClient

        db.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        return MemoryClient.local(
            db, tenant_id=tenant, tier=self.TIER, account_id=self.account_id,
            session_token=self.session_token,
            credentials_path=home / ".sibyl-memory" / "credentials.json")
