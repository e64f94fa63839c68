"""`kint connect --dev` and the other ways in: each flag is honoured or refused, never
silently dropped (lane leftovers17).

`--dev` makes (or finds again) its own EOA owner and opens the vault with that owner's
unsalted signature, so the flags that hand over another key cannot go with it: each is
refused as a usage error (exit 2) naming the flag, before any secret is read (a signature
file is not unlinked for nothing). `--add-passphrase` is honoured: the devchain vault gets
a passphrase wrap (05-keys.md, "One data key, many wraps"), carried by the next epoch.
They were all dropped without a word before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chain_machines import devchain_anchor, new_machine, ok
from conftest import make_sandbox, sibyl_client
from table_runs import collected_ids, running_ahead
from kint.custody.keks import kek_tag, passphrase_kek
from kint.custody.wraps import KIND_PASSPHRASE, KIND_SIGNATURE
from kint.epochs.envelope import Header
from kint.spaces import space_id

OWNER = "0x19E7E376E7C213B7E7e7e46cc70A5dD086DAff2A"
EXTRA = "a devchain vault's extra passphrase"

REFUSED = [
    ("--owner", ["--owner", OWNER], None),
    ("--signature", ["--signature", "-"], "0xab\n"),
    ("--signature-file", ["--signature-file", "SIGNATURE_FILE"], None),
    ("--smart-account", ["--smart-account"], None),
    ("--passphrase-stdin", ["--passphrase-stdin"], "a passphrase\n"),
    ("--passphrase-prompt", ["--passphrase-prompt"], None),
    ("--recovery-code-stdin", ["--recovery-code-stdin"], "CODE\n"),
]


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """A machine with no supervisor: every refusal here comes before anything is sent."""
    return make_sandbox(tmp_path_factory.mktemp("dev-flags"))


def _signature_file(folder: Path) -> Path:
    """A signature file of a case's own (a refusal must leave it unread, so not unlinked)."""
    folder.mkdir()
    path = folder / "signature.txt"
    path.write_text("0x" + "ab" * 65 + "\n")
    return path


def _with_file(argv: list[str], path: Path) -> list[str]:
    return [str(path) if a == "SIGNATURE_FILE" else a for a in argv]


@pytest.fixture(scope="module")
def refusals(request, machine, tmp_path_factory):
    """Every refusal case of this module's three tables (one command each, none of which
    writes or sends anything), run ahead of their tests two at a time
    (tests/table_runs.py): a test's name (its request.node.name) -> (its signature file,
    the command's outcome)."""
    folder = tmp_path_factory.mktemp("dev-flags-cases")
    runs, files = {}, {}

    def case(test, case_id: str, argv: list[str], stdin: str | None) -> None:
        if case_id in collected_ids(request, test):
            name = f"{test.__name__}[{case_id}]"
            files[name] = path = _signature_file(folder / name)
            runs[name] = lambda: machine.kint(*_with_file(argv, path), input=stdin)

    for flag, argv, stdin in REFUSED:
        case(test_a_flag_dev_cannot_take_is_refused_by_name, flag,
             ["connect", "--dev", *argv], stdin)
    for command, way, flag, argv in UNUSED:
        extra = ["--no-setup"] if command == "join" else []
        case(test_a_flag_the_way_in_does_not_use_is_refused_by_name,
             _unused_id(command, way, flag),
             [command, "--owner", OWNER, way, *argv, *extra], "CODE\n")
    for command in ("connect", "join"):
        extra = ["--no-setup"] if command == "join" else []
        case(test_the_passphrase_given_two_ways_is_refused, command,
             [command, "--owner", OWNER, "--signature-file", "SIGNATURE_FILE",
              "--passphrase-stdin", "--passphrase-prompt", *extra], "a passphrase\n")
    with running_ahead(runs) as ahead:
        yield lambda name: (files[name], ahead.outcome(name))


