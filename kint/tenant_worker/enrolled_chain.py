"""The refusal to read a space on another chain, or another EpochAnchor, than the one its
enrolment was made on.

A space's epochs, mirror and watermark belong to one contract on one chain: the enrolment
records both (`chain_id`, `contract`). Read through any other, the space has no epochs
there (or older ones), so status said the head was empty, a pull found nothing (or refused
the head as stale), and a push would start a second history on a contract that never saw
the space. v0.3.0's 11-contract.md ("The deployment") says what another address is: a
redeploy, a new chain of epochs that starts empty. So every command that reads the space's
head (status, verify, doctor, push, pull, compact, rekey, recovery-code) refuses first,
naming where the space lives, what kint reads now and the setting that makes the
difference (CONFIG_INVALID); connect moves an enrolment only while this machine holds none
of the old contract's epochs (connect_owner.py `moved_from`).

Only the chain id was compared at first: a `contract` in config.toml, a KINT_CONTRACT in the
supervisor's environment, or a devchain deployed again at another address went unnoticed.
"""

from __future__ import annotations

from typing import Callable

from kint import settings
from kint.chain.config import ChainConfig
from kint.chain.contract_source import chain_name, contract_source
from kint.chain.devchain.anvil import CHAIN_ID as DEVCHAIN_ID
from kint.protocol import ErrorCode, ProtocolError
from kint.settings.schema import DEFAULT_CONTRACT
from kint.tenant_worker.enrolment import Enrolment

# The highest epoch this machine has anchored or pulled of the space (0: none), asked only
# when a refusal is made: the mirror it reads is the space's whole state.
SeenHere = Callable[[], int]


def other_chain(enrolment: Enrolment, chain: ChainConfig,
                seen_here: SeenHere) -> ProtocolError | None:
    """The refusal to read the space's head through `chain` when its enrolment names
    another chain id or another contract, else None. The usual cases: `kint devchain
    stop` after trying kint on the devchain (kint then reads Base), a devchain started on a
    machine connected on Base, and a `contract` or KINT_CONTRACT set after the connect."""
    if enrolment.chain_id != chain.chain_id:
        return _other_chain_id(enrolment, chain, seen_here())
    if enrolment.contract.lower() != chain.anchor.lower():
        return _other_contract(enrolment, chain, seen_here())
    return None


def _where_epochs(seen: int) -> str:
    """What this machine holds of the space there, which is all it can know of it: another
    machine may have anchored more, and a space never pushed has none anywhere."""
    if seen > 0:
        return f"where this machine has anchored or pulled its epochs up to {seen}"
    return "where this machine has anchored or pulled none of its epochs"


def _connect_again(seen: int, now: str) -> str:
    """With none of the old epochs here, connecting again moves the enrolment
    (connect_owner.py `moved_from`); with some, it is refused, so it is not offered."""
    return f"; or run `kint connect` again to connect the space on {now}" if seen == 0 else ""


def _machine_rpc_url(chain: ChainConfig) -> tuple[str, str]:
    """(the machine's primary endpoint setting, named where it is in force; the word for
    taking it away). Which chain a space reads is the machine's choice (its KINT_RPC_URL
    beside the devchain's record: kint.chain.config.load_chain_config); a space's table or
    kept endpoints change how it reaches that chain, never which, so the way back is this
    setting, where it is set: "unset KINT_RPC_URL" said of `rpc_url` in config.toml
    changed nothing. Where it was set is the one lookup load_chain_config made
    (ChainConfig.machine_rpc_source), so a command that checks the space's chain itself
    (kint.commands.enrolled_contract) names the worker's setting, which `space_chain` handed
    it, where a lookup of its own named the caller's environment, which the worker does not
    use: "KINT_RPC_URL" said of one the supervisor was started with. A command's own
    environment is never named for the same reason."""
    source, where = chain.machine_rpc_source, chain.machine_rpc_where
    if source == settings.FILE and where:
        return f"rpc_url in {where}", "removed"
    if source == settings.DAEMON_ENV:
        return "KINT_RPC_URL in the supervisor's environment", "unset"
    return "KINT_RPC_URL", "unset"


def _other_chain_id(enrolment: Enrolment, chain: ChainConfig, seen: int) -> ProtocolError:
    was, now = chain_name(enrolment.chain_id), chain_name(chain.chain_id)
    machine, gone = _machine_rpc_url(chain)
    if enrolment.chain_id == DEVCHAIN_ID:
        hint = (f"read the devchain again: `kint devchain start` (its state is kept), with "
                f"{machine} {gone} or naming its endpoint")
    elif chain.devchain:
        hint = (f"stop the devchain (`kint devchain stop`), or set {machine} to an "
                f"endpoint of {was}, to read {was} again")
    elif machine == "KINT_RPC_URL":
        hint = f"point kint at {was} again (KINT_RPC_URL, or rpc_url in the config file)"
    else:
        hint = f"point kint at {was} again ({machine})"
    return ProtocolError(ErrorCode.CONFIG_INVALID,
                         f"this space was connected on {was} (chain id {enrolment.chain_id}), "
                         f"{_where_epochs(seen)}; kint now reads {now} (chain id "
                         f"{chain.chain_id})", hint + _connect_again(seen, now))


def _other_contract(enrolment: Enrolment, chain: ChainConfig, seen: int) -> ProtocolError:
    was, now = enrolment.contract, chain.anchor
    message = (f"this space was connected on the EpochAnchor at {was} on "
               f"{chain_name(chain.chain_id)}, {_where_epochs(seen)}; kint now reads the one "
               f"at {now} ({contract_source(chain)})")
    return ProtocolError(ErrorCode.CONFIG_INVALID, message,
                         _contract_hint(enrolment, chain)
                         + _connect_again(seen, f"the contract at {now}"))


def _contract_hint(enrolment: Enrolment, chain: ChainConfig) -> str:
    """The setting that gives the space its contract back, where it is set. Unset, on Base,
    the default is the deployment, so a space connected on it needs the setting removed."""
    was, source = enrolment.contract, chain.contract_source
    back_to_default = not chain.devchain and was.lower() == DEFAULT_CONTRACT.lower()
    if source == settings.FILE:
        return (f"remove `contract` from {chain.contract_where} (the default is {was})"
                if back_to_default else
                f"set `contract = \"{was}\"` in {chain.contract_where}")
    if source == settings.DAEMON_ENV:
        change, then = (("unset KINT_CONTRACT", "unset") if back_to_default else
                        (f"set KINT_CONTRACT={was}", f"{was}"))
        return (f"the supervisor was started with it: {change} in the service's environment "
                f"file and restart the service, or `kint supervisor stop` and run the next "
                f"command from an environment where it is {then}")
    if source == settings.THIS_CALL:
        return ("unset KINT_CONTRACT in this command's environment" if back_to_default else
                f"set KINT_CONTRACT={was} in this command's environment")
    return (f"set `contract = \"{was}\"` in $KINT_HOME/config.toml (or KINT_CONTRACT={was} in "
            f"the supervisor's environment)")
