"""`kint connect`: connect this machine to the owner's vault for this space.

The data key comes from the first of: the wraps this machine already holds, the header of
the newest readable epoch on chain, or a fresh vault when the chain has no epochs for this
owner and space. Three ways in, checked in this order: `--recovery-code-stdin` (the code is
the data key itself), `--smart-account` (a vault passphrase), otherwise an EOA owner's
derive signature over `kint canonical-payload`, piped on stdin (`--signature -`) or in a
file that is deleted after reading (`--signature-file`).

No secret ever travels on argv: `--signature` takes `-` or a path, never the signature.
`--dev` (devchain only) makes a throwaway owner, signs its vault message and authorizes
this machine's session key, so the demo is one command. It takes `--add-passphrase` and
refuses the flags that hand over another key (`DEV_REFUSALS`).
"""

from __future__ import annotations

import os

import click

from kint.commands.common import (Ctx, call_with_progress, echo_json, json_option,
                                  usage_error)
from kint.commands.secrets import (SIGNATURE_FILE_GONE, TYPE_IT, prompt_secret,
                                   read_passphrase_stdin, read_secret_file, read_stdin_line,
                                   refuse_secret, signature_options)

VAULT_PROMPT = "vault passphrase: "
SALT_PROMPT = "salt passphrase: "
EXTRA_PROMPT = "extra passphrase wrap (empty to skip): "
# kint v0.3.0's refusal of an EOA connect without its derive signature (14-agents.md,
# "Common errors and fixes").
NO_SIGNATURE = ("give the derive signature with --signature - (stdin) or --signature-file "
                "PATH; never on argv")


def checked_rpc_urls(value: str, space: Ctx | None = None) -> str:
    """`--rpc-urls`, refused when an endpoint has a part that may hold an API key: a command
    line is readable by every local user (/proc/<pid>/cmdline) and stays in shell history.
    Such an endpoint belongs in the config file's space table or in KINT_RPC_URL: the
    table named by the label of `space`'s store (`--tenant`, `--db`), where the hint said
    a literal `<label>`."""
    import urllib.parse

    from kint.settings.urls import redact_url, url_may_hold_a_key

    urls = [url.strip() for url in value.split(",") if url.strip()]
    if not urls:
        usage_error("--rpc-urls names no endpoint", "give one or two endpoints, comma-"
                    "separated (http://127.0.0.1:8545), or leave --rpc-urls out")
    for number, url in enumerate(urls, 1):
        # Not echoed: a value that is no URL may be a key pasted in the wrong place. It was
        # refused as a URL with a user, path or query part, shown as `:///<redacted>`.
        parts = urllib.parse.urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            usage_error(f"--rpc-urls: endpoint {number} of {len(urls)} is not an http:// or "
                        f"https:// URL with a host",
                        "give each endpoint as scheme, host and port "
                        "(http://127.0.0.1:8545), comma-separated")
    for url in urls:
        if url_may_hold_a_key(url):
            usage_error(f"--rpc-urls: {redact_url(url.strip())} has a user, path or query "
                        f"part, where providers put API keys, and a command line is readable "
                        f"by every local user",
                        f"give it as rpc_url in the space's table of $KINT_HOME/config.toml "
                        f"([spaces.\"{_label(space)}\"], docs/settings.md), or in "
                        f"KINT_RPC_URL")
    return value


def _label(space: Ctx | None) -> str:
    """The label of `space`'s store, as the worker's settings find its table by it."""
    if space is None:
        return "<label>"
    from kint.spaces import resolve

    return resolve(space.tenant, space.db).label


def read_signature(signature: str | None, signature_file: str | None,
                   pipe_into: str = "kint connect --owner 0x...") -> str | None:
    """`-` reads stdin; anything else is a path, read then unlinked (09-cli.md).
    `pipe_into` is the command line the refusal of a value naming no file shows the
    signature piped into: the caller's own (connect, join, rekey), so the hint is one the
    user can run as it stands."""
    if signature is not None and signature_file is not None:
        usage_error("--signature and --signature-file both given", "give one of them")
    path = signature_file if signature_file is not None else signature
    if path is None:
        return None
    if path == "-":
        return read_stdin_line("the signature")
    if signature_file is None and not os.path.lexists(path):
        # Most likely the signature itself, pasted where the path goes (09-cli.md: any
        # value but `-` is a path): v0.3.0's refusal for a signature not given the right
        # way, the value never echoed.
        refuse_secret(NO_SIGNATURE, f"pipe the wallet's signature in (`cast wallet sign ... | "
                      f"{pipe_into} --signature -`); a signature typed on the command line "
                      f"is readable by every local user, so sign again if it was one")
    if signature_file is not None:
        return read_secret_file(path, "the signature", SIGNATURE_FILE_GONE)
    return read_secret_file(path, "the signature")