@pytest.mark.parametrize("flag,argv,stdin", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_flag_dev_cannot_take_is_refused_by_name(request, refusals, flag, argv, stdin):
    signature_file, out = refusals(request.node.name)
    assert out.returncode == 2, out.stdout + out.stderr
    message, hint = out.stderr.splitlines()
    assert message.startswith(f"kint: error: {flag} cannot be given with --dev: "), message
    assert message.endswith(" [BAD_REQUEST]") and hint.startswith("hint: "), out.stderr
    assert signature_file.exists(), "the signature file was read and unlinked"


# A flag the way in given does not use (connect's, or join's: its smart account is
# --base-account): (command, the way in, the flag refused with it, the flag's argv).
SIGNATURE_FILE = ["--signature-file", "SIGNATURE_FILE"]
UNUSED = [
    ("connect", "--recovery-code-stdin", "--signature-file", SIGNATURE_FILE),
    ("connect", "--recovery-code-stdin", "--smart-account", ["--smart-account"]),
    ("connect", "--recovery-code-stdin", "--passphrase-prompt", ["--passphrase-prompt"]),
    ("connect", "--recovery-code-stdin", "--add-passphrase", ["--add-passphrase"]),
    ("connect", "--smart-account", "--signature-file", SIGNATURE_FILE),
    ("connect", "--smart-account", "--signature", ["--signature", "SIGNATURE_FILE"]),
    ("connect", "--smart-account", "--passphrase-prompt", ["--passphrase-prompt"]),
    ("join", "--recovery-code-stdin", "--passphrase-prompt", ["--passphrase-prompt"]),
    ("join", "--base-account", "--passphrase-prompt", ["--passphrase-prompt"]),
]


def _unused_id(command: str, way: str, flag: str) -> str:
    return f"{command}-{way[2:]}-{flag[2:]}"


@pytest.mark.parametrize("command,way,flag,argv", UNUSED,
                         ids=[_unused_id(*u[:3]) for u in UNUSED])
def test_a_flag_the_way_in_does_not_use_is_refused_by_name(request, refusals, command, way,
                                                          flag, argv):
    """Each of these was dropped without a word: the recovery code's path returned before
    the other flags were looked at, and a smart account's never read a signature (its file
    was left unread, not unlinked) or a salt. Refused before any secret is read."""
    signature_file, out = refusals(request.node.name)
    assert out.returncode == 2, out.stdout + out.stderr
    message, hint = out.stderr.splitlines()
    assert message.startswith(f"kint: error: {flag} cannot be given with {way}: "), message
    assert message.endswith(" [BAD_REQUEST]") and hint == f"hint: drop {flag}, or " + (
        "connect with that key instead of the code" if way == "--recovery-code-stdin" else
        f"drop {way} for an EOA owner's signature"), out.stderr
    assert signature_file.exists(), "the signature file was read and unlinked"


@pytest.mark.parametrize("command", ["connect", "join"])
def test_the_passphrase_given_two_ways_is_refused(request, refusals, command):
    """--passphrase-stdin took it and --passphrase-prompt was dropped without a word."""
    signature_file, out = refusals(request.node.name)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.splitlines()[0] == ("kint: error: --passphrase-stdin and "
                                          "--passphrase-prompt both given [BAD_REQUEST]"), out
    assert signature_file.exists(), "the signature file was read and unlinked"


def test_add_passphrase_with_dev_adds_a_passphrase_wrap(tmp_path, chain_home):
    """The prompt's passphrase becomes a kind 0x02 wrap beside the dev owner's signature
    wrap, and the next epoch's header carries both."""
    sb = new_machine(tmp_path / "a", chain_home)
    try:
        client = sibyl_client(sb.sibyl_db, sb.tenant)
        client.set_entity("notes", "first", {"by": "dev"})
        out = ok(sb.kint("connect", "--dev", "--add-passphrase", "--json",
                         input=EXTRA + "\n"))
        connected = json.loads(out.stdout)
        owner, space = connected["owner"], space_id(sb.tenant)
        ok(sb.kint("push"))
        anchor = devchain_anchor(chain_home)
        head = anchor.head(owner, space)
        event = anchor.epoch_log(owner, space, head.seq, head.block)
        header = Header.decode(anchor.push_calldata(event.tx_hash, owner, space, event.prev,
                                                    event.digest))
        assert [w.kind for w in header.wraps] == [KIND_SIGNATURE, KIND_PASSPHRASE]
        want = kek_tag(passphrase_kek(EXTRA, owner, space, home=sb.kint_home))
        assert header.wraps[1].tag == want
    finally:
        sb.shutdown()
