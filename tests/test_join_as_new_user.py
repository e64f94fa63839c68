"""`kint join` and `kint connect` as a new user on a second machine meets them: machine A
(its own HOME and KINT_HOME) anchors a memory under a throwaway devchain owner; machine B,
wiped, comes in with the wrong secrets first. Each refusal must say what happened and
what to do, with its code; nothing B refuses leaves it connected.

One anvil for the session (`kint devchain start`); nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import re

import pytest

from chain_machines import RULE_1, kjson, ok, owner_account, recovery_code, wallet_signature
from conftest import write_rules
from kint.custody.vault_message import canonical_payload
from machines_together import machines_started


@pytest.fixture(scope="module")
def machines(tmp_path_factory, chain_home):
    """Machines A, B, C and D, their supervisors started side by side
    (machines_together.machines_started): B, C and D stay untouched until their tests (D is
    the wiped machine of the full join)."""
    with machines_started([tmp_path_factory.mktemp(f"new-user-{name}") for name in "abcd"],
                          chain_home) as made:
        yield dict(zip("abcd", made))


@pytest.fixture(scope="module")
def vault(machines):
    """Machine A with one anchored epoch; its owner wallet and the vault's recovery code."""
    a = machines["a"]
    write_rules(a.sibyl_db, a.tenant, release_gate=RULE_1)
    connected = kjson(a, "connect", "--dev")
    assert kjson(a, "push")["head_seq"] == 1
    return a, owner_account(a, connected["owner"]), recovery_code(a, connected["space"])


@pytest.fixture(scope="module")
def machine_b(machines):
    return machines["b"]


ROTATED = "new-user-rotated"  # the tenant of the rotated vault, on machine A


@pytest.fixture(scope="module")
def rotated(machines):
    """A second vault on machine A (tenant ROTATED): one anchored epoch, then a rekey.
    Its own vault, so that the rotation changes nothing under the tests of `vault`, and
    the tests that read it run alone or in any order. Its owner wallet and the code kept
    from before the rekey."""
    a = machines["a"]
    write_rules(a.sibyl_db, ROTATED, release_gate=RULE_1)
    connected = kjson(a, "--tenant", ROTATED, "connect", "--dev")
    assert kjson(a, "--tenant", ROTATED, "push")["head_seq"] == 1
    owner = owner_account(a, connected["owner"])
    old_code = recovery_code(a, connected["space"])
    ok(a.kint("--tenant", ROTATED, "rekey", "--signature", "-",
              input=wallet_signature(owner, canonical_payload(owner.address).decode()) + "\n"))
    return owner, old_code


def _typo(code: str) -> str:
    """`code` with one letter changed, as a person copying it by hand would."""
    at = code.index("-") - 1
    return code[:at] + ("B" if code[at] != "B" else "C") + code[at + 1:]


def test_a_mistyped_recovery_code_says_where_to_copy_it_from(vault, machine_b):
    """The checksum's refusal (v0.3.0's words) pointed at `kint join --help`, which says
    nothing about a code typed wrong: the hint names the file the code is the last line of."""
    _a, owner, code = vault
    out = machine_b.kint("join", "--owner", owner.address, "--recovery-code-stdin",
                         "--no-setup", input=_typo(code) + "\n")
    assert out.returncode == 2, (out.stdout, out.stderr)
    # Refused as soon as it is read (its checksum needs no chain): join stopped at connect
    # after its session key and vault steps had run and printed their lines.
    assert out.stdout == "", out.stdout
    stopped, hint = out.stderr.splitlines()
    assert stopped == ("join stopped at connect: recovery code checksum failed (typo?) "
                       "[BAD_REQUEST]"), out.stderr
    # The space's own file, by its id (the vault's space: the same on every machine), where
    # it said the literal RECOVERY-<space16>.txt.
    space16 = kjson(machine_b, "status")["space"][:16]
    assert hint.startswith("hint: copy the code again: it is the last line of "
                           f"KINT_HOME/RECOVERY-{space16}.txt, written where the vault "
                           "started"), out.stderr
    refused = machine_b.kint("connect", "--owner", owner.address, "--recovery-code-stdin",
                             "--json", input=code[:20] + "\n")
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    refusal = json.loads(refused.stdout)
    assert refusal["error"] == "BAD_REQUEST", refusal
    assert refusal["message"].startswith("a recovery code is 55 characters"), refusal
    assert refusal["hint"].startswith("copy the code again: it is the last line of "
                                      f"KINT_HOME/RECOVERY-{space16}.txt"), refusal
    assert not kjson(machine_b, "status")["connected"]
    joined = ok(machine_b.kint("join", "--owner", owner.address, "--recovery-code-stdin",
                               "--no-setup", input=code + "\n"))
    assert "connected: key tag none, data key from recovery code" in joined.stdout


