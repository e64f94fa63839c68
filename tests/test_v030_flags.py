"""Flags kint v0.3.0's CLI reference (09-cli.md) gives and scripts written for it pass:
`--owner` on `push`, `compact`, `pull`, `rekey` and `doctor` (default: the connected
owner), and `pull --force-scan` (accepted, never read). This kint acts for the connected
owner only, so any other `--owner` is refused before anything is sent (a real devchain,
supervisor and worker)."""

from __future__ import annotations

import json

import pytest

from chain_machines import kjson, new_machine, ok, on
from conftest import kint_loading, write_store
from kint.custody.vault_message import canonical_payload

OVER_SKIPPED_UNUSED = ("kint: --over-skipped not used: this machine's last pull applied every "
                       "epoch, so the snapshot chains on the epoch it last saw, as without it")

OTHER = "0x000000000000000000000000000000000000dEaD"
# The hint for another owner's --owner once the space holds an epoch of its vault.
TENANT_OF_ITS_OWN = (f"leave --owner out; another owner's memory takes a tenant of its own: "
                     f"`kint --tenant T connect --owner {OTHER}`, then `kint --tenant T ...` "
                     f"(this space holds epochs of the connected owner's vault and stays "
                     f"theirs)")
# What the hint for another owner's `--owner` has no use for (test_an_owner_refused_loads_no_web3).
HEAVIER_THAN_THE_HINT = ("kint.chain.config", "kint.tenant_worker.enrolled_chain",
                         "kint.tenant_worker.state_upgrade", "kint.epochs.envelope",
                         "kint.commands.enrolled_contract", "eth_utils", "cryptography")


@pytest.fixture(scope="module")
def machine(tmp_path_factory, chain_home):
    """One machine on the devchain for the tests that each connect a space of their own (a
    profile store, `Sandbox.profile_db`): what they change (a space's wraps, its epochs) is that
    space's alone, so none needs a machine started for it."""
    sb = new_machine(tmp_path_factory.mktemp("v030-flags"), chain_home)
    yield sb
    sb.shutdown()


def test_owner_and_force_scan_are_taken_and_another_owner_is_refused(machine):
    sb, db = machine, machine.profile_db("owners")
    write_store(db, tenant=sb.tenant)
    owner = kjson(sb, *on(db, "connect", "--dev"))["owner"]
    ok(sb.kint(*on(db, "push", "--owner", owner.lower())))
    ok(sb.kint(*on(db, "compact", "--owner", owner, "--dry-run")))
    ok(sb.kint(*on(db, "pull", "--owner", owner, "--force-scan")))
    doctor = sb.kint(*on(db, "doctor", "--owner", owner))
    assert "kint: error" not in doctor.stderr, doctor.stderr
    head = kjson(sb, *on(db, "status"))["head"]
    for command in (["push"], ["compact"], ["pull", "--force-scan"], ["doctor"],
                    ["rekey", "--smart-account", "--passphrase-stdin"]):
        out = sb.kint(*on(db, *command, "--owner", OTHER), input="not read\n")
        assert out.returncode == 2, (command, out.stdout, out.stderr)
        assert out.stderr.splitlines() == [
            f"kint: error: --owner {OTHER} is not the owner this space is connected to "
            f"({owner}); this kint acts for the connected owner [BAD_REQUEST]",
            f"hint: {TENANT_OF_ITS_OWN}"
        ], out.stderr
    assert kjson(sb, *on(db, "status"))["head"] == head  # nothing was anchored
    bad = sb.kint(*on(db, "push", "--owner", "0x12"))
    assert bad.returncode == 2 and "is not an address" in bad.stderr
    # What the hint said before: `kint connect --owner OTHER`, which this space, holding
    # epochs of its owner's vault, refuses (connect_owner.owner_change): the hint led to
    # a second refusal.
    moved = sb.kint(*on(db, "connect", "--owner", OTHER, "--signature", "-"),
                    input="0x" + "11" * 65 + "\n")
    assert moved.returncode == 2 and f"is connected to owner {owner}, not {OTHER}" in \
        moved.stderr, moved.stderr


def test_another_owner_on_a_space_holding_no_epoch_is_sent_to_connect(machine):
    """A space connected and never anchored or pulled (a connect given a mistyped owner
    starts a vault nobody anchored): `kint connect --owner OTHER` moves it, so the hint
    names that."""
    sb, db = machine, machine.profile_db("unanchored")
    owner = kjson(sb, *on(db, "connect", "--dev"))["owner"]
    out = sb.kint(*on(db, "pull", "--owner", OTHER))
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.splitlines() == [
        f"kint: error: --owner {OTHER} is not the owner this space is connected to "
        f"({owner}); this kint acts for the connected owner [BAD_REQUEST]",
        f"hint: leave --owner out, or run kint connect --owner {OTHER} first"], out.stderr


