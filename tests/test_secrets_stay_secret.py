"""No secret leaves where it belongs: after a whole connect, push, verify and restore cycle
on the devchain (real supervisors, workers and anvil), the derive signature, the salting
passphrase, the recovery code, the data key, the session key's private key and the local
secret appear in no log, no other file, no command's output (`--json` included) and no
process's argv. Two files hold a secret by design: local.secret, and RECOVERY-<space>.txt
(the recovery code, as v0.3.0 writes it)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

from eth_account import Account

from chain_machines import authorize_machine, new_machine, ok, recovery_code, wallet_signature
from conftest import sibyl_client
from support.procs import processes

SALT = "salty horse battery staple 7731"
HOLDERS = {"local.secret": "local_secret", "RECOVERY-": "recovery_code"}


def _argv_of_processes_naming(homes: list[Path]) -> list[str]:
    """The argv of every process whose environment or argv names one of `homes`."""
    marks = [os.fsencode(str(h)) for h in homes]
    return [argv.replace(b"\0", b" ").decode(errors="replace")
            for _, argv, env in processes() if any(m in env or m in argv for m in marks)]


def _texts_under(root: Path):
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":  # the mirror, the epoch cache: look inside too
            try:
                data += gzip.decompress(data)
            except (OSError, EOFError):
                pass
        yield path, data.decode("latin-1").lower()


def test_no_secret_in_a_log_a_file_an_output_or_an_argv(tmp_path_factory, chain_home):
    a = new_machine(tmp_path_factory.mktemp("leak-a"), chain_home)
    b = new_machine(tmp_path_factory.mktemp("leak-b"), chain_home)
    owner, stranger = Account.create(), Account.create()
    outputs: list[str] = []

    def kint(machine, *argv: str, input: str | None = None):
        out = machine.kint(*argv, input=input)
        outputs.append(f"kint {' '.join(argv)}\n{out.stdout}\n{out.stderr}")
        return out

    try:
        client = sibyl_client(a.sibyl_db, a.tenant)
        client.set_entity("rules", "release-gate", {"rule": "never ship on a Friday"})
        client.storage.close()
        payload = ok(kint(a, "canonical-payload", "--owner", owner.address)).stdout
        signature = wallet_signature(owner, payload)
        sig_file = a.root / "signature.txt"
        sig_file.write_text(signature + "\n")
        connected = json.loads(ok(kint(a, "connect", "--owner", owner.address, "--signature-file",
                                       str(sig_file), "--passphrase-stdin", "--json",
                                       input=SALT + "\n")).stdout)
        authorize_machine(chain_home, owner, connected["session"])
        for argv in (("push", "--json"), ("verify", "never ship on a Friday", "--json"),
                     ("status", "--json"), ("doctor", "--json"), ("config", "show", "--json"),
                     ("supervisor", "status", "--json"), ("recovery-code",)):
            kint(a, *argv)
        rewritten = json.loads(ok(kint(a, "recovery-code", "--json")).stdout)  # the path only
        assert rewritten == {"recovery_file": str(a.kint_home /
                                                  f"RECOVERY-{connected['space'][:16]}.txt")}
        code = recovery_code(a, connected["space"])
        wrong = code[:-1] + ("A" if code[-1] != "A" else "B")
        kint(b, "connect", "--owner", owner.address, "--recovery-code-stdin", input=wrong + "\n")
        other = wallet_signature(stranger, payload)
        kint(b, "connect", "--owner", owner.address, "--signature", "-", input=other + "\n")
        ok(kint(b, "connect", "--owner", owner.address, "--recovery-code-stdin", "--json",
                input=code + "\n"))
        ok(kint(b, "pull", "--json"))
        ok(kint(b, "verify", "never ship on a Friday", "--json"))
        argvs = _argv_of_processes_naming([a.kint_home, b.kint_home])
        assert len(argvs) >= 4, argvs  # each machine's supervisor, forkserver, worker(s)

        from kint.custody.local_secret import load_local_secret
        from kint.custody.recovery_code import decode_recovery_code
        from kint.custody.session_key import unlock_session_key

        secrets = {
            "signature": signature.removeprefix("0x"),
            "stranger's signature": other.removeprefix("0x"),
            "salt passphrase": SALT,
            "recovery_code": code,
            "recovery code, undashed": code.replace("-", ""),
            "data key": decode_recovery_code(code).hex(),
            "session private key": unlock_session_key(a.kint_home).key.hex().removeprefix("0x"),
            "local_secret": load_local_secret(a.kint_home).password,
        }
        secrets = {what: value.lower() for what, value in secrets.items()}
        leaks = []
        for root in (a.root, b.root):
            for path, text in _texts_under(root):
                allowed = next((v for k, v in HOLDERS.items() if path.name.startswith(k)), None)
                leaks += [f"{path}: {what}" for what, value in secrets.items()
                          if what != allowed and value in text]
        for text in outputs + argvs:
            leaks += [f"{text.splitlines()[0][:80]}: {what}" for what, value in secrets.items()
                      if value in text.lower()]
        assert leaks == []
    finally:
        a.shutdown()
        b.shutdown()


def test_the_owner_key_stays_out_of_the_supervisor_a_command_starts(sandbox):
    """KINT_OWNER_KEY is read by `kint authorize direct` and `burn-nonce` only. A command
    that starts the supervisor gave it its whole environment: with the owner's key exported
    in the shell, the key lived on in the daemon's environment, and its workers', after
    the command ended. The daemon gets the caller's environment less the secrets no daemon
    reads; KINT_SESSION_PASSPHRASE, which it reads, still reaches it."""
    owner_key = "0x" + Account.create().key.hex().removeprefix("0x")
    out = sandbox.kint("supervisor", "start", env={"KINT_OWNER_KEY": owner_key,
                                                   "KINT_SESSION_PASSPHRASE": SALT})
    assert out.returncode == 0, out.stderr
    daemons = [env for pid, argv, env in processes()
               if b"kint.supervisor" in argv and os.fsencode(str(sandbox.kint_home)) in argv]
    assert len(daemons) == 1, daemons
    environ = dict(item.split(b"=", 1) for item in daemons[0].split(b"\0") if b"=" in item)
    assert b"KINT_OWNER_KEY" not in environ
    assert owner_key.encode() not in daemons[0]
    assert environ[b"KINT_SESSION_PASSPHRASE"] == SALT.encode()
    assert environ[b"KINT_HOME"] == os.fsencode(str(sandbox.kint_home))