def test_a_signature_cut_short_says_what_a_whole_one_is(vault, machine_b):
    """A derive signature that lost its end on the way (a copy, a terminal's wrap) is
    refused in the worker; the hint pointed at `kint join --help`, which says nothing of
    what the wallet's signature looks like."""
    _a, owner, _code = vault
    payload = ok(machine_b.kint("canonical-payload", "--owner", owner.address)).stdout
    whole = wallet_signature(owner, payload)
    out = machine_b.kint("join", "--owner", owner.address, "--signature", "-", "--no-setup",
                         "--json", input=whole[:100] + "\n")
    assert out.returncode == 2, (out.stdout, out.stderr)
    refusal = json.loads(out.stdout)
    assert (refusal["error"], refusal["step"]) == ("BAD_REQUEST", "connect"), refusal
    assert refusal["message"] == ("derive signature must be 65 bytes as 130 hex characters "
                                  "(r, s, v)"), refusal
    assert refusal["hint"].startswith("give the whole signature the wallet printed for "
                                      "`kint canonical-payload --owner ADDRESS`"), refusal
    plain = machine_b.kint("join", "--owner", owner.address, "--signature", "-", "--no-setup",
                           input=whole[:100] + "\n")
    assert plain.returncode == 2 and plain.stdout == "", (plain.stdout, plain.stderr)
    assert plain.stderr.startswith("join stopped at connect: derive signature must be 65 "
                                   "bytes"), plain.stderr


def test_a_secret_that_comes_empty_stops_join_at_connect(vault, machine_b):
    """A passphrase or recovery code that comes empty, or never comes, is the connect
    step's, as Ctrl-C at its prompt is: `join stopped at connect: ...` with its hint, where
    join printed the generic `kint: error:` line (stdin empty) or took an empty line at the
    prompt as the passphrase and ran the vault step before the worker refused it. An empty
    passphrase is refused at its prompt by connect too, and Python's GetPassWarning (a
    source file's path) is not printed when there is no terminal."""
    _a, owner, _code = vault
    join = ("join", "--owner", owner.address, "--no-setup")
    typed = machine_b.kint(*join, "--base-account", input="\n")
    assert typed.returncode == 2, (typed.stdout, typed.stderr)
    assert typed.stdout == "", typed.stdout  # stopped before the first step
    assert "join stopped at connect: the passphrase given at `vault passphrase` is empty; " \
        "kint refuses an empty passphrase [BAD_REQUEST]" in typed.stderr, typed.stderr
    assert "hint: run the command again and type the passphrase" in typed.stderr
    assert "GetPassWarning" not in typed.stderr and "getpass.py" not in typed.stderr
    for way, what in (("--recovery-code-stdin", "the recovery code"),
                      ("--passphrase-stdin", "the passphrase")):
        extra = ("--base-account", way) if way == "--passphrase-stdin" else (way,)
        out = machine_b.kint(*join, *extra, "--json", input="")
        assert out.returncode == 2 and out.stderr == "", (out.stdout, out.stderr)
        refusal = json.loads(out.stdout)
        assert (refusal["error"], refusal["step"]) == ("BAD_REQUEST", "connect"), refusal
        assert refusal["message"] == f"{what} was to come on stdin, and stdin was empty"
    never = machine_b.kint(*join, "--base-account")  # stdin closed at the prompt
    assert never.returncode == 2, (never.stdout, never.stderr)
    assert "join stopped at connect: the passphrase for `vault passphrase` never came" \
        in never.stderr, never.stderr
    connect = machine_b.kint("connect", "--owner", owner.address, "--smart-account",
                             input="\n")
    assert connect.returncode == 2, (connect.stdout, connect.stderr)
    assert "kint: error: the passphrase given at `vault passphrase` is empty" in \
        connect.stderr, connect.stderr


