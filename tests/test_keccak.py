"""kint's one Keccak-256 (kint.keccak) and which way pycryptodome reaches its C code
(kint.crypto_backend): ctypes in kint's own processes, pycryptodome's own choice in a
program that imports kint. Each process case runs in a fresh interpreter: pycryptodome
picks its way once per process."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

from eth_hash.auto import keccak as eth_hash_keccak

from kint.keccak import keccak

# Ethereum's Keccak-256 of b"" and b"abc" (not NIST SHA3-256, whose padding differs).
EMPTY = "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
ABC = "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"

# Run in a fresh interpreter: claims the process or not, hashes, and says what loaded.
PROBE = """
import json, sys
from kint import crypto_backend
if sys.argv[1] == "claimed":
    crypto_backend.claim()
from kint.keccak import keccak
digest = keccak(b"abc").hex()
bridge = sys.modules["Crypto.Util._raw_api"]
found = {"digest": digest, "backend": bridge.backend, "cffi": "cffi" in sys.modules}
import cffi  # the choice left cffi importable for anything else that wants it
found["cffi_importable"] = cffi.FFI is not None
print(json.dumps(found))
"""


def _probe(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True,
                         text=True, timeout=60, env={**os.environ})
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_keccak_gives_ethereums_digests_and_the_same_as_eth_hash():
    assert keccak(b"").hex() == EMPTY
    assert keccak(b"abc").hex() == ABC
    for n in (1, 31, 32, 33, 135, 136, 137, 1000):
        data = bytes((i * 7 + n) % 256 for i in range(n))
        assert keccak(data) == eth_hash_keccak(data)
        assert keccak(bytearray(data)) == eth_hash_keccak(data)


def test_kints_own_process_reaches_pycryptodome_through_ctypes():
    found = _probe("claimed")
    assert found == {"digest": ABC, "backend": "ctypes", "cffi": False,
                     "cffi_importable": True}


def test_a_program_importing_kint_keeps_pycryptodomes_own_choice():
    # cffi is installed beside kint (cryptography asks for it), and pycryptodome takes it
    # where it imports: nothing of kint's hid it.
    assert importlib.util.find_spec("cffi") is not None
    found = _probe("host")
    assert found == {"digest": ABC, "backend": "cffi", "cffi": True, "cffi_importable": True}


def test_the_kint_script_claims_its_process_before_it_hashes(tmp_path):
    # `kint canonical-payload` hashes the vault message (kint.custody.vault_message) in the
    # command's own process, run here by the console script's own entry; what loaded is
    # read as the process exits.
    home = tmp_path / "kint-home"
    home.mkdir(mode=0o700)
    env = {**os.environ, "HOME": str(tmp_path), "KINT_HOME": str(home)}
    code = ("import atexit, json, sys\n"
            "def said():\n"
            "    bridge = sys.modules.get('Crypto.Util._raw_api')\n"
            "    print(json.dumps({'backend': getattr(bridge, 'backend', None),\n"
            "                      'pycparser': 'pycparser' in sys.modules}), file=sys.stderr)\n"
            "atexit.register(said)\n"
            "from kint.entry import main\n"
            "main()\n")
    out = subprocess.run([sys.executable, "-c", code, "canonical-payload",
                          "--owner", "0x" + "ab" * 20],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "KintVault" in out.stdout, out.stdout
    found = json.loads(out.stderr.strip().splitlines()[-1])
    assert found == {"backend": "ctypes", "pycparser": False}, out.stderr
