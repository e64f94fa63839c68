"""Preloaded into the worker forkserver by the test supervisor (run_supervisor.py), so
every worker of a test runs with:

- Sibyl's REAL account gate, trusting the throwaway key of the test's `TestSigner`
  (`KINT_TEST_TRUSTED_KEY=<kid>:<public key hex>`, set only by the tests), or, with
  `KINT_TEST_GATE=null`, Sibyl's `NullEntitlementGate` passed in code;
- Sibyl's network guard: any connection beyond loopback raises, in the worker too.

This module lives in tests/ and is imported only by name from the test launcher; kint
itself reads none of these variables.
"""

from __future__ import annotations

import os


class _Patcher:
    """The one method of pytest's monkeypatch that Sibyl's guard needs, for a process
    that lives as long as the patch."""

    @staticmethod
    def setattr(target, name, value):  # noqa: ANN001
        setattr(target, name, value)


def _install() -> None:
    from sibyl_memory_client import _entitlement
    from sibyl_memory_client import testing

    from kint import sibyl_client

    testing.forbid_external_network(_Patcher())
    if os.environ.get("KINT_TEST_GATE") == "null":
        sibyl_client.GATE_FACTORY = lambda _path: testing.NullEntitlementGate()
        return
    key = os.environ.get("KINT_TEST_TRUSTED_KEY")
    if key:
        kid, public_hex = key.split(":", 1)
        _entitlement.TRUSTED_KEYS = {kid: bytes.fromhex(public_hex)}


_install()
