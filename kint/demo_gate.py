"""Preloaded into the worker forkserver of `kint demo`'s sandbox supervisor, and nowhere
else: it gives the sandbox's workers Sibyl's own test gate (`NullEntitlementGate`), in code,
because the sandbox has no Sibyl account. `demo_supervisor` refuses any KINT_HOME that is
not inside a sandbox the demo made."""

from sibyl_memory_client.testing import NullEntitlementGate

from kint import sibyl_client

sibyl_client.GATE_FACTORY = lambda _credentials_path: NullEntitlementGate()
