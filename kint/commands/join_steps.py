"""The steps of `kint join` (join.py runs them in order, and its docstring says the whole
flow): the session key, the vault's head, the connect and restore lines, the harnesses, and
the closing report on whether this machine may write. Each step says its lines through
join_stops.Said and stops through join_stops.stop; every chain read is the space's worker's
(`read_chain`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, NoReturn

from kint import render, render_pull, spaces
from kint.client import KintError
from kint.commands.common import Ctx, space_call
from kint.commands.connect import fresh_vault_lines
from kint.commands.join_stops import (STEP_HARNESSES, STEP_REPORT, STEP_SESSION_KEY,
                                      STEP_VAULT, Said, interrupted, stop, stopper)
from kint.commands.setup import SetupError, reports_json, run_setup
from kint.paths import space_files
from kint.protocol.errors import ErrorCode

WRITES_OFF = ("writes: off until the session key is funded and authorized by the owner; "
              "reads work now")


def session_key_step(home: Path, said: Said) -> str:
    """The machine's session key, kept when there is one, else made: its address. A key
    made here is sealed with this command's local secret, and only the supervisor's
    workers open it: while one runs with another (join's own chain read has started one if
    none ran), join stops here, nothing written, as `kint session-key create` refuses
    (key_passphrase). Checked here rather than the key made in the worker, as `connect`
    makes it: the step and its line stay where they are, and the one check serves both."""
    from kint.commands.key_passphrase import supervisor_disagrees
    from kint.commands.key_refusals import custody_refusal
    from kint.custody.errors import CustodyError
    from kint.custody.session_key import create_session_key, session_key_exists

    if not session_key_exists(home):  # a key kept is not sealed again: nothing to refuse
        refused = supervisor_disagrees(home, "created", "`kint join`")
        if refused is not None:
            stop(STEP_SESSION_KEY, ErrorCode.CONFIG_INVALID, *refused)
    try:
        address, existed = create_session_key(home)
    except CustodyError as err:
        # A session.key kint cannot read: join keeps a key that is there and makes one only
        # where there is none, so it never gets past this on its own; the custody hint
        # (kint.protocol.hints.SESSION_KEY_CORRUPT_HINT) names the way out.
        found = custody_refusal(err)
        stop(STEP_SESSION_KEY, found.code, found.message,
             f"{found.hint}; then run kint join again")
    said.step("session_key", {"address": address, "created": not existed},
              f"session key: {address} (kept)" if existed else
              f"session key: {address} (created; it signs epochs for this machine and can "
              f"never decrypt)")
    return address


def read_chain(obj: Ctx, step: str, args: dict[str, Any],
               on_error: Callable[[KintError], NoReturn] | None = None) -> dict[str, Any]:
    """join's own chain reads (the contract, the vault's head, the session key's facts),
    asked of the space's worker (its `join_chain` op): they go where its connect and restore
    go, through the running supervisor's settings and the space's own endpoints, never
    through this process's environment, whose values the worker does not use are said in
    one line each as for `kint connect`. A refusal stops at `step`; so does Ctrl-C, which
    leaves nothing running that matters (a read)."""

    def on_interrupt(_op: str | None = None) -> NoReturn:
        interrupted(step)()

    return space_call(obj, "join_chain", args, timeout_s=60,
                      on_error=on_error or stopper(step, obj), on_interrupt=on_interrupt)


def enrolment_here(home: Path, space16: str) -> Any:
    """This machine's enrolment for the space (None when not connected), or a stop at the
    vault step when it cannot be read."""
    from kint.tenant_worker.enrolment import load_enrolment
    from kint.tenant_worker.statefiles import CorruptStateFile

    try:
        return load_enrolment(space_files(home, space16)["enrol"])
    except CorruptStateFile as err:
        stop(STEP_VAULT, ErrorCode.CORRUPT_STATE, f"{err.path} {err.why}",
             "move it aside and run kint join again")


def vault_step(obj: Ctx, enrolment: Any, owner: str, ref: spaces.SpaceRef, source: str,
           new_vault: bool, said: Said) -> None:
    """Read the head (in the space's worker: `read_chain`); with no epochs, stop unless a
    new vault is wanted (or is here: `enrolment`, this machine's for the space, names the
    owner)."""
    head = read_chain(obj, STEP_VAULT, {"owner": owner, "head": True})["head"]
    seq, block = head["seq"], head["block"]
    vault = {"head_seq": seq, "head_block": block if seq > 0 else None,
             "starts_here": seq == 0}
    if seq > 0:
        said.step("vault", vault, f"vault: head epoch {seq} at block {block}")
    elif new_vault:
        said.step("vault", vault, "vault: no epochs yet; --new-vault: a new vault starts here")
    elif enrolment is not None and enrolment.owner == owner:
        said.step("vault", vault, "vault: no epochs yet; this machine already holds the vault "
                  "for this owner and space")
    else:
        stop(STEP_VAULT, ErrorCode.BAD_REQUEST, f"the chain holds no epochs for owner {owner} "
             f"under tenant {ref.tenant} ({source}, space {ref.space16})",
             "give the tenant the memory was anchored under (kint join --tenant T ...); to "
             "start an empty vault here instead, pass --new-vault")


def joined_lines(connected: dict[str, Any]) -> list[str]:
    """join's one connect line (v0.3.0's); `kint connect` keeps its own three lines, and the
    owner, space and session key are on join's earlier lines already."""
    changed = [f"owner: {connected['owner_changed']}"] if connected.get("owner_changed") else []
    return [f"connected: key tag {connected.get('key_tag') or 'none'}, data key from "
            f"{connected['source']}", *fresh_vault_lines(connected), *changed]


