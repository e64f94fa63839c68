"""`kint demo`: kint's main job, end to end, in a throwaway sandbox.

The sandbox has its own HOME, KINT_HOME and HERMES_HOME, so nothing of the person's own
memory or kint state is read or touched. The stores are written through Sibyl's own client
with Sibyl's test gate (`NullEntitlementGate`, passed in code): the sandbox has no Sibyl
account, and the demo is about kint, not the account gate.

What it shows today: three real Sibyl stores (Sibyl's own and two Hermes profiles), one
supervisor, one worker per space, each answering for its own store. It leaves nothing
running and, unless `--keep`, nothing on disk.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import click

KINT = [sys.executable, "-P", "-m", "kint.cli"]


def _step(text: str) -> None:
    click.echo(click.style(f"\n== {text}", bold=True))


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    shown = " ".join(["kint", *args])
    click.echo(f"$ {shown}")
    out = subprocess.run([*KINT, *args], env=env, text=True, capture_output=True, timeout=120)
    if out.stdout:
        click.echo(out.stdout.rstrip())
    if out.stderr:
        click.echo(out.stderr.rstrip(), err=True)
    return out


def _write_store(db: Path, tenant: str, rows: dict[str, dict[str, str]]) -> None:
    from sibyl_memory_client import MemoryClient
    from sibyl_memory_client.testing import NullEntitlementGate

    client = MemoryClient.local(str(db), tenant_id=tenant,
                                entitlement_gate=NullEntitlementGate())
    for name, body in rows.items():
        client.set_entity("rules", name, body)
    client.write_event(acted=[f"wrote {len(rows)} rule(s)"])
    client.storage.close()


def run_demo(keep: bool = False) -> int:
    from kint.spaces import SIBYL_DEFAULT_TENANT

    root = Path(tempfile.mkdtemp(prefix="kint-demo-"))
    home, kint_home, hermes = root / "home", root / "kint", root / "home" / ".hermes"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
    env.update(HOME=str(home), KINT_HOME=str(kint_home), HERMES_HOME=str(hermes),
               SIBYL_MEMORY_TELEMETRY="0")
    saved = {k: os.environ.get(k) for k in ("HOME", "HERMES_HOME")}
    failed = False
    try:
        _step(f"a sandbox machine in {root}")
        os.environ.update(HOME=str(home), HERMES_HOME=str(hermes))
        tenant = SIBYL_DEFAULT_TENANT
        stores = {
            home / ".sibyl-memory" / "memory.db":
                {"release-gate": {"rule": "never ship on a Friday"}},
            hermes / "sibyl" / "profiles" / "research" / "memory.db":
                {"sources": {"rule": "cite the primary source"},
                 "scope": {"rule": "stay on the question asked"}},
            hermes / "sibyl" / "profiles" / "ops" / "memory.db":
                {"on-call": {"rule": "page the owner before a rollback"}},
        }
        for db, rows in stores.items():
            db.parent.mkdir(parents=True, exist_ok=True)
            _write_store(db, tenant, rows)
            click.echo(f"wrote {len(rows)} rule(s) with Sibyl's client into {db}")

        _step("the supervisor starts on demand; each store gets its own worker")
        for db in stores:
            failed |= _run(env, "--db", str(db), "status").returncode != 0

        _step("one row per space")
        failed |= _run(env, "supervisor", "status").returncode != 0
    finally:
        _step("stop: every worker, then the supervisor")
        _run(env, "supervisor", "stop")
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if keep:
            click.echo(f"sandbox kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    if failed:
        click.echo("demo: a step failed (see above)", err=True)
        return 1
    click.echo("\ndemo: done")
    return 0
