"""A command whose KINT_SESSION_PASSPHRASE differs from the running supervisor's is told,
and neither passphrase, nor anything a guess could be checked against, is shown, logged,
written or put on a command line (kint/settings/secret_proof.py).

A real supervisor and worker, started with one passphrase; commands run with another. And
a supervisor older than the proof (`older`), which refuses one: every command is still
served by it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from conftest import make_sandbox, write_store
from kint.settings import secret_proof

THEIRS = "supervisor-passphrase-9c41d"
MINE = "command-passphrase-2be70"
DIFFERS = ("kint: KINT_SESSION_PASSPHRASE in this environment differs from the supervisor's, "
           "so it is not used: the supervisor unseals the keys with its own; to use this one, "
           "give it to the supervisor")
# What a proof looks like on the wire: never to be seen outside a request's frames.
PROOF = re.compile(rb"set:[0-9a-f]{32}:[0-9a-f]{64}")


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    """A machine whose supervisor was started with THEIRS in its environment."""
    sb = make_sandbox(tmp_path_factory.mktemp("passphrase"))
    write_store(sb.sibyl_db)
    out = sb.kint("supervisor", "start", env={"KINT_SESSION_PASSPHRASE": THEIRS})
    assert out.returncode == 0, out.stderr
    yield sb
    sb.shutdown()


def test_a_proof_tells_the_same_secret_from_another_and_a_bare_set_claims_nothing():
    proof = secret_proof.proof(MINE)
    assert secret_proof.well_formed(proof) and secret_proof.well_formed("set")
    assert not secret_proof.differs(proof, MINE)
    assert secret_proof.differs(proof, THEIRS)
    assert not secret_proof.differs("set", THEIRS)  # an older client: nothing to compare
    assert not secret_proof.well_formed(MINE) and not secret_proof.well_formed(proof + "0")


def test_a_command_with_another_passphrase_is_told_which_is_used_and_how_to_change_it(box):
    out = box.kint("status", env={"KINT_SESSION_PASSPHRASE": MINE})
    assert out.returncode == 0, out.stderr
    [line] = [x for x in out.stderr.splitlines() if "KINT_SESSION_PASSPHRASE" in x]
    assert line.startswith(DIFFERS) and "`kint supervisor stop`" in line, line
    same = box.kint("status", env={"KINT_SESSION_PASSPHRASE": THEIRS})
    assert same.returncode == 0 and "KINT_SESSION_PASSPHRASE" not in same.stderr, same.stderr
    for out in (out, same):
        both = (out.stdout + out.stderr).encode()
        assert MINE.encode() not in both and THEIRS.encode() not in both
        assert PROOF.search(both) is None


def test_supervisor_status_says_whether_this_environments_passphrase_is_the_supervisors(box):
    """`kint supervisor status`, where the settings the supervisor was started with are
    listed (a secret as `set` only), says on stderr when this environment's passphrase is
    another, and `--json` has `passphrase_differs` (null when this environment has none)."""
    for env, differs in (({"KINT_SESSION_PASSPHRASE": MINE}, True),
                         ({"KINT_SESSION_PASSPHRASE": THEIRS}, False), ({}, None)):
        out = box.kint("supervisor", "status", "--json", env=env)
        assert out.returncode == 0, out.stderr
        shown = json.loads(out.stdout)
        assert shown["supervisor"]["passphrase_differs"] is differs, (env, shown)
        assert "notices" not in shown
        lines = [x for x in out.stderr.splitlines() if "KINT_SESSION_PASSPHRASE" in x]
        assert [x[:len(DIFFERS)] for x in lines] == ([DIFFERS] if differs else []), out.stderr
        text = box.kint("supervisor", "status", env=env)
        assert ("KINT_SESSION_PASSPHRASE=set" in text.stdout.splitlines()[-1]
                and (DIFFERS in text.stderr) is bool(differs)), text
        for done in (out, text):
            both = (done.stdout + done.stderr).encode()
            assert MINE.encode() not in both and THEIRS.encode() not in both
            assert PROOF.search(both) is None


HINT = ("hint: give the supervisor this environment's KINT_SESSION_PASSPHRASE (or none, if "
        "this environment has none) first: the service's environment file, or `kint "
        "supervisor stop`, then ")


def test_join_stops_at_its_session_key_step_under_another_local_secret(box):
    """`kint join` makes the session key where there is none, sealed with its own local
    secret, after its first chain read has made sure a supervisor runs: under another
    passphrase than that supervisor's (or none where it has one) the key was written, and
    refused NO_SESSION_KEY at the first push. It stops at its session key step instead, as
    `kint session-key create` refuses, nothing written, naming neither secret."""
    from kint.custody.recovery_code import encode_recovery_code

    key = box.kint_home / "session.key"
    assert not key.exists()
    argv = ("join", "--owner", "0x000000000000000000000000000000000000dEaD",
            "--recovery-code-stdin", "--no-setup")
    code = encode_recovery_code(b"\x01" * 32) + "\n"
    try:  # should join go on past the step, its chain reads meet a closed port
        with box.chain_out_of_reach():
            for env in ({"KINT_SESSION_PASSPHRASE": MINE}, {}):
                plain = box.kint(*argv, input=code, env=env)
                assert plain.returncode == 2, plain.stdout + plain.stderr
                stopped = next(x for x in plain.stderr.splitlines()
                               if x.startswith("join stopped"))
                assert stopped.startswith("join stopped at session key: the running "
                                          "supervisor (pid "), plain.stderr
                assert stopped.endswith("a key created here would be sealed under another "
                                        "local secret than its workers unseal it with, and "
                                        "every push would refuse NO_SESSION_KEY; nothing was "
                                        "changed [CONFIG_INVALID]"), plain.stderr
                assert f"{HINT}`kint join` again" in plain.stderr, plain.stderr
                asked = box.kint(*argv, "--json", input=code, env=env)
                refused = json.loads(asked.stdout)
                assert (refused["error"], refused["step"]) == ("CONFIG_INVALID", "session key")
                assert not key.exists()
                for out in (plain, asked):
                    both = (out.stdout + out.stderr).encode()
                    assert MINE.encode() not in both and THEIRS.encode() not in both
                    assert PROOF.search(both) is None
    finally:  # the next test makes the key itself
        key.unlink(missing_ok=True)


def test_a_session_key_sealed_under_another_local_secret_than_the_supervisors_is_refused(box):
    """`kint session-key create` and `rotate` seal the key with the command's local secret,
    and only the supervisor's workers open it, with theirs: made under another (this
    environment's other passphrase, or none while the supervisor has one), the key was
    written and pushes refused NO_SESSION_KEY later. Both are refused before anything is
    written, naming neither secret; with the supervisor's passphrase they go on."""
    key, old = box.kint_home / "session.key", box.kint_home / "session.key.old"
    assert not key.exists()
    for env, why in (({"KINT_SESSION_PASSPHRASE": MINE}, "runs with another "
                      "KINT_SESSION_PASSPHRASE than this command's"),
                     ({}, "unseals the session key with its KINT_SESSION_PASSPHRASE, which "
                      "this command's environment does not set")):
        for action in ("create", "rotate"):
            out = box.kint("session-key", action, env=env)
            assert out.returncode == 2 and "[CONFIG_INVALID]" in out.stderr, out
            assert f") {why}: a key {action}d here would be sealed" in out.stderr, out.stderr
            assert "nothing was changed" in out.stderr and "`kint supervisor stop`" in \
                out.stderr, out.stderr
            # This environment's passphrase given to the supervisor first: a key sealed
            # under the supervisor's is one this shell's own later commands cannot open.
            assert f"{HINT}this command again" in out.stderr, out.stderr
            assert not key.exists() and not old.exists(), action
            both = (out.stdout + out.stderr).encode()
            assert MINE.encode() not in both and THEIRS.encode() not in both
            assert PROOF.search(both) is None
    made = box.kint("session-key", "create", env={"KINT_SESSION_PASSPHRASE": THEIRS})
    assert made.returncode == 0 and made.stdout.startswith("created: 0x"), made
    sealed = key.read_bytes()
    # An existing key is left alone whatever the passphrase: nothing is sealed.
    again = box.kint("session-key", "create", env={"KINT_SESSION_PASSPHRASE": MINE})
    assert again.returncode == 0 and again.stdout.startswith("exists: 0x"), again
    refused = box.kint("session-key", "rotate", env={"KINT_SESSION_PASSPHRASE": MINE})
    assert refused.returncode == 2 and "[CONFIG_INVALID]" in refused.stderr, refused
    assert key.read_bytes() == sealed and not old.exists()  # nothing moved
    rotated = box.kint("session-key", "rotate", env={"KINT_SESSION_PASSPHRASE": THEIRS})
    assert rotated.returncode == 0 and rotated.stdout.startswith("rotated: 0x"), rotated
    assert old.read_bytes() == sealed


