"""What `kint session-key` and `kint authorize` share once they talk to the chain: the chain
and its endpoint, and the chain's and the custody's failures as refusals. The owner they act
for (`kint.commands.owner_address`) and the session key's address
(`kint.commands.key_refusals`) load no web3, so a refused command line answers without it.

Why these run in the CLI process and not in a space's worker: they act for the machine
(one session key serves every space) and for an owner, not for a store, and each is one
short exchange with the chain that a terminal user waits for. No supervisor is needed.

Every refusal is what happened, with a code, and what to do (`common.refuse`), exit status
2 (09-cli.md's status table: a refusal from `authorize` is an error); bad input on the
command line is refused as every command refuses it (`common.usage_error`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from web3.exceptions import Web3Exception

from kint import settings, spaces
from kint.chain.anchor import Anchor
from kint.chain.calls import answer_int, bounded
from kint.chain.chain_id import on_other_chain
from kint.chain.config import ChainConfigError, load_chain_config
from kint.chain.rpc import RpcTracker, RpcUnavailable
from kint.chain.units import eth_text
from kint.commands.common import refuse
from kint.commands.enrolled_contract import check_enrolled_contract
from kint.commands.owner_address import enrolment
from kint.commands.key_refusals import refuse_custody
from kint.custody import errors as custody
from kint.paths import UnsafePathError
from kint.protocol import ErrorCode
from kint.protocol.errors import DEFAULT_HINTS
from kint.settings.urls import redact_url


def open_anchor(home: Path, tenant: str | None, db: str | None,
                owner_given: str | None = None) -> Anchor:
    """EpochAnchor on the chain this machine is configured for (a devchain under KINT_HOME,
    or Base), reached as the caller's space reaches it.

    v0.3.0 has one primary endpoint, KINT_RPC_URL, "for reads and sends" of every command
    (10-configuration.md): `authorize` and `session-key show` read the chain through the
    endpoint `push` sends through. Here a space may have endpoints of its own (`kint
    connect --rpc-urls`, kept in its enrolment, or its `[spaces."<label>"]` table in
    config.toml): when this machine is connected for the caller's space they are used, as
    its worker uses them, else the machine's. They change how the chain is reached, never
    which chain it is (kint.chain.config). `session-key show` names the endpoint it read.

    A space connected on another chain or contract than the one in force is refused when
    the owner is the space's own (from its enrolment, or `owner_given` naming it), as the
    worker refuses it (kint.commands.enrolled_contract)."""
    ref = spaces.resolve(tenant, db)
    found = enrolment(ref, home, "run kint connect again, or pass --tenant for a space "
                                 "that is connected here")
    space_urls = found.rpc_urls if found is not None else None  # checked by its reader
    if found is not None:
        settings.configure(space=(ref.label, ref.space16, ref.space_id))
    try:
        chain = load_chain_config(home, space_urls)
    except ChainConfigError as err:
        refuse_config(err)
    if found is not None:
        check_enrolled_contract(found, chain, home, owner_given)
    return Anchor(chain, RpcTracker())


def refuse_config(err: ChainConfigError) -> NoReturn:
    """A chain setting refused (its own code: CONFIG_INVALID for one that does not parse,
    CORRUPT_STATE for a devchain record that does not, BAD_REQUEST for a contract that is
    not an address)."""
    code = ErrorCode(err.code)
    refuse(code, str(err), err.hint or DEFAULT_HINTS[code])


def chain_shown(anchor: Anchor) -> dict[str, Any]:
    """The chain a command reads and signs for, and the endpoint it asks (redacted)."""
    return {"chain_id": anchor.config.chain_id, "rpc": redact_url(anchor.config.rpc_urls[0])}


def endpoint_on_other_chain(anchor: Anchor) -> tuple[str, str] | None:
    """(what is wrong, what to do) when the endpoint answers for another chain than the one
    kint signs for (kint.chain.chain_id). One eth_chainId read, through the caller's own
    Anchor (`open_anchor`'s, on the primary endpoint: the one the command goes on to use);
    RpcUnavailable when the endpoint does not answer."""
    return on_other_chain(anchor.config, {0: anchor.chain_id()})


def refuse_other_chain(anchor: Anchor) -> None:
    """Refuse, naming both chain ids, when the endpoint answers for another chain than the
    one kint signs for: a signature or a transaction made here would not be taken there
    (or would act on whatever that chain holds at the contract's address)."""
    found = endpoint_on_other_chain(anchor)
    if found is not None:
        refuse(ErrorCode.STALE_RPC,
               f"{found[0]}: a signature or transaction made here would not verify there",
               found[1])


@contextlib.contextmanager
def chain_errors(what: str) -> Iterator[None]:
    """Turn the chain's and the custody's failures into one-line refusals."""
    try:
        yield
    except RpcUnavailable as err:
        refuse(ErrorCode.RPC_UNAVAILABLE, f"{what}: the chain did not answer ({err})",
               "check KINT_RPC_URL (or the devchain: kint devchain status) and the "
               "endpoint, then run the command again")
    except ChainConfigError as err:
        refuse_config(err)
    except (custody.CustodyError, UnsafePathError) as err:
        refuse_custody(err)
    except Web3Exception as err:  # e.g. KINT_CONTRACT names something that is not EpochAnchor
        refuse(ErrorCode.CONFIG_INVALID,
               f"{what}: the contract did not answer as EpochAnchor ({type(err).__name__}: "
               f"{str(err)[:200]})",
               "check KINT_CONTRACT and KINT_RPC_URL: they must name kint's EpochAnchor and "
               "an endpoint of the chain it is deployed on")


def chain_now(anchor: Anchor) -> int:
    """Now, as the contract will see it: the later of this clock and the newest block.

    The contract compares expiries and deadlines with block.timestamp, so a deadline must
    never start from a clock behind the chain's; a chain whose newest block is old (an idle
    devchain mines only on demand) must not pull it into the past either."""
    stamp = bounded(lambda: answer_int(anchor.w3.eth.get_block("latest")["timestamp"]),
                    "reading the newest block")
    return max(int(time.time()), stamp)


def receipt_cost(receipt: Any) -> int:
    """What a mined transaction cost its sender in wei: gas used times the effective price,
    plus the L1 data fee an OP-stack chain such as Base adds to its receipts."""
    cost = int(receipt["gasUsed"]) * int(receipt.get("effectiveGasPrice") or 0)
    l1_fee = receipt.get("l1Fee")
    if l1_fee is not None:
        cost += int(l1_fee, 16) if isinstance(l1_fee, str) else int(l1_fee)
    return cost


def tx_hash_text(receipt: Any) -> str:
    """The receipt's transaction hash as `0x` and 64 hex digits."""
    tx_hash = receipt["transactionHash"]
    shown = tx_hash.hex() if isinstance(tx_hash, (bytes, bytearray)) else str(tx_hash)
    return shown if shown.startswith("0x") else "0x" + shown


def cost_and_block(receipt: Any) -> str:
    """`cost X ETH, block N`, the end of kint v0.3.0's `authorized ...` lines."""
    return f"cost {eth_text(receipt_cost(receipt))} ETH, block {int(receipt['blockNumber'])}"


def tx_line(receipt: Any, payer: str) -> str:
    """`tx 0x..., block N, cost X ETH (paid by ...)`."""
    return (f"tx {tx_hash_text(receipt)}, block {int(receipt['blockNumber'])}, cost "
            f"{eth_text(receipt_cost(receipt))} ETH (paid by {payer})")
