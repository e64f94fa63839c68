"""`kint demo`: kint's main job, end to end, in a throwaway sandbox on the devchain.

It plays the beat README's "What works today" shows (v0.3.0's 07-verify.md, "The beat"):
remember a rule through Sibyl's client, push, verify (proceed), edit the row straight in
SQLite behind Sibyl's back, verify again (refuse, naming the block that anchored the good
value and the head block), and read both anchored versions with history. Then a second
machine (its own HOME and KINT_HOME) connects the way a new machine does: the owner's
wallet signs `kint canonical-payload` and the signature is piped to `kint connect
--signature -` (the devchain owner's throwaway key plays the wallet); the data key comes
out of the head epoch's header, and the machine pulls through Sibyl's own write methods and
verifies (proceed).

The sandbox has no Sibyl account, so its stores are written, and its workers run, with
Sibyl's test gate (`NullEntitlementGate`), passed in code (see `demo_gate`). The OS
keyring is left alone. It leaves nothing running and, unless `--keep`, nothing on disk.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

from kint.demo_supervisor import SANDBOX_MARKER
from kint.paths import devchain_dir

KINT = [sys.executable, "-P", "-m", "kint.cli"]
RULE_1 = "never ship on a Friday; every release needs a green deadlift test and a second reviewer"
RULE_2 = ("never ship on a Friday; every release needs a green deadlift test, a second "
          "reviewer, AND a passing kint verify")


class DemoFailed(Exception):
    pass


class Machine:
    def __init__(self, root: Path, name: str) -> None:
        self.name = name
        self.home = root / name / "home"
        self.kint_home = root / name / "kint"
        self.home.mkdir(parents=True)
        self.env = {k: v for k, v in os.environ.items()
                    if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
        self.env.update(HOME=str(self.home), KINT_HOME=str(self.kint_home),
                        HERMES_HOME=str(self.home / ".hermes"), SIBYL_MEMORY_TELEMETRY="0",
                        PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring")
        self.supervisor: subprocess.Popen[bytes] | None = None

    @property
    def db(self) -> Path:
        return self.home / ".sibyl-memory" / "memory.db"

    def kint(self, *args: str, expect: int | None = 0, stdin: str | None = None,
             shown_stdin: str | None = None) -> str:
        shown = shlex.join(args)
        if shown_stdin:
            shown = f"{shown_stdin} | kint {shown}"
        else:
            shown = f"kint {shown}"
        click.echo(click.style(f"[{self.name}] $ {shown}", fg="cyan"))
        out = subprocess.run([*KINT, *args], env=self.env, text=True, capture_output=True,
                             timeout=300, input=stdin)
        for line in (out.stdout + out.stderr).rstrip().splitlines():
            click.echo(f"  {line}")
        if expect is not None and out.returncode != expect:
            raise DemoFailed(f"`{shown}` exited {out.returncode}, not {expect}")
        return out.stdout

    def start_supervisor(self) -> None:
        self.kint_home.mkdir(mode=0o700, exist_ok=True)
        self.supervisor = subprocess.Popen(
            [sys.executable, "-P", "-m", "kint.demo_supervisor", "--home", str(self.kint_home)],
            env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True, cwd="/")
        from kint.client import Client

        deadline = time.monotonic() + 30
        with Client(self.kint_home, autostart=False) as client:
            while not client.ping(0.5):
                if self.supervisor.poll() is not None or time.monotonic() > deadline:
                    raise DemoFailed(f"the {self.name} supervisor did not start")

    def stop(self) -> None:
        if self.supervisor is not None and self.supervisor.poll() is None:
            self.supervisor.send_signal(signal.SIGTERM)
            try:
                self.supervisor.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.supervisor.kill()

    def sibyl(self):  # noqa: ANN201 - the SDK's client
        from sibyl_memory_client import MemoryClient
        from sibyl_memory_client.testing import NullEntitlementGate

        return MemoryClient.local(str(self.db), entitlement_gate=NullEntitlementGate())


def _step(text: str) -> None:
    click.echo(click.style(f"\n== {text}", bold=True))


def _play(root: Path, a: Machine, b: Machine) -> None:
    _step("machine A: the local chain, a supervisor, and this machine connected")
    a.kint("devchain", "start")
    a.start_supervisor()
    connected = a.kint("connect", "--dev", "--json")
    import orjson

    info = orjson.loads(connected)
    owner = info["owner"]

    _step("remember a rule through Sibyl's own client, and anchor it")
    saved_home = os.environ.get("HOME")
    os.environ["HOME"] = str(a.home)
    try:
        client = a.sibyl()
        client.set_entity("rules", "release-gate", {"rule": RULE_1})
        click.echo(f"  set_entity rules/release-gate: {RULE_1!r}")
        a.kint("push")
        client.set_entity("rules", "release-gate", {"rule": RULE_2})
        click.echo(f"  set_entity rules/release-gate: {RULE_2!r}")
        client.storage.close()
    finally:
        if saved_home is not None:
            os.environ["HOME"] = saved_home
    a.kint("push")

    _step("verify before acting: the stored text matches what was anchored")
    a.kint("verify", "release rule")

    _step("an edit straight into Sibyl's SQLite file, behind Sibyl's back")
    sql = ("update entities set body = replace(body, 'never', 'always') "
           "where name = 'release-gate'")
    click.echo(f"  $ sqlite3 {a.db} \"{sql}\"")
    conn = sqlite3.connect(a.db)
    conn.execute(sql)
    conn.commit()
    conn.close()
    a.kint("verify", "release rule", expect=1)

    _step("what the row held at every anchored epoch")
    a.kint("history", "entity", "release-gate", "--category", "rules")

    _step("machine B: a new machine, the same wallet's signature, the memory restored")
    target = devchain_dir(b.kint_home)
    target.mkdir(parents=True, mode=0o700)
    b.kint_home.chmod(0o700)
    shutil.copy(devchain_dir(a.kint_home) / "devchain.json", target / "devchain.json")
    b.start_supervisor()
    payload = b.kint("canonical-payload", "--owner", owner)
    signature = _wallet_sign(a.kint_home, owner, payload)
    b.kint("connect", "--owner", owner, "--signature", "-", stdin=signature + "\n",
           shown_stdin="cast wallet sign --data --from-file kint-canonical.json")
    b.kint("pull")
    b.kint("verify", "release rule")


def _wallet_sign(kint_home: Path, owner: str, payload: str) -> str:
    """What the owner's wallet does with the canonical payload: an EIP-712 signature. On the
    devchain the owner is a throwaway key `kint connect --dev` kept under KINT_HOME."""
    import json

    from eth_account import Account

    from kint.tenant_worker.dev_owner import load_owner

    account = load_owner(kint_home, owner)
    if account is None:
        raise DemoFailed(f"no devchain key for owner {owner}")
    signed = Account.sign_typed_data(account.key, full_message=json.loads(payload))
    return "0x" + signed.signature.hex()


def run_demo(keep: bool = False) -> int:
    root = Path(tempfile.mkdtemp(prefix="kint-demo-"))
    (root / SANDBOX_MARKER).write_text("a kint demo sandbox: safe to delete\n")
    a, b = Machine(root, "machine-a"), Machine(root, "machine-b")
    failed = None
    try:
        _step(f"a sandbox in {root} (its own HOME and KINT_HOME per machine)")
        _play(root, a, b)
    except DemoFailed as err:
        failed = str(err)
    finally:
        _step("cleaning up: supervisors and the devchain stop")
        for machine in (a, b):
            machine.stop()
        subprocess.run([*KINT, "devchain", "stop"], env=a.env, capture_output=True, timeout=60)
        if keep:
            click.echo(f"sandbox kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    if failed:
        click.echo(f"demo: failed: {failed}", err=True)
        return 1
    click.echo("\ndemo: done")
    return 0
