"""A transaction hash as every command and kint tool shows it: `0x` and its 64 hex digits.

Why: kint v0.3.0's push line gives each epoch's transaction as `tx 0x...` (02-quickstart.md),
the form a block explorer, `cast tx` and a wallet take. The worker keeps a hash as its
files hold it (the epoch cache and the mirror, bare hex), so `kint push` added the `0x`
while `kint rekey`'s snapshot line, `kint history --block` and every `--json` printed the
bare digits: the same hash in two forms, one a script could not paste. Every command's
output, text and `--json` alike, now gives it one way; the files and the worker keep theirs.
kint-server's six tools give it the same way (kint.agent_server.surface): v0.3.0's
memory_verify and memory_history are the function its CLI runs (07-verify.md), so an agent
reads the hash a terminal prints, where the tools gave the bare digits.
"""

from __future__ import annotations

from typing import Any

# The fields of a command's result that hold a transaction hash (`anchored_tx`: verify's
# per-hit checks; the refusal it writes into Sibyl takes that form from its check,
# kint.tenant_worker.verify.refusal_body).
TX_FIELDS = frozenset({"tx", "anchored_tx"})


def tx_0x(tx: Any) -> Any:
    """`tx` with its `0x`, when it is a hash given without one; anything else as it is
    (None for an epoch not yet mined, a value already prefixed)."""
    if isinstance(tx, str) and tx and not tx.startswith(("0x", "0X")):
        return "0x" + tx
    return tx


def with_tx_0x(obj: Any) -> Any:
    """`obj` (a command's JSON result) with every transaction hash field in `0x` form, at
    any depth: a push's epochs, a pull's skipped ones, a history's versions."""
    if isinstance(obj, dict):
        return {key: tx_0x(value) if key in TX_FIELDS else with_tx_0x(value)
                for key, value in obj.items()}
    if isinstance(obj, list):
        return [with_tx_0x(item) for item in obj]
    return obj
