"""An anvil of a test's own beside the session's devchain, mining nothing until told: the
tests of a receipt's wait and of a nonce waiting at a second endpoint need a chain whose
transactions stay pending, which the session's anvil (it mines) cannot be.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from typing import Iterator

from web3 import Web3


@contextlib.contextmanager
def own_anvil(*args: str, what: str = "anvil") -> Iterator[tuple[str, Web3]]:
    """A non-mining anvil on a free 127.0.0.1 port with `args` (a chain id, a fork URL):
    (its URL, web3 on it) once it answers; stopped at the end. `what` names it in the
    assertion that it started."""
    from kint.chain.devchain import anvil_binary
    from kint.chain.devchain.lifecycle import free_port

    url = f"http://127.0.0.1:{free_port()}"
    proc = subprocess.Popen([str(anvil_binary()), *args, "--host", "127.0.0.1", "--port",
                             url.rsplit(":", 1)[1], "--no-mining", "--silent"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    w3 = Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": 10}))
    try:
        deadline = time.monotonic() + 30
        while not w3.is_connected():
            assert proc.poll() is None and time.monotonic() < deadline, f"{what} did not start"
            time.sleep(0.1)
        # Connected, yet to whom: another process may have taken the port between
        # `free_port` and anvil's bind, and this anvil then exited.
        assert proc.poll() is None, f"{what} exited: its port was taken"
        yield url, w3
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