def restore_lines(result: dict[str, Any]) -> list[str]:
    """The restore step's lines, in v0.3.0's words: what the pull did and the epochs it did
    not apply (render_pull.pull_lines, `kint pull`'s lines), then `restore:`."""
    head = result["head"]
    if result.get("gap") or result.get("applied"):
        last = f"restore: {result['message']}"  # `restored N epoch(s), R rows; ...`
    elif head["seq"] == 0:
        last = "restore: up to date (the vault has no epochs yet)"
    else:
        last = (f"restore: up to date; head seq {head['seq']} at block {head['block']}; "
                f"{result['report']}")
    return [*render_pull.pull_lines(result), last]


def harnesses_step(target: str | None, env: dict[str, str], said: Said) -> None:
    """kint-server registered through `kint setup` for `target` (None: --no-setup)."""
    if target is None:
        said.step("harnesses", None, "harnesses: not registered (--no-setup)")
        return
    try:
        reports = run_setup([target], env)
    except SetupError as err:
        stop(STEP_HARNESSES, ErrorCode(err.code), err.message, f"fix it and run kint join "
             f"again, or kint setup {target} on its own")
    lines = [line for report in reports for line in report.lines]
    said.step("harnesses", {"target": target, "reports": reports_json(reports)},
              *(f"harnesses: {line}" for line in lines or ["nothing to register"]))


class _Unread(Exception):
    """The worker did not answer the report's read: writes are unknown, join is done."""


def writes_step(obj: Ctx, devchain: bool, owner: str, address: str, base_account: bool,
            said: Said) -> None:
    """The report: whether the session key may write for the owner now, else what to do."""
    from kint.chain.key_facts import MIN_WRITE_BALANCE_WEI

    def unread(err: KintError) -> NoReturn:
        raise _Unread(f"{err.message} [{err.code}]")

    who = "the chain"
    try:
        read = read_chain(obj, STEP_REPORT, {"owner": owner, "key": address}, unread)
        error = read.get("key_error")
    except _Unread as err:  # the worker refused the read (or is down): join is done anyway
        read, error, who = {}, str(err), "the space's worker"
    if error is not None:
        nxt = f"kint session-key show, once {who} answers"
        said.step("writes", {"on": None, "error": error, "next": nxt},
                  f"writes: unknown, {who} did not answer ({error}); reads work now",
                  f"next: {nxt}")
        return
    facts = read["key"]
    funded = facts["balance_wei"] >= MIN_WRITE_BALANCE_WEI
    authorized = bool(facts.get("authorized"))
    shown = {"funded": funded, **facts}
    if authorized and funded:
        said.step("writes", {"on": True, **shown, "next": None}, "writes: on")
        return
    nxt = next_line(devchain, base_account, owner, address, funded, authorized,
                    facts["balance_eth"], render.utc_time(facts.get("expiry") or 0))
    said.step("writes", {"on": False, **shown, "next": nxt}, WRITES_OFF, f"next: {nxt}")


def next_line(devchain: bool, base_account: bool, owner: str, address: str, funded: bool,
              authorized: bool, held: str, until: str) -> str:
    """The `next:` line of a key that may not write yet: what it lacks, ETH (`held` now),
    the authorization (valid `until`), or both. On the devchain no wallet holds its ETH:
    `kint devchain fund` gives it, where "put a few cents of ETH on" sent the user looking
    for a wallet, and no kint command did it. Base's line is as it was."""
    how, note = _authorize_how(devchain, base_account, owner)
    if devchain:
        fund, chain = f"kint devchain fund {address}", []
    else:
        fund, chain = f"put a few cents of ETH on {address}", ["Base"]
    if not funded and not authorized:
        then = f"{fund} ({chain[0]})" if chain else fund
        return f"{then}, then {how}" + (f" ({note})" if note else "")
    if not funded:
        said = [*chain, f"it holds {held} ETH and is authorized until {until}"]
        return f"{fund} ({'; '.join(said)})"
    return f"{how} ({'; '.join([f'the key holds {held} ETH', *([note] if note else [])])})"


def _authorize_how(devchain: bool, base_account: bool, owner: str) -> tuple[str, str]:
    """The authorize lane the `next:` line names, and a note on it (or ""). On the devchain
    an EOA owner's key may be at hand: `kint connect --dev` keeps the one it made under the
    KINT_HOME that ran it (an owner of one's own, `--signature` or `join --new-vault`, has
    no such file), so `direct` is the lane, the page and payload lanes asking for a wallet
    that holds no devchain account. The key is read from a file into the environment, never
    typed where the shell's history keeps it."""
    if base_account:
        return "kint authorize page", ""
    if devchain:
        return ("KINT_OWNER_KEY=\"$(cat <the owner's key file>)\" kint authorize direct",
                f"if kint connect --dev made this owner, that file is KINT_HOME/devchain/"
                f"owner-{owner.lower()}.key on the machine that ran it; docs/quickstart.md")
    return "kint authorize page, or kint authorize payload then submit (docs/authorize.md)", ""
