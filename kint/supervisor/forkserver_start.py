"""The worker forkserver's first preload module (kint.supervisor.spawner.PRELOAD): what a
start-up step does in kint's other processes (kint.startup), done here before the preload
imports anything heavy.

- The forkserver, and so every worker forked from it, is claimed as kint's own process,
  and pycryptodome loaded through ctypes (kint.crypto_backend) before web3 and
  eth-account import it through cffi: ~80 ms less of each forkserver's preload.

Importing this module changes the importing process: only a forkserver wants that, and
nothing else imports it.
"""

from __future__ import annotations

from kint import crypto_backend

crypto_backend.claim()
crypto_backend.load()