def test_a_vault_another_tool_wrote_is_not_called_a_transport_failure(machine_b, chain_home):
    """An owner whose only epoch under this tenant is not a kint envelope (another tool
    wrote it with a key the owner authorized): the chain answered every read, so join's
    connect step must not send the user to retry or change RPC."""
    from eth_account import Account

    from chain_machines import authorize_machine, devchain_anchor
    from kint.spaces import space_id

    owner, writer = Account.create(), Account.create()
    authorize_machine(chain_home, owner, writer.address)
    anchor = devchain_anchor(chain_home)
    anchor.transact(writer, anchor.encode_push(owner.address, space_id("another-tool"),
                                               "0x" + "00" * 32, b"\x07 not a kint epoch " * 8))
    payload = ok(machine_b.kint("canonical-payload", "--owner", owner.address)).stdout
    out = machine_b.kint("--tenant", "another-tool", "join", "--owner", owner.address,
                         "--signature", "-", "--no-setup", "--json",
                         input=wallet_signature(owner, payload) + "\n")
    assert out.returncode == 2, (out.stdout, out.stderr)
    refusal = json.loads(out.stdout)
    assert (refusal["error"], refusal["step"]) == ("RPC_UNAVAILABLE", "connect"), refusal
    assert refusal["message"].startswith("cannot read the head epoch: none of the 1 newest "
                                         "epochs (seq 1 down to 1) has a header that parses")
    assert "transport" not in refusal["hint"], refusal
    assert "Check --owner and the tenant" in refusal["hint"], refusal
    assert refusal["hint"].startswith("the chain answered: "), refusal


@pytest.fixture(scope="module")
def machine_c(machines):
    return machines["c"]


def _signed(sb, account) -> str:
    payload = ok(sb.kint("canonical-payload", "--owner", account.address)).stdout
    return wallet_signature(account, payload) + "\n"


def test_a_connect_given_the_wrong_owner_is_put_right_by_connecting_the_right_one(vault,
                                                                               machine_c):
    """A typo in --owner finds no epochs and starts a fresh vault (v0.3.0's warning case,
    03-new-machine.md: "Stop, fix it, connect again"). Connecting again with the right
    owner was refused ("use another tenant"), which sends the user away from the tenant
    their memory is in. Nothing of the wrong vault was anchored or pulled here, so the
    space moves to the right owner, says so, and names the recovery file still holding the
    wrong vault's code; once an epoch of an owner is here, another owner stays refused."""
    from eth_account import Account

    _a, owner, code = vault
    c = machine_c
    wrong = Account.create()
    fresh = json.loads(ok(c.kint("connect", "--owner", wrong.address, "--signature", "-",
                                 "--json", input=_signed(c, wrong))).stdout)
    assert fresh["fresh_vault"] and fresh["recovery_file"], fresh
    joined = c.kint("join", "--owner", owner.address, "--signature", "-", "--no-setup",
                    input=_signed(c, owner))
    assert joined.returncode == 0, (joined.stdout, joined.stderr)
    lines = joined.stdout.splitlines()
    at = lines.index(next(x for x in lines if x.startswith("connected: ")))
    assert lines[at].endswith(", data key from chain head header"), lines
    assert lines[at + 1] == (
        f"owner: this space was connected to owner {wrong.address}, of whose vault this "
        f"machine holds no epoch; its wraps and key are replaced; {fresh['recovery_file']} "
        f"still holds that vault's recovery code: `kint recovery-code` writes this one's"), lines
    assert "restore: restored 1 epoch(s)" in joined.stdout, joined.stdout
    ok(c.kint("recovery-code"))
    assert recovery_code(c, fresh["space"]) == code
    # An epoch of this owner is here now: another owner is refused, as before.
    refused = c.kint("connect", "--owner", wrong.address, "--signature", "-",
                     input=_signed(c, wrong))
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    assert refused.stderr.splitlines()[0] == (
        f"kint: error: this space is connected to owner {owner.address}, not "
        f"{wrong.address} [BAD_REQUEST]"), refused.stderr


