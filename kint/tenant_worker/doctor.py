"""The space's half of `kint doctor`: what only the worker can check (the chain through
this space's own endpoints, the keys it holds, the store it reads)."""

from __future__ import annotations

import os
from typing import Any

from kint.tenant_worker.space import SpaceContext


def _check(name: str, ok: bool, detail: str, hint: str = "") -> dict[str, Any]:
    return {"name": name, "ok": ok, "detail": detail, "hint": hint if not ok else ""}


MIN_SESSION_BALANCE_WEI = 2 * 10**13  # 0.00002 ETH: v0.3.0's doctor threshold (ok above it)


def doctor(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    from kint.protocol import ProtocolError
    from kint.chain.anchor import Anchor
    from kint.chain.config import redact_url
    from kint.chain.rpc import RpcUnavailable
    from kint.custody.errors import CustodyError
    from kint.custody.recovery_code import recovery_file_present
    from kint.custody.session_key import session_address, session_key_exists
    from kint.custody.wraps import read_wraps
    from kint.tenant_worker.data_key import current_data_key
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
    from kint.tenant_worker.statefiles import CorruptStateFile

    try:
        enrolment = ctx.enrolment()
    except CorruptStateFile:
        enrolment = None  # the "state files" check below names it
    try:
        chain = ctx.chain()
    except ProtocolError as err:
        checks.append(_check("chain settings", False, err.message, err.hint))
        return {"checks": checks}
    anchor = Anchor(chain, ctx.tracker)
    if enrolment is None:
        checks.append(_check("enrolment", False, "this space is not connected",
                             "run `kint connect --owner ADDRESS` (or `kint connect --dev` on "
                             "the devchain)"))
    else:
        try:
            head = anchor.head(enrolment.owner, cfg.space_id)
            checks.append(_check("chain reachable", True,
                                 f"{redact_url(chain.rpc_urls[0])}: chain {chain.chain_id}, "
                                 f"contract {chain.anchor}, head epoch {head.seq}"))
        except RpcUnavailable as err:
            checks.append(_check("chain reachable", False, str(err),
                                 "check KINT_RPC_URL or the space's --rpc-urls"))
    problems = []
    if enrolment is not None:
        try:
            current_data_key(ctx)
        except ProtocolError as err:
            problems.append(err.message)
        if enrolment.vault_created and not recovery_file_present(cfg.home, cfg.space_id):
            problems.append(f"{ctx.state.files['recovery'].name} is missing or empty")
        try:
            if read_wraps(cfg.home, cfg.space_id) is None:
                problems.append("no key wraps recorded")
        except CustodyError as err:
            problems.append(str(err))
        checks.append(_check("data key", not problems,
                             "; ".join(problems) if problems else "cached, wraps recorded",
                             "run `kint connect` (or `kint recovery-code` for a lost recovery "
                             "file)"))
    from kint.tenant_worker.state_health import problems

    broken = problems(ctx)
    checks.append(_check("state files", not broken, "; ".join(broken) if broken else
                         "every file of this space reads", "move the file named aside and run "
                         "`kint pull` (or `kint connect` for a key file)"))
    checks += _disk_and_pull(ctx)
    if not session_key_exists(cfg.home):
        checks.append(_check("session key", False, "no session key on this machine",
                             "run `kint session-key create`"))
    elif enrolment is not None:
        try:
            address = session_address(cfg.home)
            balance = anchor.balance(address)
            authorized = anchor.can_write(enrolment.owner, address)
            ok = authorized and balance > MIN_SESSION_BALANCE_WEI
            checks.append(_check(
                "session key", ok, f"{address}: {balance / 1e18:.6f} ETH, "
                f"{'authorized' if authorized else 'NOT authorized'} for {enrolment.owner}",
                "fund it with a few cents of ETH and authorize it (kint authorize)"))
        except (CustodyError, RpcUnavailable) as err:
            checks.append(_check("session key", False, str(err), "check the session key file "
                                 "and the RPC"))
    return {"checks": checks}


def _disk_and_pull(ctx: SpaceContext) -> list[dict[str, Any]]:
    """Room on the disks under the store and KINT_HOME, and a pull left half-done (a full
    disk or a kill stopped it): both are what a user needs to hear while a disk is full."""
    from kint.tenant_worker.apply_journal import store_changes
    from kint.tenant_worker.disk_space import rooms
    from kint.tenant_worker.statefiles import CorruptStateFile
    from kint.tenant_worker.store import StoreUnreadable

    cfg = ctx.config
    found = rooms(cfg.db, cfg.kint_home)
    low = [room for room in found if room.low]
    checks = [_check("disk space", not low, "; ".join(r.describe() for r in low or found),
                     "free some space on that disk; kint and Sibyl resume where they stopped")]
    half = None
    try:
        mirror = ctx.state.mirror()
        if mirror is not None and os.path.exists(cfg.db):
            half, _ = store_changes(ctx.state, mirror, ctx.ro_connection(), cfg.tenant)
    except (CorruptStateFile, StoreUnreadable):
        pass  # the "state files" and "store readable" checks name it
    checks.append(_check("pull", half is None, half.message if half is not None else
                         "no pull left half-done", "free space if a disk is full, then run "
                         "`kint pull`"))
    return checks
