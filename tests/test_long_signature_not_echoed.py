"""A signature given where a path goes is never echoed back, however long (review18).

`--signature` takes `-` or a path, and so does `--signature-file`; a value that names no
file is refused without printing it (kint.commands.secrets `read_secret_file`), since it
is most likely the signature itself. A value longer than any file name (a smart account's
ERC-1271 signature runs to hundreds of hex digits) failed with the OS's "File name too
long" instead, and that refusal printed the value twice: as the path and inside the OS's
error."""

from __future__ import annotations

from chain_machines import make_session_key

OWNER = "0x000000000000000000000000000000000000dEaD"
LONG = "0x" + "e7" * 300  # 602 characters: no file system takes a name that long


def assert_refused_unechoed(out) -> None:
    assert out.returncode == 2, out.stdout + out.stderr
    assert "e7" * 300 not in out.stdout + out.stderr, out.stderr
    assert "[BAD_REQUEST]" in out.stderr, out.stderr


def test_authorize_submit_does_not_echo_a_long_signature(sandbox):
    # The key written as `session-key create` writes it, at a test's scrypt cost
    # (chain_machines.make_session_key; the command itself: test_authorize_cli.py).
    make_session_key(sandbox)
    out = sandbox.kint("authorize", "submit", "--owner", OWNER, "--deadline", "1",
                       "--expiry", "1", "--signature", LONG)
    assert_refused_unechoed(out)


def test_connect_does_not_echo_a_long_signature_file_value(sandbox):
    assert_refused_unechoed(sandbox.kint("connect", "--owner", OWNER, "--signature-file",
                                         LONG))
