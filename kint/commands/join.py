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

Every chain read is the space's worker's (`read_chain`), so join reads the chain where its
connect and restore do, whatever this process's environment says (a KINT_RPC_URL or
KINT_CONTRACT the worker does not use is said in one line, as for `kint connect`).

It sends no transaction. Each step says its lines as it goes (`Said`); with `--json`
nothing is said until one object at the end, each step's result under its name. A failure
prints `join stopped at <step>: <message> [CODE]` (with `--json`, the refusal object with the
`step`) and exits 2 when it stops before the restore, or with `kint pull`'s status (3, 4,
5, 6) when the restore refuses (kint.commands.exit_codes, command "join"). Ctrl-C is
printed the same way, naming the step it stopped, and exits 130 (`interrupted`); at the
secret's prompt, before the first step runs, it names `connect`, the step the secret is for.
"""

from __future__ import annotations

import os

import click

from kint import render, spaces
from kint.commands.common import (Ctx, call_with_progress, echo_json, json_option,
                                  refuse_blank_space_options, resolve_space, usage_error)
from kint.commands.connect import connect_args
from kint.commands.join_steps import (enrolment_here, harnesses_step, joined_lines,
                                      read_chain, restore_lines, session_key_step, vault_step,
                                      writes_step)
from kint.commands.join_stops import (STEP_CONNECT, STEP_HARNESSES, STEP_REPORT,
                                      STEP_RESTORE, STEP_SESSION_KEY, STEP_VAULT, Said,
                                      interrupted, secret_refused, stopper)
from kint.commands.owner_address import checked_address
from kint.commands.secrets import refusing_secrets_with, signature_options
from kint.commands.setup import SetupError
from kint.tx_text import with_tx_0x
from kint.harnesses.env_checks import parse_env, pin_flag
from kint.paths import kint_home

HARNESS_TARGETS = ("all", "claude", "codex", "hermes", "openclaw")


def parse_env_pairs(pairs: tuple[str, ...], tenant: str) -> dict[str, str]:
    """`--env K=V` pairs for the server process, checked before any step the way `kint
    setup` checks them (kint.harnesses.env_checks.parse_env: names, and no secret or PYTHONPATH);
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


def refuse_two_values(obj: Ctx, tenant: str | None, db: str | None) -> None:
    """`--tenant` (or `--db`) given before the command and after it, with two values, is
    refused (exit 2): the tenant and the store pick the space, so the vault join connects
    and restores, and taking one of two values silently would join another memory than
    the user may have meant. The same value twice is taken, and so is one store named by
    two paths: they are compared as the files they lead to (os.path.realpath, links
    followed before `..`), not as text, where `link/../x` and `x` were one store however
    far the link leads. The refusal shows each value as it was typed."""
    for flag, before, after in (("--tenant", obj.tenant, tenant), ("--db", obj.db, db)):
        if before is None or after is None:
            continue
        same = (before == after if flag == "--tenant" else
                os.path.realpath(os.path.expanduser(before))
                == os.path.realpath(os.path.expanduser(after)))
        if not same:
            usage_error(f"{flag} given twice, {before!r} before the command and {after!r} "
                        f"after it", f"give {flag} once: it picks the space, so the memory "
                        f"join restores")


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
              help="The global --tenant, accepted after the command; given on both sides "
                   "with two values, refused.")
@click.option("--db", default=None, metavar="PATH",
              help="The global --db, accepted after the command; given on both sides naming "
                   "two stores, refused.")
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
    refuse_two_values(obj, tenant, db)
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
        with refusing_secrets_with(secret_refused):
            args = connect_args(owner, signature, signature_file, base_account,
                                passphrase_stdin, passphrase_prompt, False, recovery_code_stdin,
                                command="join", space16=ref.space16)
    except KeyboardInterrupt:  # at the secret's prompt, or while stdin had not brought it
        click.echo("", err=True)  # the prompt's line is still open
        interrupted(STEP_CONNECT)()
    home = kint_home()
    enrolment = enrolment_here(home, ref.space16)
    chain = read_chain(obj, STEP_VAULT, {})  # the contract the worker reads, for the header
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
               f"      contract {chain['contract']}, store {render.home_short(ref.db)}",
               "      this command writes nothing to the chain")

    step = STEP_SESSION_KEY  # where a Ctrl-C stops it, named in its refusal
    try:
        address = session_key_step(home, said)
        step = STEP_VAULT
        vault_step(obj, enrolment, owner, ref, source, new_vault, said)
        step = STEP_CONNECT
        connected = call_with_progress(obj, "connect", args, timeout_s=300,
                                       on_error=stopper(step, obj),
                                       on_interrupt=interrupted(step))
        said.step("connect", connected, *joined_lines(connected))
        step = STEP_RESTORE
        restored = call_with_progress(obj, "pull", {"full": full,
                                                    "discard_local": discard_local},
                                      timeout_s=1800, command="join",
                                      on_error=stopper(step, obj),
                                      on_interrupt=interrupted(step))
        said.step("restore", restored, *restore_lines(restored))
        step = STEP_HARNESSES
        harnesses_step(None if no_setup else (setup_target or "all"), env, said)
        step = STEP_REPORT
        writes_step(obj, chain["devchain"], owner, address, base_account, said)
    except KeyboardInterrupt:  # at a step of join's own, not a worker's request
        interrupted(step)()
    if as_json:
        # The restore's epochs carry the worker's bare hashes: `0x` as `kint pull --json`.
        echo_json(with_tx_0x(said.result))