def test_the_owner_hint_and_connects_refusal_agree_on_a_mirror_without_a_watermark(machine):
    """The hint for another owner's `--owner` looked for the watermark and push journal
    files, connect's refusal (connect_owner.owner_change) at the mirror's head too: a space
    whose mirror holds epochs and whose watermark is gone was sent to `kint connect --owner
    OTHER`, which refused. Both ask kint.tenant_worker.owner_bound now."""
    from kint import spaces
    from kint.paths import space_files

    sb, db = machine, machine.profile_db("no-watermark")
    write_store(db, tenant=sb.tenant)
    owner = kjson(sb, *on(db, "connect", "--dev"))["owner"]
    ok(sb.kint(*on(db, "push")))
    space16 = spaces.resolve(sb.tenant, str(db)).space16
    space_files(sb.kint_home, space16)["watermark"].unlink()
    out = sb.kint(*on(db, "pull", "--owner", OTHER))
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.splitlines()[1] == f"hint: {TENANT_OF_ITS_OWN}", out.stderr
    moved = sb.kint(*on(db, "connect", "--owner", OTHER, "--signature", "-"),
                    input="0x" + "11" * 65 + "\n")
    assert moved.returncode == 2 and f"is connected to owner {owner}, not {OTHER}" in \
        moved.stderr, moved.stderr


def test_an_unreadable_enrolment_never_asks_for_the_owner_flag_already_given(sandbox):
    """`--owner` given, checked against an enrolment file that cannot be read: what to do is
    to connect again, not to `pass --owner` (which the caller did)."""
    from kint import spaces
    from kint.tenant_worker.statefiles import space_files

    ref = spaces.resolve(sandbox.tenant, str(sandbox.sibyl_db))
    enrol = space_files(sandbox.kint_home, ref.space16)["enrol"]
    enrol.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    sandbox.kint_home.chmod(0o700)
    enrol.write_text("{not json")
    for argv in (("pull", "--owner", OTHER), ("doctor", "--owner", OTHER)):
        out = sandbox.kint(*argv)
        assert out.returncode == 2, (argv, out.stdout, out.stderr)
        assert out.stderr.splitlines() == [
            f"kint: error: {enrol}: is not valid JSON (truncated or garbled) [CORRUPT_STATE]",
            "hint: run kint connect again"], (argv, out.stderr)


def test_an_owner_refused_loads_no_web3(sandbox):
    """`--owner` is checked in the CLI process before the command goes to its worker; a
    refusal (not an address, another owner than the enrolment names) needs eth_utils'
    address helpers, never web3 (~0.5 s of a fresh command, and the whole of a refusal)."""
    from kint import spaces
    from kint.tenant_worker.enrolment import Enrolment, save_enrolment
    from kint.tenant_worker.statefiles import space_files

    ref = spaces.resolve(sandbox.tenant, str(sandbox.sibyl_db))
    enrol = space_files(sandbox.kint_home, ref.space16)["enrol"]
    enrol.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    sandbox.kint_home.chmod(0o700)
    owner = "0x" + "ab" * 20
    save_enrolment(enrol, Enrolment(space=ref.space_id, tenant=ref.tenant, owner=owner,
                                    account="eoa", contract="0x" + "00" * 20, chain_id=8453))
    for argv, said in ((("push", "--owner", "0x12"), "is not an address"),
                       (("doctor", "--owner", OTHER), "is not the owner this space is")):
        out, loaded = kint_loading(sandbox.env, *argv)
        assert out.returncode == 2 and said in out.stderr, (argv, out.stdout, out.stderr)
        assert [m for m in loaded if m == "web3" or m.startswith("web3.")] == [], argv
        assert "kint.custody.ids" in loaded  # the address helpers did load: the list is real
    # The other owner's hint read how far this machine got (kint.commands.seen_here) and no
    # more: the contract check's chain settings and the previous layout's conversion (the
    # epoch envelope's cryptography) were most of such a refusal's second.
    assert "kint.commands.seen_here" in loaded
    assert [m for m in HEAVIER_THAN_THE_HINT if m in loaded] == []


