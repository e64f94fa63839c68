"""The session key as `status` reports it once the chain head was read: its address, its
keystore's path, whether the file exists, and what the chain says of it
(kint.chain.key_facts: its balance, whether the owner authorized it until when), read
within the head's budget. v0.3.0's memory_status and `kint status` give these facts; an
agent reads them to tell "writes off: fund or authorize the key" apart from "nothing to
push".

Only reads: no unlock (the address is in the keystore's clear part), no transaction. A chain
read that fails leaves the local half and says why in `error`.
"""

from __future__ import annotations

import time
from typing import Any

from kint.chain.calls import ChainRefused
from kint.chain.key_facts import read_key_facts
from kint.chain.rpc import RpcUnavailable
from kint.custody.errors import CustodyError
from kint.custody.session_key import session_address, session_key_exists, session_key_path
from kint.tenant_worker.rpc_hint import bound_named
from kint.tenant_worker.space import SpaceContext

# The head's budget each read waits: what a read that timed out is said to have waited,
# where the chain's words name KINT_RPC_TIMEOUT.
HEAD_BUDGET = "KINT_VERIFY_HEAD_SECONDS"


def session_key_facts(ctx: SpaceContext, owner: str) -> dict[str, Any]:
    """The session key's facts for `owner`, each chain read bounded by the head's budget
    (KINT_VERIFY_HEAD_SECONDS: status answers within it, not KINT_RPC_TIMEOUT per read),
    and no read started once that budget has passed since the first: an endpoint slow but
    answering costs status at most two budgets here, not three."""
    home = ctx.config.home
    out: dict[str, Any] = {"address": None, "path": str(session_key_path(home)),
                           "exists": session_key_exists(home)}
    if not out["exists"]:
        return out
    try:
        out["address"] = session_address(home)
    except CustodyError as err:
        out["error"] = str(err)
        return out
    timeout_s = ctx.verify_head_seconds
    deadline = time.monotonic() + timeout_s

    def in_time() -> None:
        if time.monotonic() >= deadline:
            raise _OutOfTime

    try:
        anchor = ctx.head_anchor(ctx.chain().with_rpc_timeout(timeout_s))
        facts = read_key_facts(anchor, out["address"], owner, before_read=in_time)
    except (RpcUnavailable, ChainRefused) as err:  # a timeout names the head's budget
        out["error"] = f"the chain did not answer: {bound_named(str(err), HEAD_BUDGET)}"
    except _OutOfTime:
        out["error"] = f"not read: the chain took longer than {timeout_s:g} s to answer"
    else:
        out.update(facts.as_json())
    return out


class _OutOfTime(Exception):
    """The facts' time ran out between two reads."""
