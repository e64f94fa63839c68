"""`kint join`: the read half of setting up a machine, in one command.

Five steps, each reading the state first so a second run resumes instead of starting over,
then a report:

1. session key: kept when there is one, else created (kint.custody.session_key);
2. vault: the chain head for (owner, space), read by the worker's `join_chain` op; with no
   epochs it stops, unless `--new-vault` (or this machine already holds a vault for that
   owner and space);
3. connect: the worker's `connect` op, with the same three ways in as `kint connect`
   (`connect_args`), reported on one line (`joined_lines`);
4. restore: the worker's `pull` op, `--full` and `--discard-local` passed through;
5. harnesses: kint-server registered through `kint setup` (kint.commands.setup), with
   KINT_TENANT pinned to the tenant joined;
6. report: `writes: on` when the session key may push for the owner and holds at least
   0.00002 ETH (its facts read by `join_chain` too), else `writes: off until ...` and a
   `next:` line.

Every chain read is the space's worker's (`_read_chain`), so join reads the chain where its
connect and restore do, whatever this process's environment says (a KINT_RPC_URL or
KINT_CONTRACT the worker does not use is said in one line, as for `kint connect`).

It sends no transaction. Each step says its lines as it goes (`Said`); with `--json`
nothing is said until one object at the end, each step's result under its name. A failure
prints `join stopped at <step>: <message> [CODE]` (with `--json`, the refusal object with the
`step`) and exits 2 when it stops before the restore, or with `kint pull`'s status (3, 4,
5, 6) when the restore refuses (kint.commands.exit_codes, command "join"). Ctrl-C is
printed the same way, naming the step it stopped, and exits 130 (`_interrupted`); at the
secret's prompt, before the first step runs, it names `connect`, the step the secret is for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, NoReturn

import click

from kint import render, spaces
from kint.client import KintError
from kint.commands.common import (Ctx, call_with_progress, echo_json, json_option,
                                  json_refusals, refuse, refuse_blank_space_options,
                                  resolve_space, space_call, usage_error, worker_hint)
from kint.commands.connect import connect_args, fresh_vault_lines
from kint.commands.exit_codes import (ERROR, INTERRUPTED, INTERRUPTED_CODE, exit_code_for,
                                      interrupted_words)
from kint.commands.owner_address import checked_address
from kint.commands.secrets import refusing_secrets_with, signature_options
from kint.commands.setup import SetupError, reports_json, run_setup
from kint.harnesses import parse_env, pin_flag
from kint.paths import kint_home, space_files
from kint.protocol.errors import ErrorCode, split_notices

HARNESS_TARGETS = ("all", "claude", "codex", "hermes", "openclaw")
WRITES_OFF = ("writes: off until the session key is funded and authorized by the owner; "
              "reads work now")

STEP_SESSION_KEY = "session key"
STEP_VAULT = "vault"
STEP_CONNECT = "connect"
STEP_RESTORE = "restore"
STEP_HARNESSES = "harnesses"
STEP_REPORT = "report"


class Said:
    """What join says: each step's lines as it goes, or with `--json` nothing until the one
    object at the end (`result`, which each step fills under its name)."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.result: dict[str, Any] = {}

    def lines(self, *lines: str) -> None:
        if not self.as_json:
            for line in lines:
                click.echo(line)

    def step(self, name: str, value: Any, *lines: str) -> None:
        self.result[name] = value
        self.lines(*lines)


def stop(step: str, code: ErrorCode | str, message: str, hint: str | None = None,
         status: int = ERROR) -> NoReturn:
    """`join stopped at <step>: <message> [CODE]` and what to do on stderr, then exit
    `status`; with `--json` the refusal object, naming the step. The code ends the line
    whichever step refused, as it ends every other refusal line."""
    value = code.value if isinstance(code, ErrorCode) else code
    if json_refusals():
        refuse(value, message, hint, status, step=step)
    click.echo(f"join stopped at {step}: {message} [{value}]", err=True)
    hint, notices = split_notices(hint)
    if hint:
        click.echo(f"hint: {hint}", err=True)
    for line in notices:
        click.echo(line, err=True)
    raise SystemExit(status)