def test_supervisor_status_refuses_anything_but_a_proof(box):
    from kint.client import KintError

    for sent in ("set", MINE):
        with pytest.raises(KintError) as caught:
            box.call("sup.status", args={"passphrase": sent})
        assert caught.value.code == "BAD_REQUEST" and MINE not in caught.value.message


def test_a_secret_given_as_neither_set_nor_a_proof_is_refused_saying_what_is_taken(box):
    """This version takes `set` or a proof for a secret; a request giving anything else
    (the passphrase itself, a proof cut short) was refused in the words of a supervisor
    older than proofs ("may only say that ... is set"), with the usual hint to fix the
    value. It says what is taken now and what to do, never echoing the value, in words the
    client does not take for an older supervisor's (which it would ask again with `set`)."""
    from kint.client import KintError

    for sent in (MINE, secret_proof.proof(MINE)[:-1], "unset"):
        with pytest.raises(KintError) as caught:
            box.call("status", box.sibyl_db, args={"settings": {
                "KINT_SESSION_PASSPHRASE": sent}})
        err = caught.value
        assert err.code == "BAD_REQUEST", (err.code, err.message)
        assert err.message == (
            "status: argument 'settings' gives KINT_SESSION_PASSPHRASE as neither `set` nor "
            "its proof `set:NONCE:MAC` (NONCE 32 and MAC 64 lowercase hex digits); a "
            "secret's value is never sent"), err.message
        assert err.hint is not None and err.hint.startswith("send `set` for a secret the "
                                                            "caller has, or the proof "), err.hint
        assert sent not in err.message + err.hint and MINE not in err.message + err.hint
        assert secret_proof.refused_as_a_value(err.message) is None