# Why `--dev` cannot take each of the other ways in: it makes (or finds again) its own EOA
# owner and signs the vault message with that owner's key, unsalted, on every connect, so a
# key the user hands over has no place. Refused (exit 2) before any secret is read, so a
# signature file is not unlinked for nothing. `--add-passphrase` is honoured: an extra
# passphrase wrap on a devchain vault is the way to try the passphrase path there.
DEV_REFUSALS = {
    "--owner": ("--dev makes its own owner", "drop --owner"),
    "--signature": ("--dev signs the vault message with its own owner's key",
                    "drop --signature, or drop --dev to connect with a wallet's signature"),
    "--signature-file": ("--dev signs the vault message with its own owner's key",
                         "drop --signature-file, or drop --dev to connect with a wallet's "
                         "signature"),
    "--smart-account": ("--dev's owner is an EOA it makes, opened by its own signature, not "
                        "a smart account's vault passphrase",
                        "drop --smart-account; --add-passphrase gives a --dev vault a "
                        "passphrase wrap"),
    "--passphrase-stdin": ("--dev reads nothing from stdin: its owner's signature is its key, "
                           "unsalted, and --add-passphrase's passphrase is only typed at its "
                           "prompt", "drop --passphrase-stdin"),
    "--passphrase-prompt": ("--dev derives its key from its own owner's signature, unsalted, "
                            "on every connect, so a salt passphrase could not be given back",
                            "drop --passphrase-prompt, or drop --dev to salt a wallet's "
                            "signature"),
    "--recovery-code-stdin": ("--dev opens the vault with its own owner's signature; a "
                              "recovery code is for a machine without the owner's key",
                              "drop --dev, and give --owner with --recovery-code-stdin"),
}


def refuse_dev_conflicts(given: dict[str, bool]) -> None:
    """Refuse the first flag `--dev` cannot take (DEV_REFUSALS), naming it and why: a flag
    the user gave is honoured or refused, never silently dropped."""
    for flag, present in given.items():
        if present:
            why, hint = DEV_REFUSALS[flag]
            usage_error(f"{flag} cannot be given with --dev: {why}", hint)


def refuse_unused_ways(signature: str | None, signature_file: str | None,
                       smart_account: bool, passphrase_prompt: bool, add_passphrase: bool,
                       recovery_code_stdin: bool, smart_flag: str = "--smart-account") -> None:
    """Refuse a flag the way in given does not use, naming it, before any secret is read: a
    recovery code is the data key itself and takes no other key, and a smart account's key
    is its vault passphrase, never a derive signature or a salt for one. They were dropped
    without a word (the code path returned before them): a user who gave
    `--recovery-code-stdin --add-passphrase` was never told the passphrase wrap was not
    made. `smart_flag` is the command's name for a smart account (join: --base-account)."""
    if recovery_code_stdin:
        why = "the recovery code is the data key itself, so it takes no other key"
        for flag, given in (("--signature", signature is not None),
                            ("--signature-file", signature_file is not None),
                            (smart_flag, smart_account),
                            ("--passphrase-prompt", passphrase_prompt),
                            ("--add-passphrase", add_passphrase)):
            if given:
                usage_error(f"{flag} cannot be given with --recovery-code-stdin: {why}",
                            f"drop {flag}, or connect with that key instead of the code")
    if smart_account:
        for flag, given in (("--signature", signature is not None),
                            ("--signature-file", signature_file is not None),
                            ("--passphrase-prompt", passphrase_prompt)):
            if given:
                usage_error(f"{flag} cannot be given with {smart_flag}: a smart account's "
                            f"key is its vault passphrase (prompted, or --passphrase-stdin), "
                            f"not a derive signature or its salt",
                            f"drop {flag}, or drop {smart_flag} for an EOA owner's signature")


