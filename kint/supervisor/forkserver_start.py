"""The worker forkserver's first preload module (kint.supervisor.spawner.PRELOAD): what a
start-up step does in kint's other processes (kint.startup), done here before the preload
imports anything heavy.

- The forkserver, and so every worker forked from it, is claimed as kint's own process,
  and pycryptodome loaded through ctypes (kint.crypto_backend) before web3 and
  eth-account import it through cffi.
- The cyclic collector is paused until the preload's last module, forkserver_heap,
  freezes what the imports made and runs it again: the collections an import of this
  size makes on the way walk objects that all live as long as the forkserver (that
  module's reason for the freeze). The few import-time cycles they would have freed stay,
  frozen and shared: ~0.7 MB of the forkserver's ~80.

Together, measured on the two-core box (bench/RESULTS.md, session 40): the preload's CPU
1.26 -> 1.14 s for the pause and 1.22 -> 1.04 s for ctypes, each in interleaved runs.

Importing this module changes the importing process: only a forkserver wants that, and
nothing else imports it.
"""

from __future__ import annotations

import gc

from kint import crypto_backend

gc.disable()
crypto_backend.claim()
crypto_backend.load()