def test_a_successful_json_command_carries_the_line_in_its_notices(box):
    """`--json` is read from stdout alone: a success's line about the passphrase was on
    stderr only. It is in the object's `notices` (as a refusal's is), and there only
    (docs/commands.md): stderr stays as quiet of it as a refusal's, so a script that reads
    both as one stream (`2>&1`) still parses one object. A command with the supervisor's
    passphrase has none."""
    out = box.kint("status", "--json", env={"KINT_SESSION_PASSPHRASE": MINE})
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)
    [line] = [n for n in shown.get("notices", []) if "KINT_SESSION_PASSPHRASE" in n]
    assert line.startswith(DIFFERS), shown
    assert "KINT_SESSION_PASSPHRASE" not in out.stderr, out.stderr
    same = box.kint("status", "--json", env={"KINT_SESSION_PASSPHRASE": THEIRS})
    assert "notices" not in json.loads(same.stdout), same.stdout
    assert PROOF.search(out.stdout.encode()) is None and MINE not in out.stdout


def test_a_json_refusal_carries_the_line_in_its_notices(box):
    """A `--json` command that refuses carries the lines about its settings in the refusal
    object (kint.commands.common.refuse): this one among them."""
    out = box.kint("push", "--json", env={"KINT_SESSION_PASSPHRASE": MINE})  # not connected
    assert out.returncode != 0, out.stdout
    refusal = json.loads(out.stdout)
    assert any(n.startswith(DIFFERS) for n in refusal.get("notices", [])), refusal
    assert "KINT_SESSION_PASSPHRASE" not in out.stderr, out.stderr


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads the command lines in /proc")
def test_neither_passphrase_nor_a_proof_reaches_a_file_a_log_or_a_command_line(box):
    box.kint("status", env={"KINT_SESSION_PASSPHRASE": MINE})
    for path in box.kint_home.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            assert MINE.encode() not in data and THEIRS.encode() not in data, path
            assert PROOF.search(data) is None, path
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    for pid in pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if str(box.kint_home).encode() in argv or b"kint" in argv:
            assert MINE.encode() not in argv and THEIRS.encode() not in argv, pid
            assert PROOF.search(argv) is None, pid


