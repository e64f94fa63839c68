"""Keccak-256: every id, leaf, root, digest and selector kint computes.

Straight from pycryptodome (web3 and eth-account install it for the same hash), not
through eth_hash.auto: eth_hash's import reads its package's metadata (importlib.metadata
and the email parser behind it, ~40 ms of CPU), which a fresh `kint push`, `pull` or
`connect` paid for its one space id, and each of its hashes took two more calls to reach
this same function (verify's proofs are mostly hashes: bench/RESULTS.md, session 40).
"""

from __future__ import annotations

from kint import crypto_backend

crypto_backend.load()  # before pycryptodome's first import: ctypes in kint's own processes

from Crypto.Hash import keccak as _keccak  # noqa: E402


def keccak(data: bytes) -> bytes:
    """The 32-byte Keccak-256 digest of `data`: Ethereum's hash, not NIST's SHA3-256 (they
    pad differently)."""
    return _keccak.new(data=data, digest_bits=256).digest()