def connect_args(owner: str | None, signature: str | None, signature_file: str | None,
                 smart_account: bool, passphrase_stdin: bool, passphrase_prompt: bool,
                 add_passphrase: bool, recovery_code_stdin: bool,
                 command: str = "connect", space16: str | None = None) -> dict:
    """The worker's arguments for the three ways in, secrets read from stdin, a file or a
    prompt. Shared by `connect` and `join` (`command`, named in a refusal's hint);
    `space16`, the space connected, whose recovery file a mistyped code's refusal names."""
    from kint.commands.owner_address import checked_address

    if owner is None:
        usage_error("--owner 0x... is required", "give the owner wallet's address")
    # Checked before any secret is read: a malformed owner was refused by the worker, after
    # stdin was read (an empty stdin was refused as that) and a signature file unlinked.
    args: dict = {"owner": checked_address(owner)}
    refuse_unused_ways(signature, signature_file, smart_account, passphrase_prompt,
                       add_passphrase, recovery_code_stdin,
                       "--base-account" if command == "join" else "--smart-account")
    if passphrase_stdin and signature == "-":
        usage_error("--passphrase-stdin and --signature - cannot share stdin",
                    "use --passphrase-prompt or --signature-file")
    if passphrase_stdin and passphrase_prompt:  # stdin won, the prompt was dropped unsaid
        usage_error("--passphrase-stdin and --passphrase-prompt both given",
                    "give the passphrase one way: piped with --passphrase-stdin, or typed at "
                    "the prompt")
    if recovery_code_stdin:
        if passphrase_stdin or signature == "-":
            usage_error("--recovery-code-stdin reads stdin",
                        "give nothing else on it (no --passphrase-stdin, no --signature -)")
        args["recovery_code"] = read_stdin_line("the recovery code")
        refuse_malformed(recovery_code=args["recovery_code"], space16=space16)
        return args
    if smart_account:
        args["passphrase"] = (read_passphrase_stdin() if passphrase_stdin
                              else prompt_secret(VAULT_PROMPT))
    else:
        # A signature file is unlinked once read: the passphrases are asked for first, so
        # one refused (empty, never typed) leaves the file for the next try, rather than
        # send the owner back to the wallet to sign again. Stdin is read in the order the
        # secrets come on it: the signature, then a prompt that falls back to stdin.
        path = signature_file if signature_file is not None else signature
        file_last = path not in (None, "-") and os.path.lexists(path)
        if file_last:
            signature_passphrases(args, passphrase_stdin, passphrase_prompt, add_passphrase)
        sig = read_signature(signature, signature_file, f"kint {command} --owner 0x...")
        if sig is None:
            usage_error(NO_SIGNATURE,
                        "run `kint canonical-payload --owner ADDRESS`, sign it, and pipe the "
                        "signature to --signature - (or give --smart-account, or "
                        "--recovery-code-stdin)")
        refuse_malformed(signature=sig)
        args["signature"] = sig
        if not file_last:
            signature_passphrases(args, passphrase_stdin, passphrase_prompt, add_passphrase)
        return args
    if add_passphrase:
        extra_passphrase(args)
    return args


def signature_passphrases(args: dict, passphrase_stdin: bool, passphrase_prompt: bool,
                          add_passphrase: bool, smart_account: bool = False) -> None:
    """The passphrases that go with a wallet signature into `args`: the one that salts the
    wallet key (stdin or its prompt), the vault passphrase a `--smart-account` wrap carries
    (`kint rekey`), then the extra wrap's. connect, join and rekey each ask them before
    they consume a signature file."""
    if passphrase_stdin:
        args["salt_passphrase"] = read_passphrase_stdin()
    elif passphrase_prompt:
        args["salt_passphrase"] = prompt_secret(SALT_PROMPT)
    if smart_account:
        args["passphrase"] = prompt_secret(VAULT_PROMPT, TYPE_IT)
    if add_passphrase:
        extra_passphrase(args)


def extra_passphrase(args: dict) -> None:
    """`--add-passphrase`'s prompt: empty skips the extra wrap (rekey: carrying it over)."""
    extra = prompt_secret(EXTRA_PROMPT, TYPE_IT, allow_empty=True)
    if extra:
        args["extra_passphrase"] = extra


def refuse_malformed(signature: str | None = None, recovery_code: str | None = None,
                     space16: str | None = None) -> None:
    """A derive signature or a recovery code that is not one on its face (cut short, not
    hex, a mistyped letter that fails the code's checksum), refused as the worker refuses
    it (its words and hint, naming the space's recovery file: `space16`) as soon as it is
    read, before anything is sent: `kint join` ran its session key and vault steps first
    and stopped at connect after them. Whether the signature is the owner's, and the code
    this vault's, is the worker's to say."""
    from kint.custody.errors import BadDeriveSignature, BadRecoveryCode
    from kint.tenant_worker.custody_errors import as_protocol_error

    try:
        if signature is not None:
            from kint.custody.vault_message import parse_signature_text

            parse_signature_text(signature)
        if recovery_code is not None:
            from kint.custody.recovery_code import decode_recovery_code

            decode_recovery_code(recovery_code)
    except (BadDeriveSignature, BadRecoveryCode) as err:
        said = as_protocol_error(err, space16)
        refuse_secret(said.message, said.hint)