# What a supervisor older than secret proofs was, in the two places it differs from this
# version's on the wire: each replaced in a copy of kint by the line it had then.
OLDER = {
    "settings/wire.py": ("""if BY_NAME[name].secret and not secret_proof.well_formed(raw):
            return secret_proof.malformed(name)""",
                         """if BY_NAME[name].secret and raw != secret_proof.SECRET_SET:
            return f"may only say that {name} is set, never its value", None"""),
    "protocol/ops.py": ("""10_000,
           # The caller's proof of its KINT_SESSION_PASSPHRASE (kint.settings.secret_proof).
           args={"passphrase": ArgSpec("str", max_chars=128)}),""", "10_000),"),
}


# And what a supervisor older than `started_with` (the settings it took from its
# environment, in sup.status) was besides: it said nothing of its passphrase.
OLDEST = {**OLDER, "supervisor/status.py": ('"started_with": started_with(),', "")}


def _older_machine(root: Path, lines: dict[str, tuple[str, str]]):
    """A machine whose supervisor, started with THEIRS, runs a copy of this kint
    (conftest.kint_copy) with `lines` put back as they were."""
    from conftest import kint_copy

    copy = kint_copy(root / "code")
    for name, (now, then) in lines.items():
        text = (copy / name).read_text()
        assert text.count(now) == 1, f"{name} no longer has {now!r}: update OLDER"
        (copy / name).write_text(text.replace(now, then))
    sb = make_sandbox(root / "machine")
    write_store(sb.sibyl_db)
    paths = [str(copy.parent), *filter(None, sb.env.get("PYTHONPATH", "").split(os.pathsep))]
    out = sb.kint("supervisor", "start", env={"KINT_SESSION_PASSPHRASE": THEIRS,
                                              "PYTHONPATH": os.pathsep.join(paths)})
    assert out.returncode == 0, out.stderr
    return sb


@pytest.fixture(scope="module")
def older(tmp_path_factory):
    """A machine whose supervisor (started with THEIRS) is older than secret proofs: a
    copy of this kint whose two checks of a request are put back as they were before
    (OLDER): a secret's value may be only `set`, and `sup.status` takes no argument. Both
    are checked as the supervisor decodes a request, before it routes it, so the copy
    refuses what the older version refused, in its words. The commands run this
    checkout's kint, as when an upgrade has replaced the CLI (or Hermes' own install) but
    not yet the supervisor serving the home: it exits only when idle, and one started from
    another install is never replaced by this one's upgrade."""
    sb = _older_machine(tmp_path_factory.mktemp("older"), OLDER)
    yield sb
    sb.shutdown()


