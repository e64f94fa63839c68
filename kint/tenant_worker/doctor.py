"""The space's half of `kint doctor`: what only the worker can check (the chain through
this space's own endpoints, the keys it holds, the store it reads)."""

from __future__ import annotations

import os
from typing import Any

from kint.tenant_worker.space import SpaceContext


def _check(name: str, ok: bool, detail: str, hint: str = "") -> dict[str, Any]:
    return {"name": name, "ok": ok, "detail": detail, "hint": hint if not ok else ""}


def doctor(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    from kint.chain.anchor import Anchor
    from kint.chain.rpc import RpcUnavailable
    from kint.tenant_worker import keys
    from kint.tenant_worker.store import StoreUnreadable, check_openable

    cfg = ctx.config
    checks = []
    try:
        check_openable(cfg.db)
        exists = os.path.exists(cfg.db)
        checks.append(_check("store readable", True, cfg.db if exists else
                             f"{cfg.db} (not created yet)"))
    except StoreUnreadable as err:
        checks.append(_check("store readable", False, str(err), "check the store file"))
    enrolment = ctx.enrolment()
    chain = ctx.chain()
    if chain is None or enrolment is None:
        checks.append(_check("chain reachable", False, "this space is not connected",
                             "run `kint devchain start` and `kint connect --dev`, or "
                             "`kint connect` on a real chain"))
    else:
        try:
            head = Anchor(chain, ctx.tracker).head(enrolment.owner, cfg.space_id)
            checks.append(_check("chain reachable", True,
                                 f"{chain.rpc_urls[0]}: chain {chain.chain_id}, head epoch "
                                 f"{head.seq}"))
        except RpcUnavailable as err:
            checks.append(_check("chain reachable", False, str(err),
                                 "check KINT_RPC_URLS or the space's --rpc-urls"))
    problems = []
    if not keys.session_key_path(cfg.home).exists():
        problems.append("no session key")
    if enrolment is not None:
        try:
            keys.open_vault(cfg.home, cfg.space_id, keys.machine_secret(cfg.home).secret)
        except keys.KeysError as err:
            problems.append(str(err))
        if enrolment.vault_created and not ctx.state.files["recovery"].exists():
            problems.append(f"{ctx.state.files['recovery'].name} is gone")
        if not ctx.state.files["wraps"].exists():
            problems.append("no key wraps recorded")
    else:
        problems.append("not connected")
    checks.append(_check("keys present", not problems,
                         "; ".join(problems) if problems else "session key, vault, wraps",
                         "run `kint connect` (or `kint recovery-code` for a lost recovery "
                         "file)"))
    return {"checks": checks}
