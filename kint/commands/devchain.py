"""`kint devchain start|stop|status|fund`: the embedded local chain (anvil on 127.0.0.1).

kint.chain.devchain (requests, eth_utils: ~0.15 s) loads when an action runs, not for
`kint devchain --help`.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Context, Decimal, Inexact, InvalidOperation
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import click

from kint.commands.common import echo_json, json_option, refuse, usage_error
from kint.commands.exit_codes import NO_DEVCHAIN
from kint.paths import kint_home
from kint.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kint.chain.devchain.lifecycle import Left
    from kint.chain.devchain.whose import Whose

NONE_RUNNING_HINT = "`kint devchain start` starts one"


def _or_exit(action: Callable[[ModuleType], Any]) -> Any:
    """Run `action` on kint.chain.devchain; a DevchainError is refused as every command
    refuses (its code, what happened, what to do; the JSON error object under --json),
    exit 2."""
    from kint.chain import devchain

    try:
        return action(devchain)
    except devchain.DevchainError as err:
        hint = err.hint or ("`kint devchain status` tells whether it runs; anvil's own log "
                            "is KINT_HOME/devchain/anvil.log")
        refuse(err.code, str(err), hint)


@click.group("devchain")
def devchain_group() -> None:
    """Run the local chain (anvil), its state under KINT_HOME/devchain.

    anvil is KINT_ANVIL when set; else, in kint's source checkout, the pinned npm package
    (`make node`); else `anvil` on PATH; else ~/.foundry/bin/anvil. To install one:
    `npm install -g @foundry-rs/anvil@<the pinned version>` or Foundry's `foundryup`.
    """


@devchain_group.command("start")
def devchain_start() -> None:
    """Start anvil on 127.0.0.1 (chain id 31337) and deploy EpochAnchor on a fresh chain."""
    home = kint_home()
    # One judgement of a copy, as status's: judged again here, its endpoint was asked again.
    record, whose = _or_exit(lambda devchain: devchain.judged_start(home))
    click.echo(_running_line(record, whose))


@devchain_group.command("stop")
def devchain_stop() -> None:
    """Stop this KINT_HOME's anvil; its state stays under KINT_HOME/devchain for the next
    start: the chain's blocks, transactions and logs, and its latest state, not the state at
    earlier blocks (a read at a block from before the stop is refused after the next
    start). Nothing else is ever signalled: not running is not an error."""
    home = kint_home()
    outcome, left = _or_exit(lambda devchain: devchain.judged_stop(home))
    if outcome == "stopped":
        click.echo("devchain stopped")
    elif left is not None:
        _left_elsewhere(home, left)
    else:
        click.echo("no devchain was running")


def _left_elsewhere(home: Path, left: Left) -> None:
    """What `stop` says of a copied record it left: its anvil named by its home's state file,
    not by its pid (another home's, another host's maybe, which says nothing here), and
    whether its endpoint answers; "stop it there" only of one that does and is not maybe
    this home's own running here, with a hint (`_left_hint`) on stderr, as a refusal's. Not
    running here is no error. Whose it is, worded as status's and start's refusals: this
    home's own record with its devchain/home.id removed is judged a copy too, and nothing
    here tells them apart."""
    from kint.chain.devchain.whose import UNSURE, record_answers
    from kint.settings.urls import redact_url

    record = left.record
    url = redact_url(str(record.get("rpc_url")))
    said = (f"no devchain of this KINT_HOME is running; the one recorded here by another "
            f"KINT_HOME, or by this one before its devchain/home.id was removed (state "
            f"{record.get('state')}),")
    answered = record_answers(record) if left.answered is None else left.answered
    maybe_own = left.runs_here and left.whose == UNSURE
    if answered and not maybe_own:
        click.echo(f"{said} answers at {url}: stop it there")
    elif answered:
        click.echo(f"{said} answers at {url}; the record is kept")
    else:
        click.echo(f"{said} does not answer at {url}; the record is kept")
    hint = _left_hint(home, left, answered)
    if hint is not None:
        click.echo(f"hint: {hint}", err=True)


def _left_hint(home: Path, left: Left, answered: bool) -> str | None:
    """`stop`'s hint over a copy it left; none for one answering elsewhere ("stop it
    there" says it). Removing the record is advised only when no anvil of it runs here
    (`Left.runs_here`): one running here may be on this home's state file, and a start
    after the removal began a second anvil on that file beside it. An anvil running here on
    this home's state file, whose home.id is gone and whose anvil.log cannot be read, is
    this home's own as likely as not: the hint names its pid and the step (the id its
    record names written back to devchain/home.id, as the record's own facts would write
    it: whose.adopt_id) after which `stop` stops it."""
    import shlex

    from kint.chain.devchain.records import home_id_path
    from kint.chain.devchain.whose import UNSURE

    record = left.record
    pid = record.get("pid")
    kept = record.get("home")
    if left.runs_here and left.whose == UNSURE and isinstance(kept, str) and kept:
        path = home_id_path(home)
        return (f"nothing was stopped: pid {pid} runs an anvil on this KINT_HOME's state file, "
                f"and whose it is cannot be told (no devchain/home.id here, and whether it "
                f"writes to this KINT_HOME's devchain/anvil.log cannot be read); if it is this "
                f"KINT_HOME's own, write the id its record names to {path} (`printf %s "
                f"{shlex.quote(kept)} > {shlex.quote(str(path))}`) and `kint devchain stop` "
                f"stops it; if another KINT_HOME started it, `kint devchain stop` there does")
    if left.runs_here:
        return None if answered else (
            f"nothing was stopped: its anvil runs on this machine (pid {pid}), another "
            f"KINT_HOME's, and is stopped by `kint devchain stop` where it was started; once "
            f"it is, `kint devchain stop` here says how to forget the record")
    return None if answered else _silent_copy_hint(home)


def _silent_copy_hint(home: Path) -> str:
    """`stop`'s hint over a copy whose endpoint does not answer and whose anvil does not run
    here. Status's (STOPPED_HINT: how to start that devchain again and reach it) is no
    answer to a stop: nothing was stopped, and what is left is the record, this home's own
    from before its home.id was removed or a copy of another's devchain, stopped or moved
    (a start takes a new port). What stops that devchain is its own home's `stop`; what
    forgets the record here is removing it."""
    from kint.chain.config import devchain_record

    return (f"nothing was stopped: a devchain another KINT_HOME started is stopped by "
            f"`kint devchain stop` where it was started; to forget this record (this "
            f"KINT_HOME's own from before its devchain/home.id was removed, or a copy no "
            f"longer wanted), remove {devchain_record(home)}")


@devchain_group.command("status")
@json_option("Print the record as JSON.")
def devchain_status(as_json: bool) -> None:
    """Whether the devchain runs, where, and EpochAnchor's address. Exit 3 when it does not.

    A record copied from another KINT_HOME is judged by whether its endpoint answers, and
    kept either way."""
    from kint.chain.devchain.errors import STOPPED_HINT

    home = kint_home()
    record, kept, whose = _or_exit(lambda devchain: devchain.judged_status(home))
    if record is None and whose:
        from kint.settings.urls import redact_url

        refuse(ErrorCode.RPC_UNAVAILABLE, f"the devchain recorded here by another KINT_HOME, "
               f"or by this one before its devchain/home.id was removed (state "
               f"{kept.get('state')}), does not answer at "
               f"{redact_url(str(kept.get('rpc_url')))}; the record is kept",
               STOPPED_HINT, NO_DEVCHAIN)
    if record is None:
        # Refused as `kint supervisor status` refuses with none running: the code on
        # stderr (the JSON error object under --json) and what starts one, exit 3.
        refuse(ErrorCode.RPC_UNAVAILABLE, f"no devchain is running for {home}",
               NONE_RUNNING_HINT, NO_DEVCHAIN)
    if as_json:
        echo_json(record)
    else:
        click.echo(_running_line(record, whose))


def _running_line(record: dict[str, Any], whose: Whose | None) -> str:
    """`start`'s and `status`'s line; a copied record's anvil is named by its home's state
    file, its pid being another home's (another host's, maybe). `whose` (None for this
    home's own) is whose.ANOTHER or whose.UNSURE: a copy only by the id this home no longer
    keeps, whose endpoint answering does not tell whose it is, is worded as the refusals
    word a silent copy. It said "started from another KINT_HOME" of this home's own record
    too, once its home.id was removed (a record with no genesis: whatever anvil took its
    port answers for chain 31337)."""
    from kint.chain.devchain.whose import UNSURE

    state = record.get("state")
    if whose is None:
        started = f"pid {record['pid']}"
    elif whose == UNSURE:
        started = (f"recorded here by another KINT_HOME, or by this one before its "
                   f"devchain/home.id was removed, state {state}")
    else:
        started = f"started from another KINT_HOME, state {state}"
    return f"devchain running at {record['rpc_url']} ({started}), EpochAnchor {record['anchor']}"


# The most `--eth` gives in one call: the devchain's ETH is worth nothing, but a typo of a
# few more digits is still a typo.
FUND_MAX_ETH = Decimal(1000)
OFF_DEVCHAIN_HINT = ("on Base, send ETH from a wallet; for the devchain, `kint devchain start` "
                     "here, or on a second machine a copy of the first's "
                     "KINT_HOME/devchain/devchain.json (docs/quickstart.md)")


# Wide enough for FUND_MAX_ETH in wei (22 digits) and more; a digit it would drop is not 0,
# so Inexact says the amount is not a whole number of wei.
_WEI_CONTEXT = Context(prec=40, traps=[Inexact, InvalidOperation])


def _fund_wei(eth: str) -> int:
    """`--eth` in wei: a decimal number of ETH above 0 and at most FUND_MAX_ETH, and a whole
    number of wei. Exact (Decimal, its exponent moved 18 places, no float): an amount below
    one wei came to 0 and sent a transfer of nothing, said as "funded", and one of more
    than 18 decimals was cut to whole wei unsaid."""
    try:
        amount = Decimal(eth)
    except InvalidOperation:
        amount = Decimal("NaN")
    if not amount.is_finite() or not 0 < amount <= FUND_MAX_ETH:
        usage_error(f"--eth {eth!r} is not an amount of ETH above 0 and at most {FUND_MAX_ETH}",
                    "give a decimal number of ETH, such as 1 or 0.05")
    try:
        wei = amount.scaleb(18, _WEI_CONTEXT)
        whole = wei == wei.to_integral_value()
    except Inexact:  # more digits than any whole amount up to FUND_MAX_ETH has
        whole = False
    if not whole:
        usage_error(f"--eth {eth!r} is not a whole number of wei: ETH has 18 decimals, one wei "
                    f"is 0.000000000000000001", "give at most 18 decimals, such as 0.05")
    return int(wei)


def _devchain_url() -> str:
    """The endpoint of the devchain kint reads here, as every command chooses it (the
    devchain's record, unless a KINT_RPC_URL names another endpoint); refused when kint
    reads another chain here, before anything is sent."""
    from kint import settings
    from kint.chain.config import ChainConfigError, load_chain_config, read_devchain
    from kint.settings.urls import redact_url

    home = kint_home()
    try:
        config = load_chain_config(home)
        record = read_devchain(home)
    except ChainConfigError as err:
        refuse(err.code, str(err), err.hint)
    if record is None:
        refuse(ErrorCode.RPC_UNAVAILABLE, f"no devchain is recorded for {home}: `kint devchain "
               f"fund` gives only the devchain's ETH", OFF_DEVCHAIN_HINT, NO_DEVCHAIN)
    if not config.devchain:
        reads = redact_url(config.rpc_urls[0])
        # The setting by its name, as other chain messages give it ("this call" said less).
        setting = (f"rpc_url in {config.rpc_where}" if config.rpc_source == settings.FILE
                   and config.rpc_where else "KINT_RPC_URL")
        refuse(ErrorCode.CONFIG_INVALID, f"kint reads {reads} here ({setting}), "
               f"not the devchain at {record.rpc_url}: `kint devchain fund` gives only the "
               f"devchain's ETH", "unset KINT_RPC_URL (or rpc_url in config.toml) to read the "
               "devchain; " + OFF_DEVCHAIN_HINT)
    return config.rpc_urls[0]


def _transfer(devchain: ModuleType, url: str, to: str, wei: int) -> dict[str, Any]:
    """The transfer; a devchain that does not answer before anything is sent is refused
    as `kint devchain status` refuses one not running (exit 3), a failure after it as
    every DevchainError (exit 2), so a script tells a stopped devchain from a failed send."""
    try:
        return dict(devchain.transfer_from_dev_account(url, to, wei))
    except devchain.DevchainSilent as err:
        refuse(err.code, str(err), err.hint, NO_DEVCHAIN)


@devchain_group.command("fund")
@click.argument("address")
# One ETH: a push costs the devchain a few thousandths of an ETH, so hundreds of pushes.
@click.option("--eth", default="1", show_default=True, metavar="AMOUNT",
              help="How much ETH to send, above 0 and at most 1000, in whole wei (no "
                   "fraction of a wei).")
@json_option("Print the transfer as JSON.")
def devchain_fund(address: str, eth: str, as_json: bool) -> None:
    """Send devchain ETH to ADDRESS (a session key `kint join` made, say) from anvil's first
    dev account. Devchain only: refused, nothing sent, where kint reads another chain."""
    from kint.chain.units import eth_text
    from kint.custody.ids import address_problem, checksum_address
    from kint.settings.urls import redact_url

    problem = address_problem(address)
    if problem is not None:
        usage_error(f"ADDRESS {address!r} {problem}", "give the address to fund, 0x and 40 hex")
    wei = _fund_wei(eth)
    url = _devchain_url()
    to = checksum_address(address)
    sent = _or_exit(lambda devchain: _transfer(devchain, url, to, wei))
    if as_json:
        # Redacted as every endpoint kint words: a KINT_RPC_URL carrying a key in its query
        # or user part is still the devchain's endpoint (same_endpoint ignores them).
        echo_json({"address": to, "amount_wei": wei, "amount_eth": eth_text(wei),
                   "rpc": redact_url(url),
                   **sent, "balance_eth": eth_text(sent["balance_wei"])})
        return
    click.echo(f"funded {to} with {eth_text(wei)} ETH from anvil's dev account {sent['from']}: "
               f"tx {sent['tx']} block {sent['block']}; it holds "
               f"{eth_text(sent['balance_wei'])} ETH")
