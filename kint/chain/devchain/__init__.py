"""The embedded local chain: anvil on 127.0.0.1, chain id 31337, its state kept under
$KINT_HOME/devchain/ (docs/commands.md, "kint devchain").

- `anvil`: which anvil binary runs it, and how to install one.
- `lifecycle`: start (deploying EpochAnchor once), status, stop.
- `records`: the record of the running anvil, the anchor's address, the lock.
- `identity`: which process is the recorded anvil (nothing else is ever signalled).
- `whose`: whether a record is this KINT_HOME's own or a copy of another's, by its facts
  (its anvil running here, its endpoint answering for its chain) and then by the id.
- `powers`: dev-only powers (deploy, fund, impersonate an owner) that exist nowhere else.
- `errors`: its error type, with a code and a hint (and DevchainSilent, a devchain that
  did not answer before anything was sent).

`powers` (web3 and eth_account) is imported when one of its names is first asked for, so
`kint devchain status` and `stop` never load it.
"""

from typing import Any

from kint.chain.devchain.anvil import (ANVIL_VERSION, CHAIN_ID, INSTALL_HINT, anvil_binary,
                                       checkout_root)
from kint.chain.devchain.errors import DevchainError, DevchainSilent
from kint.chain.devchain.identity import process_identity, recorded_anvil_runs
from kint.chain.devchain.lifecycle import (judged_start, judged_status, judged_stop, start,
                                           status, stop)
from kint.chain.devchain.records import read_record

_POWERS = frozenset({"deploy_test_smart_account", "dev_rpc", "fund", "send_as",
                     "transfer_from_dev_account"})


def __getattr__(name: str) -> Any:
    """The dev powers' names, from `powers` once one is asked for (PEP 562)."""
    if name in _POWERS:
        from kint.chain.devchain import powers

        return getattr(powers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["ANVIL_VERSION", "CHAIN_ID", "INSTALL_HINT", "DevchainError", "DevchainSilent",
           "anvil_binary", "checkout_root", "deploy_test_smart_account", "dev_rpc", "fund",
           "judged_start", "judged_status", "judged_stop",
           "process_identity", "read_record", "recorded_anvil_runs", "send_as", "start",
           "status", "stop", "transfer_from_dev_account"]