def _stopper(step: str, obj: Ctx) -> Any:
    """The `on_error` for a worker call: steps before the restore exit 2, the restore with
    pull's status for the refusal's code."""

    def on_error(err: KintError) -> NoReturn:
        if obj.debug:
            import traceback

            traceback.print_exc()
        status = exit_code_for("join", err.code) if step == STEP_RESTORE else ERROR
        stop(step, err.code, err.message, worker_hint(err), status)

    return on_error


def _interrupted(step: str) -> Callable[..., NoReturn]:
    """Ctrl-C at `step`: join's own refusal naming the step (under `--json`, `step` in the
    object, as every refusal of join's carries it), exit 130 as every command's Ctrl-C.
    `op` is the worker request the step was waiting on, which goes on to its end there."""

    def on_interrupt(op: str | None = None) -> NoReturn:
        message, hint = interrupted_words(op)
        stop(step, INTERRUPTED_CODE, message, hint, INTERRUPTED)

    return on_interrupt


def _secret_refused(message: str, hint: str | None) -> NoReturn:
    """A secret that did not come, or came empty: the connect step's, which it is for, named
    as Ctrl-C at its prompt is (before the first step runs)."""
    stop(STEP_CONNECT, ErrorCode.BAD_REQUEST, message, hint)


def parse_env_pairs(pairs: tuple[str, ...], tenant: str) -> dict[str, str]:
    """`--env K=V` pairs for the server process, checked before any step the way `kint
    setup` checks them (kint.harnesses.parse_env: names, and no secret or PYTHONPATH);
    KINT_TENANT is the tenant joined."""
    try:
        env = parse_env(pairs)
    except SetupError as err:
        usage_error(err.message, err.hint or None)
    if env.get("KINT_TENANT", tenant) != tenant:
        usage_error(f"--env KINT_TENANT={env['KINT_TENANT']} is not the tenant this join uses "
                    f"({tenant})", f"give --tenant {env['KINT_TENANT']} instead")
    env["KINT_TENANT"] = tenant
    return env


# -- the steps ------------------------------------------------------------------------------


def _session_key(home: Path, said: Said) -> str:
    from kint.commands.key_refusals import custody_refusal
    from kint.custody.errors import CustodyError
    from kint.custody.session_key import create_session_key

    try:
        address, existed = create_session_key(home)
    except CustodyError as err:
        # A session.key kint cannot read: join keeps a key that is there and makes one only
        # where there is none, so it never gets past this on its own; the custody hint
        # (custody_errors.SESSION_KEY_CORRUPT_HINT) names the way out.
        found = custody_refusal(err)
        stop(STEP_SESSION_KEY, found.code, found.message,
             f"{found.hint}; then run kint join again")
    said.step("session_key", {"address": address, "created": not existed},
              f"session key: {address} (kept)" if existed else
              f"session key: {address} (created; it signs epochs for this machine and can "
              f"never decrypt)")
    return address


def _read_chain(obj: Ctx, step: str, args: dict[str, Any],
                on_error: Callable[[KintError], NoReturn] | None = None) -> dict[str, Any]:
    """join's own chain reads (the contract, the vault's head, the session key's facts),
    asked of the space's worker (its `join_chain` op): they go where its connect and restore
    go, through the running supervisor's settings and the space's own endpoints, never
    through this process's environment, whose values the worker does not use are said in
    one line each as for `kint connect`. A refusal stops at `step`; so does Ctrl-C, which
    leaves nothing running that matters (a read)."""

    def on_interrupt(_op: str | None = None) -> NoReturn:
        _interrupted(step)()

    return space_call(obj, "join_chain", args, timeout_s=60,
                      on_error=on_error or _stopper(step, obj), on_interrupt=on_interrupt)


def _enrolment(home: Path, space16: str) -> Any:
    """This machine's enrolment for the space (None when not connected), or a stop at the
    vault step when it cannot be read."""
    from kint.tenant_worker.enrolment import load_enrolment
    from kint.tenant_worker.statefiles import CorruptStateFile

    try:
        return load_enrolment(space_files(home, space16)["enrol"])
    except CorruptStateFile as err:
        stop(STEP_VAULT, ErrorCode.CORRUPT_STATE, f"{err.path} {err.why}",
             "move it aside and run kint join again")