def test_an_older_supervisor_refuses_a_proof_and_serves_the_same_request_without_it(older):
    """Every command that sends its settings to an older supervisor (all that reach a
    worker) is served: refused for the proof, it asks again saying only that the
    passphrase is set, and gets what that supervisor's own commands got. `kint supervisor
    status` too, whose own argument that supervisor does not know."""
    mine = {"KINT_SESSION_PASSPHRASE": MINE}
    for argv in (("status", "--json"), ("supervisor", "status", "--json")):
        out = older.kint(*argv, env=mine)
        assert out.returncode == 0, (argv, out.stdout, out.stderr)
        assert "BAD_REQUEST" not in out.stdout + out.stderr, (argv, out.stdout, out.stderr)
        both = (out.stdout + out.stderr).encode()
        assert MINE.encode() not in both and THEIRS.encode() not in both
        assert PROOF.search(both) is None
    for path in older.kint_home.rglob("*"):  # the refused proof was not kept, nor logged
        if path.is_file() and not path.is_symlink():
            assert PROOF.search(path.read_bytes()) is None, path


def test_a_client_told_so_by_a_supervisor_sends_it_no_proof_again(older, box):
    """One refusal per supervisor, not per request: the client remembers that this one
    takes none (requests to it are watched on their way out, the supervisor real), while a
    supervisor of this version gets the proof with every request."""
    from kint.client import Client
    from kint.settings.wire import outgoing

    def sent_by(client: Client) -> list[str]:
        seen: list[str] = []
        send = client._roundtrip

        def watched(request, *rest, **kw):
            seen.append(request.args["settings"]["KINT_SESSION_PASSPHRASE"])
            return send(request, *rest, **kw)

        client._roundtrip = watched
        return seen

    for sb, first, again in ((older, ["proof", "set"], ["set"]),
                             (box, ["proof"], ["proof"])):
        with Client(sb.kint_home, autostart=False) as client:
            seen = sent_by(client)
            for expected in (first, again):
                seen.clear()
                args = {"settings": outgoing({"KINT_SESSION_PASSPHRASE": MINE})}
                client.call("status", tenant=sb.tenant, db=str(sb.sibyl_db),
                            space=sb.label(sb.sibyl_db), args=args, timeout_s=30)
                assert ["proof" if secret_proof.is_proof(x) else x for x in seen] == expected


def test_a_kint_servers_goodbye_sent_first_on_a_socket_of_its_own_reaches_an_older_one(
        older, monkeypatch):
    """A cast gets no reply, so a supervisor older than proofs that refused its proof told
    no one, and the cast was lost. kint-server sends one as the first message of a client:
    an exiting server whose socket a tool call still holds says goodbye on a fresh one
    (kint.agent_server.session). That goodbye now says only `set`, and the worker takes it:
    an attach of the session afterwards is told it ended."""
    from conftest import wait_until
    from kint.agent_server.session import AgentSession
    from kint.spaces import SpaceRef

    monkeypatch.setenv("KINT_SESSION_PASSPHRASE", MINE)  # what the server's settings carry
    session = AgentSession(SpaceRef(label=older.tenant, tenant=older.tenant,
                                    db=str(older.sibyl_db)), older.kint_home)
    session.watcher = False
    session.attach()  # a call: refused for its proof, and asked again with `set`
    with session._lock:  # a tool call waiting on the worker holds the session's socket
        session.close()  # the goodbye, a cast, the first message of a client of its own
    session._keepalive.join(30)

    def ended() -> bool:
        late = older.call("attach", older.sibyl_db, args={"session": session.id,
                                                          "watcher": False})
        return late.get("ended") is True

    assert wait_until(ended, timeout=15, interval=0.3)


def test_a_supervisor_older_than_started_with_cannot_say_and_is_not_refused(tmp_path):
    """A supervisor older than the list of the settings it started with (`started_with`
    in sup.status, and older than the proof) cannot say whether it has a passphrase: a
    command with one was refused as if it ran without, though it may run with the same.
    Not refused: the key is made as with no supervisor running."""
    sb = _older_machine(tmp_path, OLDEST)
    try:
        made = sb.kint("session-key", "create", env={"KINT_SESSION_PASSPHRASE": THEIRS})
    finally:
        sb.shutdown()
    assert made.returncode == 0 and made.stdout.startswith("created: 0x"), made