def test_a_recovery_code_from_before_a_rotation_is_told_so(rotated, machine_b):
    """After a rekey the old code no longer opens the vault (05-keys.md); its refusal, in
    v0.3.0's words, said to check the code, the owner and the tenant, all of them right:
    the hint now names the rotation, and where the new code was written."""
    owner, old_code = rotated
    space16 = kjson(machine_b, "--tenant", ROTATED, "status")["space"][:16]
    out = machine_b.kint("--tenant", ROTATED, "connect", "--owner", owner.address,
                         "--recovery-code-stdin", "--json", input=old_code + "\n")
    assert out.returncode == 2, (out.stdout, out.stderr)
    refusal = json.loads(out.stdout)
    assert refusal["error"] == "WRONG_KEY", refusal
    assert refusal["message"] == ("this recovery code does not belong to the vault anchored "
                                  "under this owner"), refusal
    assert refusal["hint"].endswith("A code kept from before a `kint rekey` no longer opens "
                                    "the vault: that rekey wrote the new one "
                                    f"(KINT_HOME/RECOVERY-{space16}.txt where it ran)"), refusal


def test_a_full_join_after_a_rotation_lists_each_older_epoch_once_as_closed(rotated, machines):
    """After a rekey, a wiped machine's `kint join --full` restores from the rotation's
    snapshot and lists the epoch sealed under the retired key once, as CLOSED
    (03-new-machine.md, "Epochs sealed under a retired key"): it printed it twice, as a
    SKIPPED epoch the snapshot carried past and again as CLOSED."""
    owner, _code = rotated
    wiped = machines["d"]
    payload = ok(wiped.kint("canonical-payload", "--owner", owner.address)).stdout
    join = ("--tenant", ROTATED, "join", "--owner", owner.address, "--signature", "-",
            "--full", "--no-setup")
    out = ok(wiped.kint(*join, input=wallet_signature(owner, payload) + "\n"))
    lines = out.stdout.splitlines()
    unapplied = [x for x in lines if x.startswith(("SKIPPED", "CLOSED"))]
    assert len(unapplied) == 1, lines
    assert unapplied[0].startswith("CLOSED epoch 1 block "), lines
    assert unapplied[0].endswith(": sealed under a data key this machine does not hold "
                                 "(rotated)"), lines
    restore = next(x for x in lines if x.startswith("restore: "))
    assert restore.endswith("; 1 older epoch(s) sealed under a retired key stay closed "
                            "on this machine"), lines
    pulled = kjson(wiped, "--tenant", ROTATED, "pull", "--full")
    assert (pulled["skipped"], [c["seq"] for c in pulled["closed"]]) == ([], [1]), pulled
    # `--json`'s restore is `kint pull --json`'s object: its hashes `0x` and 64 hex digits
    # (the worker's bare ones were printed as they came).
    again = json.loads(ok(wiped.kint(*join, "--json",
                                     input=wallet_signature(owner, payload) + "\n")).stdout)
    assert again["restore"]["closed"] == pulled["closed"], (again["restore"], pulled)
    assert re.fullmatch("0x[0-9a-f]{64}", pulled["closed"][0]["tx"]), pulled["closed"]
