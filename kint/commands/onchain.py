"""What `kint session-key` and `kint authorize` share once they talk to the chain: the chain
and its endpoint, and the chain's and the custody's failures as refusals. The owner they act
for (`kint.commands.owner_address`) and the session key's address
(`kint.commands.key_refusals`) load no web3, so a refused command line answers without it.

Why these run in the CLI process and not in a space's worker: they act for the machine
(one session key serves every space) and for an owner, not for a store; `authorize` signs
with the owner's key from the caller's environment, which never crosses to a worker, and
serves its loopback page here. Which endpoint and contract they use is still the space's
worker's when the caller's space is connected here (`open_anchor`, the worker's
`space_chain` op): the one its push and pull use.

Every refusal is what happened, with a code, and what to do (`common.refuse`), exit status
2 (09-cli.md's status table: a refusal from `authorize` is an error); bad input on the
command line is refused as every command refuses it (`common.usage_error`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any, NoReturn

import click
from web3.exceptions import Web3Exception

from kint import spaces
from kint.chain.anchor import Anchor, NoContractThere
from kint.chain.calls import answer_int, bounded
from kint.chain.chain_id import on_other_chain
from kint.chain.config import ChainConfig, ChainConfigError, load_chain_config
from kint.chain.rpc import RpcTracker, RpcUnavailable
from kint.chain import units
from kint.chain.units import eth_text
from kint.commands.common import Ctx, refuse
from kint.commands.enrolled_contract import check_enrolled_contract
from kint.commands.owner_address import enrolment
from kint.commands.key_refusals import refuse_custody
from kint.custody import errors as custody
from kint.paths import UnsafePathError
from kint.protocol import ErrorCode
from kint.protocol.errors import DEFAULT_HINTS
from kint.settings.urls import redact_url

# The chain settings the last `open_anchor` inside this `chain_errors` block gave it: the
# block wraps the open as well as the calls, so it has no Anchor in hand when a call times
# out, yet names the KINT_RPC_TIMEOUT that call waited (the worker's, when the space's
# worker gave it). Each block starts with none and puts back what it found as it ends, so
# a second invocation in the same process (click's CliRunner) never names the first's.
_opened: ContextVar[ChainConfig | None] = ContextVar("kint_opened_chain", default=None)
# The hints of a failure in a block that opened no chain (none to say where its settings
# came from): every place that may set them.
UNOPENED_RPC_HINT = ("check KINT_RPC_URL (or the devchain: kint devchain status) and the "
                     "endpoint, then run the command again")
UNOPENED_CONTRACT_HINT = ("check KINT_CONTRACT and KINT_RPC_URL: they must name kint's "
                          "EpochAnchor and an endpoint of the chain it is deployed on")


def open_anchor(obj: Ctx, home: Path, owner_given: str | None = None,
                say_endpoint: bool = False) -> Anchor:
    """EpochAnchor on the chain the caller's space uses, reached as its worker reaches it.

    v0.3.0 has one primary endpoint, KINT_RPC_URL, "for reads and sends" of every command
    (10-configuration.md): `authorize` and `session-key show` read the chain through the
    endpoint `push` sends through. Here that endpoint is the space's worker's (the running
    supervisor's settings, the space's config table, its `connect --rpc-urls`): when this
    machine is connected for the caller's space, the worker hands over the settings it runs
    with (its `space_chain` op), and a KINT_RPC_URL or KINT_CONTRACT of the caller's that it
    does not use is said on stderr, as every space command says it. With no space connected
    here there is no space's endpoint yet: the machine's settings as this process reads them
    are used, and with `say_endpoint` a line on stderr names the endpoint and what set it
    (`session-key show` names it in its JSON's `chain`).

    A space connected on another chain or contract than the one in force is refused when
    the owner is the space's own (from its enrolment, or `owner_given` naming it), as the
    worker refuses it (kint.commands.enrolled_contract)."""
    ref = spaces.resolve(obj.tenant, obj.db)
    found = enrolment(ref, home, "run kint connect again, or pass --tenant for a space "
                                 "that is connected here")
    if found is None:
        try:
            chain = load_chain_config(home)
        except ChainConfigError as err:
            refuse_config(err)
        anchor = Anchor(chain, RpcTracker(), label=ref.label)
        _opened.set(chain)
        if say_endpoint:
            click.echo(f"kint: no space is connected here for this store ({ref.space16}): "
                       f"the chain is read through {endpoint_said(anchor)}", err=True)
        return anchor
    from kint.commands.common import space_call
    from kint.tenant_worker.space_chain import chain_config

    chain = chain_config(space_call(obj, "space_chain", {}, timeout_s=30))
    check_enrolled_contract(found, chain, home, owner_given)
    _opened.set(chain)
    return Anchor(chain, RpcTracker(), label=ref.label)


def endpoint_said(anchor: Anchor) -> str:
    """Which endpoint a command read and where it came from, for a command that had no
    space's worker to ask (`open_anchor`): `http://host:port (chain N, from SOURCE)`."""
    config = anchor.config
    where = f" ({config.rpc_where})" if config.rpc_where else ""
    return (f"{redact_url(config.rpc_urls[0])} (chain {config.chain_id}, from "
            f"{config.rpc_source}{where})")


def refuse_config(err: ChainConfigError) -> NoReturn:
    """A chain setting refused (its own code: CONFIG_INVALID for one that does not parse,
    CORRUPT_STATE for a devchain record that does not, BAD_REQUEST for a contract that is
    not an address)."""
    code = ErrorCode(err.code)
    refuse(code, str(err), err.hint or DEFAULT_HINTS[code])


def chain_shown(anchor: Anchor) -> dict[str, Any]:
    """The chain a command reads and signs for, the endpoint it asks (redacted) and what
    set that endpoint (`rpc_source`, as `kint config show` names sources)."""
    return {"chain_id": anchor.config.chain_id, "rpc": redact_url(anchor.config.rpc_urls[0]),
            "rpc_source": anchor.config.rpc_source}


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
def chain_errors(what: str, anchor: Anchor | None = None) -> Iterator[None]:
    """Turn the chain's and the custody's failures into one-line refusals; a timeout names
    the KINT_RPC_TIMEOUT it waited and whose it was (`said`): `anchor`'s, for a block of
    calls through an Anchor an earlier block opened, else the one opened in this block. The
    hints name where that chain's endpoint and contract were set. A view that returned no
    data (NoContractThere) is no endpoint that did not answer: its hint is the contract's
    and the endpoint's, where it said that the devchain's endpoint did not answer; its
    message says what happened, the hint what to do (the message's own step said it twice)."""
    token = _opened.set(None)
    try:
        yield
    except NoContractThere as err:  # the endpoint answered: no EpochAnchor at the address
        refuse(ErrorCode.RPC_UNAVAILABLE, f"{what}: {err.happened}", err.step)
    except RpcUnavailable as err:
        refuse(ErrorCode.RPC_UNAVAILABLE,
               f"{what}: the chain did not answer ({said(err, anchor)})",
               unanswered_hint(_chain_of(anchor)))
    except ChainConfigError as err:
        refuse_config(err)
    except (custody.CustodyError, UnsafePathError) as err:
        refuse_custody(err)
    except Web3Exception as err:  # e.g. KINT_CONTRACT names something that is not EpochAnchor
        refuse(ErrorCode.CONFIG_INVALID,
               f"{what}: the contract did not answer as EpochAnchor ({type(err).__name__}: "
               f"{str(err)[:200]})",
               not_epoch_anchor_hint(_chain_of(anchor)))
    finally:
        _opened.reset(token)


def _chain_of(anchor: Anchor | None) -> ChainConfig | None:
    """The chain settings a `chain_errors` block's calls went through: `anchor`'s, else the
    ones the last `open_anchor` in the block gave (None: it failed before one was opened)."""
    return anchor.config if anchor is not None else _opened.get()


def unanswered_hint(chain: ChainConfig | None) -> str:
    """RPC_UNAVAILABLE's hint for a command's own chain call, naming where `chain`'s
    endpoints in force were set as a worker's names them (rpc_hint.endpoint_hint): the
    devchain's record, the space's `connect --rpc-urls`, a config file, else KINT_RPC_URL.
    It said "check KINT_RPC_URL (or the devchain ...)" whatever set them, where a KINT_RPC_URL
    the space's worker does not use changes nothing. With no chain opened, both places."""
    if chain is None:
        return UNOPENED_RPC_HINT
    from kint.tenant_worker.rpc_hint import endpoint_hint  # the worker's phrasing

    return endpoint_hint(chain)


def not_epoch_anchor_hint(chain: ChainConfig | None) -> str:
    """CONFIG_INVALID's hint for a contract that did not answer as EpochAnchor: the contract
    and the endpoint in force, each named where it was set (kint.chain.contract_source), as
    doctor's contract check and a view with no data (NoContractThere's step) name them. It
    said "check KINT_CONTRACT and KINT_RPC_URL" of a contract a devchain's record or
    config.toml set."""
    if chain is None:
        return UNOPENED_CONTRACT_HINT
    from kint.chain.contract_source import contract_check

    return contract_check(chain)


def said(err: RpcUnavailable, anchor: Anchor | None = None) -> str:
    """A failed chain call of this command in words, a timeout naming the KINT_RPC_TIMEOUT
    it waited and whose it was: `anchor`'s, else the chain the last `open_anchor` gave."""
    from kint.tenant_worker.rpc_hint import chain_timeout_named  # the worker's phrasing

    chain = anchor.config if anchor is not None else _opened.get()
    return str(err) if chain is None else chain_timeout_named(str(err), chain)


def chain_now(anchor: Anchor) -> int:
    """Now, as the contract will see it: the later of this clock and the newest block.

    The contract compares expiries and deadlines with block.timestamp, so a deadline must
    never start from a clock behind the chain's; a chain whose newest block is old (an idle
    devchain mines only on demand) must not pull it into the past either."""
    stamp = bounded(lambda: answer_int(anchor.w3.eth.get_block("latest")["timestamp"]),
                    "reading the newest block")
    return max(int(time.time()), stamp)


def receipt_cost(receipt: Any) -> int:
    """What a mined transaction cost its sender in wei (kint.chain.units.receipt_cost)."""
    return units.receipt_cost(receipt)["cost_wei"]


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