def _vault(obj: Ctx, enrolment: Any, owner: str, ref: spaces.SpaceRef, source: str,
           new_vault: bool, said: Said) -> None:
    """Read the head (in the space's worker: `_read_chain`); with no epochs, stop unless a
    new vault is wanted (or is here: `enrolment`, this machine's for the space, names the
    owner)."""
    head = _read_chain(obj, STEP_VAULT, {"owner": owner, "head": True})["head"]
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
    not apply (render.pull_lines, `kint pull`'s lines), then `restore:`."""
    head = result["head"]
    if result.get("gap") or result.get("applied"):
        last = f"restore: {result['message']}"  # `restored N epoch(s), R rows; ...`
    elif head["seq"] == 0:
        last = "restore: up to date (the vault has no epochs yet)"
    else:
        last = (f"restore: up to date; head seq {head['seq']} at block {head['block']}; "
                f"{result['report']}")
    return [*render.pull_lines(result), last]


def _harnesses(target: str | None, env: dict[str, str], said: Said) -> None:
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


def _writes(obj: Ctx, devchain: bool, owner: str, address: str, base_account: bool,
            said: Said) -> None:
    from kint.chain.key_facts import MIN_WRITE_BALANCE_WEI

    def unread(err: KintError) -> NoReturn:
        raise _Unread(f"{err.message} [{err.code}]")

    who = "the chain"
    try:
        read = _read_chain(obj, STEP_REPORT, {"owner": owner, "key": address}, unread)
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
    chain = "the devchain" if devchain else "Base"
    how = ("kint authorize page" if base_account else
           "kint authorize page, or kint authorize payload then submit (docs/authorize.md)")
    held = facts["balance_eth"]
    if not funded and not authorized:
        nxt = f"put a few cents of ETH on {address} ({chain}), then {how}"
    elif not funded:
        nxt = (f"put a few cents of ETH on {address} ({chain}; it holds {held} "
               f"ETH and is authorized until {render.utc_time(facts.get('expiry') or 0)})")
    else:
        nxt = f"{how} (the key holds {held} ETH)"
    said.step("writes", {"on": False, **shown, "next": nxt}, WRITES_OFF, f"next: {nxt}")


@click.command("join", short_help="A new machine's read half: key, connect, restore.")
@click.option("--owner", default=None, metavar="ADDRESS",
              help="The wallet that owns the memory (required).")
@click.option("--base-account", is_flag=True,
              help="The owner is a Base Account (a smart account): the vault passphrase is the "
                   "key, prompted.")
@signature_options("EOA owners: ")
@click.option("--recovery-code-stdin", is_flag=True,
              help="Either owner: the recovery code on stdin.")
@click.option("--passphrase-stdin", is_flag=True,
              help="Read the passphrase from stdin instead of prompting.")
@click.option("--passphrase-prompt", is_flag=True,
              help="EOA mode: prompt for the passphrase that salts the wallet key.")
@click.option("--new-vault", is_flag=True,
              help="Start a vault here when the chain holds no epochs for this owner and "
                   "tenant.")
@click.option("--discard-local", is_flag=True,
              help="Move the local store aside (.kint-backup-<time>) and restore from the "
                   "chain.")
@click.option("--full", is_flag=True,
              help="Walk past snapshot epochs to the first epoch, for the older versions.")
@click.option("--setup", "setup_target", type=click.Choice(HARNESS_TARGETS), default=None,
              help="Which harnesses to register kint-server with [default: all].")
@click.option("--no-setup", is_flag=True, help="Register no harness.")
@click.option("--env", "env_pairs", multiple=True, metavar="KEY=VALUE",
              help="Set in the server process, repeatable; KINT_TENANT is always the tenant "
                   "joined.")
@click.option("--tenant", default=None, metavar="TENANT",
              help="The global --tenant, accepted after the command.")
@click.option("--db", default=None, metavar="PATH",
              help="The global --db, accepted after the command.")
@json_option("Print what each step did as one JSON object at the end.")
@click.pass_obj
def join_cmd(obj: Ctx, owner: str | None, base_account: bool, signature: str | None,
             signature_file: str | None, recovery_code_stdin: bool, passphrase_stdin: bool,
             passphrase_prompt: bool, new_vault: bool, discard_local: bool, full: bool,
             setup_target: str | None, no_setup: bool, env_pairs: tuple[str, ...],
             tenant: str | None, db: str | None, as_json: bool) -> None:
    """Join this machine to an owner's memory: session key, connect, restore, and kint-server
    registered with the harnesses. Sends no transaction. Exit 2 when it stops before the
    restore, kint pull's status (3-6) when the restore refuses."""
    refuse_blank_space_options(tenant, db)
    obj = Ctx(tenant or obj.tenant, db or obj.db, obj.debug)
    if owner is None:
        usage_error("--owner 0x... is required", "give the owner wallet's address")
    owner = checked_address(owner)
    ways = [base_account, signature is not None, signature_file is not None,
            recovery_code_stdin]
    if sum(ways) != 1:
        usage_error(f"{'no' if not any(ways) else 'more than one'} way in given",
                    "give exactly one of --base-account, --signature -, --signature-file PATH "
                    "and --recovery-code-stdin")
    if no_setup and setup_target is not None:
        usage_error("--setup and --no-setup both given", "give --setup or --no-setup, not both")
    ref = resolve_space(obj)
    env = parse_env_pairs(env_pairs, ref.tenant)
    if db is not None or obj.db is not None:
        try:
            pin_flag(env, "SIBYL_MEMORY_DB", "--db", ref.db)
        except SetupError as err:
            usage_error(err.message, err.hint or None)
    try:
        with refusing_secrets_with(_secret_refused):
            args = connect_args(owner, signature, signature_file, base_account,
                                passphrase_stdin, passphrase_prompt, False, recovery_code_stdin,
                                command="join")
    except KeyboardInterrupt:  # at the secret's prompt, or while stdin had not brought it
        click.echo("", err=True)  # the prompt's line is still open
        _interrupted(STEP_CONNECT)()
    home = kint_home()
    enrolment = _enrolment(home, ref.space16)
    chain = _read_chain(obj, STEP_VAULT, {})  # the contract the worker reads, for the header
    source = spaces.tenant_origin(obj.tenant).source

    said = Said(as_json)
    said.result.update(owner=owner, tenant=ref.tenant, tenant_from=source, space=ref.space16,
                       space_id=ref.space_id, label=ref.label, contract=chain["contract"],
                       store=ref.db)
    # A tenant's name comes from the user's environment or Sibyl's credentials: escaped,
    # as every table and status line shows it, so no escape in it reaches the terminal.
    label = f" (label {render.printable(ref.label)})" if ref.label != ref.tenant else ""
    said.lines(f"join: owner {owner}",
               f"      tenant {render.printable(ref.tenant)} (from {source}), space "
               f"{ref.space16}{label}",
               f"      contract {chain['contract']}, store {ref.db}",
               "      this command writes nothing to the chain")

    step = STEP_SESSION_KEY  # where a Ctrl-C stops it, named in its refusal
    try:
        address = _session_key(home, said)
        step = STEP_VAULT
        _vault(obj, enrolment, owner, ref, source, new_vault, said)
        step = STEP_CONNECT
        connected = call_with_progress(obj, "connect", args, timeout_s=300,
                                       on_error=_stopper(step, obj),
                                       on_interrupt=_interrupted(step))
        said.step("connect", connected, *joined_lines(connected))
        step = STEP_RESTORE
        restored = call_with_progress(obj, "pull", {"full": full,
                                                    "discard_local": discard_local},
                                      timeout_s=1800, command="join",
                                      on_error=_stopper(step, obj),
                                      on_interrupt=_interrupted(step))
        said.step("restore", restored, *restore_lines(restored))
        step = STEP_HARNESSES
        _harnesses(None if no_setup else (setup_target or "all"), env, said)
        step = STEP_REPORT
        _writes(obj, chain["devchain"], owner, address, base_account, said)
    except KeyboardInterrupt:  # at a step of join's own, not a worker's request
        _interrupted(step)()
    if as_json:
        echo_json(said.result)
