"""Two machines on one devchain: each a Sandbox with its own HOME and KINT_HOME, both
pointed at the same anvil (machine B gets a copy of the devchain's record, the way a second
machine would be told where the chain is)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from conftest import Sandbox, make_sandbox

RULE_1 = "never ship on a Friday; every release needs a green deadlift test and a second reviewer"


def join_devchain(chain_home: Path, machine: Sandbox) -> None:
    target = machine.kint_home / "devchain"
    target.mkdir(parents=True, exist_ok=True, mode=0o700)
    machine.kint_home.chmod(0o700)
    shutil.copy(chain_home / "devchain" / "devchain.json", target / "devchain.json")


def new_machine(root: Path, chain_home: Path, **env: str) -> Sandbox:
    sb = make_sandbox(root, **env)
    join_devchain(chain_home, sb)
    sb.start_entitled()
    return sb


def ok(out: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def kjson(sb: Sandbox, *args: str) -> dict:
    return json.loads(ok(sb.kint(*args, "--json")).stdout)


def recovery_code(sb: Sandbox, space16: str) -> str:
    return (sb.kint_home / f"RECOVERY-{space16}.txt").read_text().splitlines()[0].strip()
