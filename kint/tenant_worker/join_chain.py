"""`join_chain`: what `kint join` reads of the chain for itself, read in the space's worker.

join's connect and restore run here, with the running supervisor's settings and the space's
own endpoints (its `[spaces."<label>"]` table, an earlier `kint connect --rpc-urls`). Its
own reads (the contract it names in its first lines, the vault's head at its vault step,
the session key's facts in its report) read the chain here too, for the same reason: a
caller whose environment names another endpoint or contract would otherwise stop at a dead
endpoint that its connect never uses, or name a contract its restore does not read. The
caller's values that are not used are reported in one line each, by the wire that carries
every request's settings (kint.settings.wire), as for `kint connect`.

Only reads: no key is unlocked (the session key's address is the caller's), nothing is
written, no head lock is taken, so it runs beside a push or pull of the space.
"""

from __future__ import annotations

from typing import Any

from kint import settings
from kint.custody.ids import address_problem, checksum_address
from kint.protocol import ErrorCode, ProtocolError
from kint.tenant_worker.chain_refusal import chain_unavailable
from kint.tenant_worker.space import SpaceContext


def join_chain(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    """The contract and whether it is the devchain's; with `head`, the head of (`owner`,
    this space); with `key`, that session key's balance and, for `owner`, its authorization
    (or `key_error` when the chain did not answer: join reports writes as unknown then,
    and does not stop). A chain setting refused is refused with its own code."""
    from kint.chain.anchor import Anchor

    anchor = Anchor(ctx.chain(), ctx.tracker)
    out: dict[str, Any] = {"contract": anchor.address, "devchain": anchor.config.devchain}
    owner, key = args.get("owner"), args.get("key")
    if not (args.get("head") or key):
        return out
    owner = _address("owner", owner)
    key = _address("key", key) if key else None
    if settings.value("KINT_OFFLINE"):
        raise ProtocolError(ErrorCode.BAD_REQUEST, "KINT_OFFLINE=1, and join reads the chain "
                            "head and restores from the chain", "unset KINT_OFFLINE")
    if args.get("head"):
        out["head"] = _head(ctx, anchor, owner)
    if key:
        out.update(_key_facts(anchor, key, owner))
    return out


def _address(name: str, value: str | None) -> str:
    """An address the caller sent, checksummed, or BAD_REQUEST naming the argument: it
    goes into chain calls. Checked as the command line checks it (kint.custody.ids)."""
    problem = address_problem(value)
    if problem is not None:
        raise ProtocolError(ErrorCode.BAD_REQUEST, f"join_chain: argument {name!r} must be "
                            f"an address: {value!r} {problem}")
    return checksum_address(value)


def _head(ctx: SpaceContext, anchor: Any, owner: str) -> dict[str, int]:
    """The head's seq and block, or join's vault-step refusals: an endpoint that does not
    answer (its hint naming what set it), one of another chain (STALE_RPC, asked first: join
    printed that chain's head as the vault's, and only its connect step after it refused
    the endpoint; on the devchain, as connect asks it, every endpoint but the one the
    devchain's record sets, which a space's table or kept endpoints may replace:
    kint.tenant_worker.connect), a contract that does not answer as EpochAnchor."""
    from web3.exceptions import Web3Exception

    from kint.chain.calls import ChainRefused
    from kint.chain.chain_id import other_chain
    from kint.chain.config import DEVCHAIN_SOURCE
    from kint.chain.contract_source import contract_check
    from kint.chain.rpc import RpcUnavailable
    from kint.tenant_worker.connect import another_chain_refused
    from kint.tenant_worker.rpc_hint import endpoint_hint

    try:
        chain = anchor.config
        own = chain.devchain and chain.rpc_source == DEVCHAIN_SOURCE  # the record's anvil
        found = None if own else other_chain(chain, ctx.tracker)
        if found is not None:
            raise another_chain_refused(found, "join read no head from it")
        head = anchor.head(owner, ctx.config.space_id)
    except RpcUnavailable as err:
        raise chain_unavailable(err, "cannot read the chain head: ",
                                endpoint_hint(anchor.config)) from None
    except (ChainRefused, Web3Exception) as err:
        raise ProtocolError(ErrorCode.CONFIG_INVALID, f"the contract at {anchor.address} did "
                            f"not answer as EpochAnchor ({type(err).__name__})",
                            contract_check(anchor.config)) from None
    return {"seq": head.seq, "block": head.block}


def _key_facts(anchor: Any, key: str, owner: str) -> dict[str, Any]:
    """`key` (the facts, as kint.chain.key_facts gives them) or `key_error`."""
    from kint.chain.calls import ChainRefused
    from kint.chain.key_facts import read_key_facts
    from kint.chain.rpc import RpcUnavailable

    try:
        return {"key": read_key_facts(anchor, key, owner).as_json()}
    except (RpcUnavailable, ChainRefused) as err:
        return {"key_error": str(err)}