def test_session_key_takes_owner_before_its_action_as_v030_did(sandbox):
    """09-cli.md, "kint session-key": the action and `--owner` side by side, so a v0.3.0
    script may give the flag first (`kint session-key --owner 0x... show`). `show` takes it
    there as after the action; `create` and `rotate`, which have no owner, refuse it
    (nothing created) rather than drop it."""
    shown = sandbox.kint("session-key", "--owner", OTHER, "show")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert json.loads(shown.stdout)["owner"] == OTHER
    # Given on both sides of the action, two owners: refused, never one of them dropped.
    both = sandbox.kint("session-key", "--owner", OTHER, "show", "--owner", "0x" + "ab" * 20)
    assert both.returncode == 2 and "--owner is given twice" in both.stderr, (
        both.stdout, both.stderr)
    same = sandbox.kint("session-key", "--owner", OTHER, "show", "--owner", OTHER.lower())
    assert same.returncode == 0, same.stdout + same.stderr  # one owner, two spellings
    for action in ("create", "rotate"):
        out = sandbox.kint("session-key", "--owner", OTHER, action)
        assert out.returncode == 2, (action, out.stdout, out.stderr)
        assert out.stderr.splitlines() == [
            f"kint: error: --owner does not apply to `kint session-key {action}` (it is for "
            f"`show`) [BAD_REQUEST]", "hint: leave --owner out"], out.stderr
    assert not (sandbox.kint_home / "session.key").exists()


def test_rekey_on_a_space_not_connected_is_its_own_refusal_exit_2(sandbox):
    """09-cli.md: rekey "refuses unless this machine is connected", and a refusal of rekey's
    own exits 2 (5 is for what its snapshot push meets). It exited 5, as a push's
    NOT_CONNECTED does, and only after asking for the vault passphrase."""
    # stdin closed: no prompt
    refused_with_2(sandbox, ("rekey", "--smart-account"), None, "NOT_CONNECTED",
                   "this machine is not connected for this space",
                   "run `kint connect --owner ADDRESS` first")


def refused_with_2(sb, argv: tuple[str, ...], given: str | None, code: str, message: str,
                   hint: str) -> None:
    """`kint *argv` refuses with exit 2 in both shapes: two lines on stderr, and with
    --json one object on stdout."""
    for flags in ((), ("--json",)):
        out = sb.kint(*argv, *flags, input=given)
        assert out.returncode == 2, (flags, out.stdout, out.stderr)
        if flags:
            assert json.loads(out.stdout) == {"error": code, "message": message,
                                              "hint": hint}, out.stdout
        else:
            assert out.stderr.splitlines() == [f"kint: error: {message} [{code}]",
                                               f"hint: {hint}"], out.stderr


def test_rekey_on_a_connected_machine_with_no_key_wraps_is_its_own_refusal_exit_2(machine):
    """09-cli.md: a refusal of rekey's own exits 2. A connected machine whose key-wraps file
    is gone, with no epochs on chain to read the wraps from, has nothing to carry over: it
    exited 5, the status of its snapshot push's unfunded-key refusal, which shared the code."""
    sb, db = machine, machine.profile_db("wrapless")
    space16 = kjson(sb, *on(db, "connect", "--dev"))["space"][:16]
    (sb.kint_home / f"wraps-{space16}.json").unlink()
    refused_with_2(sb, on(db, "rekey", "--smart-account", "--passphrase-stdin"),
                   "any passphrase\n", "BAD_REQUEST",
                   "this machine holds no key wraps for this space",
                   "run `kint connect` first")
    assert kjson(sb, *on(db, "status"))["head"]["seq"] == 0  # nothing was anchored


