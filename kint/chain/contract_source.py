"""Where the contract in force was set, and the one check for an address with no EpochAnchor.

A view that returns no data (kint.chain.anchor.NoContractThere), doctor's contract check
finding no code, and a contract that does not answer as EpochAnchor all send the user to
the same two settings: the contract and the endpoint, each named where it was set (the
contract here, the endpoint by kint.chain.endpoint_source). Three wordings of that check
had grown (a worker's "check the contract setting" named no setting at all, and went out
under the hint of an endpoint that did not answer, though it had answered); there is one.
"""

from __future__ import annotations

from kint import settings
from kint.chain.config import BASE_CHAIN_ID, DEVCHAIN_SOURCE, ChainConfig
from kint.chain.endpoint_source import endpoint_in_force
from kint.protocol.hints import CONTRACT_CHECK



def chain_name(chain_id: int) -> str:
    """Base, the devchain, or the chain by its id."""
    # Imported here: the devchain package brings `requests` and its lifecycle, which the
    # commands that build the check for a refusal (kint.chain.anchor) never need otherwise.
    from kint.chain.devchain.anvil import CHAIN_ID as DEVCHAIN_ID

    return {BASE_CHAIN_ID: "Base", DEVCHAIN_ID: "the devchain"}.get(chain_id, f"chain {chain_id}")


def contract_source(chain: ChainConfig) -> str:
    """Where the contract in force was set, in the words of the setting to change."""
    source, where = chain.contract_source, chain.contract_where
    if source == settings.FILE:
        return f"KINT_CONTRACT: `contract` in {where}"
    if source == settings.DAEMON_ENV:
        return "KINT_CONTRACT in the supervisor's environment"
    if source == settings.THIS_CALL:
        return "KINT_CONTRACT in this command's environment"
    if source == DEVCHAIN_SOURCE:
        return f"the devchain's, from its record {where}"
    return _default_contract(chain.chain_id)


def _default_contract(chain_id: int) -> str:
    """The contract in force when nothing sets one: the default is the address of Base
    mainnet's deployment (v0.3.0's 11-contract.md, "The deployment"), which is that
    deployment only on Base; on another chain it is the same address and nothing more."""
    if chain_id == BASE_CHAIN_ID:
        return "KINT_CONTRACT unset: Base mainnet's deployment"
    return (f"KINT_CONTRACT unset: the default, the address of Base mainnet's deployment, "
            f"though kint reads {chain_name(chain_id)}, not Base")


def contract_check(chain: ChainConfig, endpoint: str | None = None) -> str:
    """What to check of an address with no EpochAnchor through `chain`: its contract and
    its endpoint, each where it was set; `endpoint` in place of the endpoint's words where
    the call went through others than the settings' (a connect's own --rpc-urls)."""
    return CONTRACT_CHECK.format(contract=contract_source(chain),
                                 endpoint=endpoint or endpoint_in_force(chain),
                                 chain_id=chain.chain_id)