@click.command("connect")
@click.option("--owner", default=None, metavar="ADDRESS", help="The owner wallet address.")
@signature_options()
@click.option("--smart-account", is_flag=True,
              help="The owner is a smart account (Base Account): a vault passphrase is the key.")
@click.option("--passphrase-stdin", is_flag=True, help="Read the passphrase from stdin.")
@click.option("--passphrase-prompt", is_flag=True,
              help="EOA mode: salt the wallet key with a passphrase, prompted.")
@click.option("--add-passphrase", is_flag=True,
              help="EOA mode (and --dev): also add a passphrase wrap for the data key, "
                   "prompted.")
@click.option("--recovery-code-stdin", is_flag=True,
              help="Read the recovery code from stdin; it is checked against the chain's "
                   "head, else this machine's cached key, wraps or cached epochs, and never "
                   "starts a vault.")
@click.option("--dev", is_flag=True,
              help="Devchain only: a throwaway owner, its vault signature and this machine's "
                   "authorization, made here (a new owner's key kept only by a connect that is "
                   "not refused). Takes --add-passphrase; refuses --owner and the flags that "
                   "hand over a key.")
@click.option("--rpc-urls", default=None, metavar="URL[,URL]",
              help="This space's own JSON-RPC endpoints (a kint extension; default: the "
                   "machine's). One with a user, path or query part (an API key) is refused: "
                   "argv is readable by every local user; use the config file's space table.")
@json_option("Print the result as JSON.")
@click.pass_obj
def connect_cmd(obj: Ctx, owner: str | None, signature: str | None,
                signature_file: str | None, smart_account: bool, passphrase_stdin: bool,
                passphrase_prompt: bool, add_passphrase: bool, recovery_code_stdin: bool,
                dev: bool, rpc_urls: str | None, as_json: bool) -> None:
    """Connect this machine to the vault: the data key from this machine's wraps, the head
    epoch's header on chain, or a fresh vault (whose recovery code goes to
    RECOVERY-<space16>.txt). Never prints the signature or a key."""
    # Checked before any secret is read: a signature file is unlinked once read, and a
    # refusal after that would have cost the user the file.
    urls = checked_rpc_urls(rpc_urls, obj) if rpc_urls is not None else None
    if dev:
        refuse_dev_conflicts({"--owner": owner is not None, "--signature": signature is not None,
                              "--signature-file": signature_file is not None,
                              "--smart-account": smart_account,
                              "--passphrase-stdin": passphrase_stdin,
                              "--passphrase-prompt": passphrase_prompt,
                              "--recovery-code-stdin": recovery_code_stdin})
        args: dict = {"dev": True}
        if add_passphrase:
            extra = prompt_secret(EXTRA_PROMPT, TYPE_IT, allow_empty=True)
            if extra:
                args["extra_passphrase"] = extra
    else:
        from kint.spaces import resolve

        args = connect_args(owner, signature, signature_file, smart_account,
                            passphrase_stdin, passphrase_prompt, add_passphrase,
                            recovery_code_stdin, space16=resolve(obj.tenant, obj.db).space16)
    if urls is not None:
        args["rpc_urls"] = urls
    result = call_with_progress(obj, "connect", args, timeout_s=300)
    if as_json:
        echo_json(result)
        return
    print_connected(result)


def print_connected(result: dict) -> None:
    click.echo(f"connected: owner {result['owner']}")
    click.echo(f"space {result['space']}  key tag {result.get('key_tag') or 'none'}  data key "
               f"from {result['source']}")
    for line in fresh_vault_lines(result):
        click.echo(line)
    if result.get("chain_unreadable"):
        click.echo(f"chain: not read ({result['chain_unreadable']}): the data key came from "
                   f"this machine's own wraps")
    if result.get("chain_moved"):
        click.echo(f"chain: {result['chain_moved']}")
    if result.get("owner_changed"):
        click.echo(f"owner: {result['owner_changed']}")
    click.echo(f"session key: {result['session']}")


def fresh_vault_lines(result: dict) -> list[str]:
    """The recovery file's lines, when the connect started a new vault (`kint connect` and
    `kint join` both say it), in kint v0.3.0's words (02-quickstart.md): where the file is,
    never the code, and that push refuses without it."""
    if not result.get("recovery_file"):
        return []
    return [f"fresh vault: recovery code written to {result['recovery_file']}",
            "copy that code somewhere that is not this machine; push refuses until the file "
            "exists"]
