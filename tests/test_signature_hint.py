"""A derive signature given on argv (a `--signature` value that names no file) is refused
in v0.3.0's words (14-agents.md, "Common errors and fixes": `give the derive signature with
--signature - (stdin) or --signature-file PATH; never on argv`) by every command that takes
one: connect, join and rekey. Its hint shows the signature piped into a command line the
user can run as it stands, so it names the command that refused, not always `kint
connect` (review18: join and rekey were sent to connect), and never echoes the value."""

from __future__ import annotations

from click.testing import CliRunner

from kint.commands.common import Ctx

SIGNATURE = "0x" + "cd" * 65
OWNER = "0x000000000000000000000000000000000000dEaD"
REFUSED = ("kint: error: give the derive signature with --signature - (stdin) or "
           "--signature-file PATH; never on argv [BAD_REQUEST]")


def hint_of(stderr: str) -> str:
    return next(line for line in stderr.splitlines() if line.startswith("hint: "))


def test_join_refuses_a_signature_on_argv_and_pipes_it_into_join(sandbox):
    out = sandbox.kint("join", "--owner", OWNER, "--signature", SIGNATURE, "--no-setup")
    assert out.returncode == 2, out.stdout + out.stderr
    # The signature is the connect step's secret: join names the step, in v0.3.0's words.
    assert out.stderr.splitlines()[0] == REFUSED.replace("kint: error:",
                                                         "join stopped at connect:"), out.stderr
    hint = hint_of(out.stderr)
    assert "| kint join --owner 0x... --signature -" in hint, hint
    assert "kint connect" not in hint, hint
    assert "cd" * 65 not in out.stdout + out.stderr


def test_rekey_refuses_a_signature_on_argv_and_pipes_it_into_rekey(monkeypatch):
    # The refusal comes before anything is sent; the connected-here check before it is
    # stood in for (this test has no enrolment).
    from kint.commands import chain

    monkeypatch.setattr(chain, "refuse_unconnected", lambda obj: None)
    out = CliRunner().invoke(chain.rekey_cmd, ["--signature", SIGNATURE],
                             obj=Ctx(None, None, False))
    assert out.exit_code == 2, out.output
    said = out.stderr if hasattr(out, "stderr") else out.output
    assert REFUSED in said.splitlines(), said
    hint = hint_of(said)
    assert "| kint rekey --signature -" in hint, hint
    assert "kint connect" not in hint, hint
    assert "cd" * 65 not in out.output


def test_connect_still_pipes_it_into_connect(sandbox):
    out = sandbox.kint("connect", "--owner", OWNER, "--signature", SIGNATURE)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.splitlines()[0] == REFUSED, out.stderr
    assert "| kint connect --owner 0x... --signature -" in hint_of(out.stderr)
    assert "cd" * 65 not in out.stdout + out.stderr


def test_a_signature_file_that_is_gone_is_said_to_be_deleted_once_read(sandbox, tmp_path):
    """`--signature-file PATH` is read, then unlinked (09-cli.md), so the same command run
    again after a refusal meets no file. Its hint spoke of `--signature` ("takes `-` for
    stdin or a path, never the signature itself"), a flag the user did not give, and not of
    the file kint deleted. The path is still not echoed (it may be the signature itself)."""
    sig = tmp_path / "sig.txt"
    sig.write_text("0x1234\n")  # not a signature: refused here, nothing sent to a chain
    first = sandbox.kint("connect", "--owner", OWNER, "--signature-file", str(sig))
    assert first.returncode == 2 and not sig.exists(), first.stderr  # read, then unlinked
    for argv in (("connect", "--owner", OWNER), ("join", "--owner", OWNER, "--no-setup")):
        out = sandbox.kint(*argv, "--signature-file", str(sig))
        assert out.returncode == 2, (argv, out.stdout, out.stderr)
        assert "the signature file given does not exist [BAD_REQUEST]" in \
            out.stderr.splitlines()[0], out.stderr
        hint = hint_of(out.stderr)
        assert hint == ("hint: --signature-file names a file holding the signature, which "
                        "kint deletes once read (a run before this one may have read it): "
                        "sign into the file again, or pipe the signature with --signature -"
                        ), hint
        assert str(sig) not in out.stderr
    # `--signature PATH` naming no file is still taken for the signature itself.
    out = sandbox.kint("connect", "--owner", OWNER, "--signature", str(sig))
    assert out.stderr.splitlines()[0] == REFUSED, out.stderr