def test_a_state_too_large_for_one_snapshot_is_a_push_refusal_for_compact_and_rekey(machine):
    """09-cli.md: compact refuses a whole state over 92,160 compressed bytes, and rekey's
    snapshot makes the same check (05-keys.md); rekey's exit is 5 when its push fails, 2 only
    for its own refusals. The refusal was BAD_REQUEST, rekey's own code, so rekey exited 2."""
    import os

    from chain_machines import owner_account, wallet_signature

    sb, db = machine, machine.profile_db("large")
    # Three rows of random hex, ~40 KB compressed each: a push splits them, no snapshot.
    write_store(db, {f"blob-{i}": {"hex": os.urandom(40_000).hex()} for i in range(3)},
                tenant=sb.tenant)
    owner = kjson(sb, *on(db, "connect", "--dev"))["owner"]
    assert len(kjson(sb, *on(db, "push"))["epochs"]) >= 2
    head = kjson(sb, *on(db, "status"))["head"]
    payload = canonical_payload(owner).decode()
    signature = wallet_signature(owner_account(sb, owner), payload) + "\n"
    # --over-skipped where no epoch was skipped: the refusal says it was not used (it
    # was lost when the snapshot was refused after the notice was made).
    for argv, given in ((("compact",), None),
                        (("compact", "--over-skipped"), None),
                        (("rekey", "--signature", "-", "--over-skipped"), signature)):
        out = sb.kint(*on(db, *argv), input=given)
        assert out.returncode == 5, (argv, out.stdout, out.stderr)
        lines = out.stderr.splitlines()
        assert lines[0].startswith("kint: error: the full state (") and lines[0].endswith(
            "and snapshots are single-epoch [TOO_LARGE]"), out.stderr
        assert lines[1] == ("hint: a snapshot (compact, rekey) is one epoch and cannot be "
                            "split; `kint push` splits the changes across epochs"), out.stderr
        assert lines[2:] == ([OVER_SKIPPED_UNUSED] if "--over-skipped" in argv else []), (
            argv, out.stderr)
    assert kjson(sb, *on(db, "status"))["head"] == head  # nothing was anchored


def test_over_skipped_where_no_epoch_was_skipped_is_said_to_be_unused(machine):
    """09-cli.md: `--over-skipped` is honoured only on a machine whose last pull skipped an
    epoch. Elsewhere compact and rekey anchor as without it, as in v0.3.0, and now say so on
    stderr (a flag given is honoured or reported); stdout is what v0.3.0 prints."""
    from chain_machines import owner_account, wallet_signature

    sb, db = machine, machine.profile_db("unskipped")
    write_store(db, tenant=sb.tenant)
    owner = kjson(sb, *on(db, "connect", "--dev"))["owner"]
    ok(sb.kint(*on(db, "push")))
    dry = ok(sb.kint(*on(db, "compact", "--over-skipped", "--dry-run")))
    assert dry.stderr.splitlines() == [OVER_SKIPPED_UNUSED], dry.stderr
    assert dry.stdout.startswith("would anchor epoch 2:"), dry.stdout
    payload = canonical_payload(owner).decode()
    signature = wallet_signature(owner_account(sb, owner), payload) + "\n"
    rekeyed = ok(sb.kint(*on(db, "rekey", "--signature", "-", "--over-skipped"),
                         input=signature))
    assert rekeyed.stderr.splitlines() == [OVER_SKIPPED_UNUSED], rekeyed.stderr
    assert rekeyed.stdout.splitlines()[1].startswith("snapshot epoch 2 tx "), rekeyed.stdout
    plain = ok(sb.kint(*on(db, "compact", "--dry-run")))  # without the flag: nothing said
    assert plain.stderr == "", plain.stderr


def test_a_dry_run_on_a_machine_without_its_session_key_previews_and_says_so(machine):
    """09-cli.md: `--dry-run` reads the chain head and reports what would be anchored, sending
    nothing; v0.3.0's returned before it loaded the session key. Here the key was loaded
    first, so a machine whose key does not load (none made yet, moved away, another local
    passphrase) had its preview refused, exit 3 NO_SESSION_KEY. The key's refusal is a
    `kint: a push would be refused: ...` line now, as an unauthorized key's is; the push
    itself still refuses."""
    sb, db = machine, machine.profile_db("keyless")
    write_store(db, tenant=sb.tenant)
    kjson(sb, *on(db, "connect", "--dev"))
    ok(sb.kint(*on(db, "push")))
    write_store(db, {"deploy-window": {"rule": "deploys only before 3pm"}}, tenant=sb.tenant)
    keystore = sb.kint_home / "session.key"
    keystore.rename(sb.kint_home / "session.key.away")
    try:
        would = "kint: a push would be refused: no session key on this machine"
        for argv, said in ((("push", "--dry-run"), "would anchor 2 row change(s) in 1 epoch(s)"),
                           (("compact", "--dry-run"), "would anchor epoch 2:")):
            out = ok(sb.kint(*on(db, *argv)))
            assert said in out.stdout, (argv, out.stdout)
            assert out.stderr.startswith(would), (argv, out.stderr)
        preview = kjson(sb, *on(db, "push", "--dry-run"))
        assert preview["dry_run"] is True and preview["notices"][0].startswith(would), preview
        refused = sb.kint(*on(db, "push"))
        assert refused.returncode == 3 and "[NO_SESSION_KEY]" in refused.stderr, refused.stderr
    finally:
        (sb.kint_home / "session.key.away").rename(keystore)
    ok(sb.kint(*on(db, "push")))
