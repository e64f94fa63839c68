"""The space's half of `kint doctor`: what only the worker can check (the store it reads,
the enrolment and keys it holds, its state files, and the chain through this space's own
endpoints, in doctor_chain.py)."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from kint.protocol.checks import check
from kint.tenant_worker.enrolled_chain import other_chain
from kint.tenant_worker.space import SpaceContext
from kint.tenant_worker.store_sharers import SHARING_HINT, other_homes_on_store, sharing_message


def doctor(ctx: SpaceContext, args: dict[str, Any]) -> dict[str, Any]:
    from kint.protocol import ProtocolError
    from kint.tenant_worker.doctor_chain import chain_checks, no_session_key
    from kint.tenant_worker.state_health import corrupt_error, problems_and_hints
    from kint.tenant_worker.statefiles import CorruptStateFile
    from kint.tenant_worker.store import check_openable
    from kint.tenant_worker.store_errors import StoreUnreadable

    cfg = ctx.config
    checks = []
    try:
        locked = check_openable(cfg.db)
        exists = os.path.exists(cfg.db)
        # v0.3.0's row: a store not created yet (a fresh machine) warns, and so does one
        # another process holds locked now (its rows are not counted below).
        if locked is not None:
            checks.append(check("sibyl store", True, str(locked), "run `kint doctor` again "
                                "once the other writer lets go of the store", warn=True))
        else:
            checks.append(check("sibyl store", True, cfg.db) if exists else
                          check("sibyl store", True, f"{cfg.db} (not created yet)",
                                "Sibyl creates it on the first write (the agent's "
                                "memory_remember through kint-server), or `kint pull` "
                                "restores it", warn=True))
    except StoreUnreadable as err:
        checks.append(check("sibyl store", False, str(err),
                            getattr(err, "hint", "check the store file")))
    sharers = other_homes_on_store(cfg.db, cfg.home)
    if sharers:  # a row only when it has something to say
        checks.append(check("store shared", True, sharing_message(cfg.db, sharers),
                            SHARING_HINT, warn=True))
    try:
        enrolment = ctx.enrolment()
    except CorruptStateFile:
        enrolment = None  # the "state files" check below names it
    try:
        chain = ctx.chain()
    except ProtocolError as err:
        # A chain setting refused (or a garbled devchain record): one failing check in
        # place of the chain's, and the space's local checks as ever.
        chain = None
        checks.append(check("chain settings", False, err.message, err.hint))
    if enrolment is None:
        checks.append(check("enrolment", False, "this space is not connected",
                            "run `kint connect --owner ADDRESS` (or `kint connect --dev` on "
                            "the devchain)"))
    else:
        checks.append(check("enrolment", True, f"owner {enrolment.owner} ({enrolment.account} "
                            f"account), space {cfg.space16}"))
        checks += [_data_key(ctx), _recovery_file(ctx, enrolment.vault_created)]
    broken = problems_and_hints(ctx)
    checks.append(check("state files", not broken,
                        "; ".join(said for said, _ in broken) if broken else
                        "every file of this space reads",
                        "; ".join(dict.fromkeys(hint for _, hint in broken))))
    checks.append(_journals(ctx))
    mirror, local_checks = _disk_pull_and_changes(ctx, enrolment is not None)
    checks += local_checks
    if enrolment is not None:
        try:
            elsewhere = (other_chain(enrolment, chain, ctx.seen_here) if chain is not None
                         else None)
        except CorruptStateFile as err:  # another chain, and the files to say so unread
            elsewhere = corrupt_error(err)
        if elsewhere is not None:  # first: the checks below are of the chain in force
            checks.append(check("chain", False, elsewhere.message, elsewhere.hint))
        if chain is not None:
            checks += chain_checks(chain, ctx.tracker, enrolment, cfg.home, cfg.space_id,
                                   mirror)
    else:
        checks += [c for c in [no_session_key(cfg.home)] if c is not None]
    return {"checks": checks}


def _journals(ctx: SpaceContext) -> dict[str, Any]:
    """A push or rekey journal still here (pending-<space16>.json, rekey-<space16>.json):
    the worker settles one when it starts and before every push, pull or rekey, so one
    that lingers is one no settlement could finish yet (an endpoint that did not answer,
    or a journal settled by no command since). A warning: nothing is lost while it waits,
    and the command that settles it is named. So is what a settlement found that no
    command has said yet (settled_notice.py): a user sees an outcome waits."""
    from kint.custody.rekey_journal import rekey_journal_path
    from kint.tenant_worker.former_key import rotated_signer
    from kint.tenant_worker.settled_notice import waiting

    cfg = ctx.config
    found = [path.name for path in (ctx.state.files["pending"],
                                    rekey_journal_path(cfg.home, cfg.space_id))
             if path.exists()]
    kept = waiting(ctx)  # a settlement's outcome no command has said yet
    if not found and kept is not None:
        return check("interrupted push", True, f"no push or rekey journal waiting; {kept}",
                     "run `kint pull`: it says it once, among its warnings", warn=True)
    if not found:
        return check("interrupted push", True, "no push or rekey journal waiting")
    signed_by = rotated_signer(cfg.home, ctx.state.files["pending"])
    before = (f"; its transaction was signed by the previous session key {signed_by} "
              f"(rotated since), whose nonce settles it" if signed_by else "")
    return check("interrupted push", True, f"{' and '.join(found)} in {cfg.kint_home}: a push "
                 f"or rekey was interrupted and is not settled with the chain yet{before}"
                 + (f"; {kept}" if kept is not None else ""),
                 "run `kint pull`: it settles it against the chain head first (recorded, "
                 "sent again or dropped), and says why when the endpoint cannot be read",
                 warn=True)


def _data_key(ctx: SpaceContext) -> dict[str, Any]:
    """The data key cached here and the key wraps recorded (v0.3.0's "cached data key")."""
    from kint.custody.errors import CustodyError
    from kint.custody.wraps import read_wraps
    from kint.protocol import ProtocolError
    from kint.tenant_worker.data_key import current_data_key

    problems = []
    try:
        current_data_key(ctx)
    except ProtocolError as err:
        problems.append(err.message)
    try:
        if read_wraps(ctx.config.home, ctx.config.space_id) is None:
            problems.append("no key wraps recorded")
    except CustodyError as err:
        problems.append(str(err))
    return check("data key", not problems, "; ".join(problems) if problems else
                 "cached, wraps recorded", "run `kint connect`")


def _recovery_file(ctx: SpaceContext, vault_created: bool) -> dict[str, Any]:
    """RECOVERY-<space16>.txt, on the machine that created the vault: push refuses there
    without it (push.py asks the same `vault_created` and `recovery_file_present`). Its
    mode is the permissions check's (the CLI's, by kint.home_modes' rule, for every
    recovery file under the home): a loose one is reported there, once, with its hint."""
    from kint.custody.recovery_code import recovery_file_present

    path = ctx.state.files["recovery"]
    if not vault_created:
        return check("recovery file", True, "not kept here: another machine created the vault")
    if not recovery_file_present(ctx.config.home, ctx.config.space_id):
        return check("recovery file", False, f"this machine created the vault and {path} is "
                     f"missing or empty: push refuses until it is there",
                     "run `kint recovery-code` to write it again and copy it off the machine")
    return check("recovery file", True, f"{path}; keep a copy off this machine")


def _disk_pull_and_changes(ctx: SpaceContext, connected: bool
                           ) -> tuple[Any, list[dict[str, Any]]]:
    """Room on the disks under the store and KINT_HOME, what a pull left to finish (an
    epoch half-done, a full disk or a kill stopped it; a lost store's restore in progress),
    and, on a connected space, the rows changed since the last anchored epoch, from one
    diff of the store against the mirror (`kint status`'s: the rows of a half-done pull
    are that pull's, never changes to push). Returns the mirror too, for the head check."""
    from kint.protocol import ProtocolError
    from kint.tenant_worker.disk_space import rooms
    from kint.tenant_worker.lost_restore import in_progress
    from kint.tenant_worker.statefiles import CorruptStateFile
    from kint.tenant_worker.store_errors import StoreUnreadable
    from kint.tenant_worker.unanchored import count_unanchored

    cfg = ctx.config
    found = rooms(cfg.db, cfg.kint_home)
    low = [room for room in found if room.low]
    checks = [check("disk space", not low, "; ".join(r.describe() for r in low or found),
                    "free some space on that disk; kint and Sibyl resume where they stopped")]
    mirror = half = local = None
    unreadable = False
    try:
        mirror = ctx.state.mirror()
        if os.path.exists(cfg.db):
            counted = count_unanchored(ctx, mirror)
            half, local = counted.half_done, counted.unanchored
    except (CorruptStateFile, StoreUnreadable, sqlite3.DatabaseError, ProtocolError):
        # The "state files" and "sibyl store" checks name it (a lock included, and a store
        # this user may not open, which the read-only connection refuses as a
        # ProtocolError); the rows are read with sqlite3's own errors, which would fail
        # the whole doctor.
        unreadable = True
    unfinished = [done.message for done in (half, in_progress(ctx.state)) if done is not None]
    checks.append(check("pull", not unfinished, "; ".join(unfinished) or
                        "no pull left half-done", "free space if a disk is full, then run "
                        "`kint pull`"))
    if not connected:
        pass
    elif local is None:
        checks.append(check("unanchored changes", True, "not counted: the store or the mirror "
                            "does not read" if unreadable else "none: no store yet"))
    elif local:
        checks.append(check("unanchored changes", True, f"{len(local.rows)} changed, "
                            f"{len(local.deleted)} deleted since the last anchored epoch: push",
                            "run `kint push` (kint-server's watcher pushes them on its own)",
                            warn=True))
    else:
        checks.append(check("unanchored changes", True, "none"))
    return mirror, checks
