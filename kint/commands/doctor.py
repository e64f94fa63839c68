"""`kint doctor`: named checks, each passing or failing with what to do."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import click

from kint import spaces
from kint.client import KintError
from kint.commands.common import (Ctx, echo_json, explained, print_notices,
                                  sent_settings)
from kint.commands.doctor_env import environment_checks
from kint.commands.owner_flag import check_owner, owner_option
from kint.paths import kint_home
from kint.protocol.checks import check


def _placement(home: Path) -> dict[str, Any]:
    sibyl_dir = (Path.home() / ".sibyl-memory").resolve()
    resolved = home.resolve()
    inside = resolved == sibyl_dir or sibyl_dir in resolved.parents
    return check("kint home placement", not inside,
                 f"{home}" + (" is inside ~/.sibyl-memory: its files would be counted twice by "
                              "the cap" if inside else " is outside Sibyl's paths"),
                 "set KINT_HOME outside ~/.sibyl-memory")


# What mends loose modes: kint.supervisor.tighten, at the next supervisor start, for all of
# kint's files but the two whose exposure matters (the local secret, the recovery files).
PERMISSIONS_HINT = ("chmod 700 the folders and 600 the files listed; a starting supervisor "
                    "does so for kint's own files but local.secret and RECOVERY-*.txt "
                    "(replace the one, rekey over the other if it was read)")


def _permissions(home: Path) -> dict[str, Any]:
    loose = []
    for root, dirs, files in os.walk(home):
        for name in dirs + files:
            path = Path(root) / name
            try:
                st = path.lstat()
            except OSError:
                continue
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISDIR(st.st_mode) and mode != 0o700:
                loose.append(f"{path} {oct(mode)}")
            elif stat.S_ISREG(st.st_mode) and mode & 0o077:
                loose.append(f"{path} {oct(mode)}")
    if home.exists() and stat.S_IMODE(home.stat().st_mode) != 0o700:
        loose.insert(0, f"{home} {oct(stat.S_IMODE(home.stat().st_mode))}")
    return check("permissions", not loose,
                 "; ".join(loose[:5]) if loose else "folders 0700, files 0600",
                 PERMISSIONS_HINT)


@click.command("doctor")
@owner_option()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@click.pass_obj
def doctor_cmd(obj: Ctx, owner: str | None, as_json: bool) -> None:
    """Named checks: Sibyl's packages, the Python version, PYTHONPATH, kint home placement,
    permissions, supervisor reachable; from the space's worker the store, enrolment, data
    key, recovery file, state files, disk space, a half-done pull, unanchored changes, and
    on the chain the primary RPC (its chain id), the secondary RPC, the contract's code,
    the session key and the head against the mirror. RPC URLs show scheme, host and port only.
    Exit code 1 when any fails ([WARN] lines pass)."""
    check_owner(obj, owner)
    home = kint_home()
    checks = [*environment_checks(), _placement(home), _permissions(home)]
    client = obj.client(autostart=False)
    reachable = client.ping(2.0)
    checks.append(check("supervisor reachable", reachable,
                        "answering" if reachable else f"no supervisor for {home}",
                        "run `kint supervisor start`"))
    ref = spaces.resolve(obj.tenant, obj.db)
    problem = spaces.store_problem(ref.db)
    if problem is not None:  # never sent: its worker would fail at every start
        checks.append(check("store readable", False, f"{ref.db} {problem}", spaces.STORE_HINT))
    elif reachable:
        try:
            checks += print_notices(client.call("doctor", tenant=ref.tenant, db=ref.db,
                                                space=ref.label, args=sent_settings({}),
                                                timeout_s=60))["checks"]
        except KintError as err:
            err = explained(err, ref)
            checks.append(check("space", False, err.message, err.hint or ""))
    failed = [c for c in checks if not c["ok"]]
    if as_json:
        echo_json({"checks": checks, "ok": not failed})
    else:
        for c in checks:
            # v0.3.0's line (09-cli.md): `[ok  ]`, `[WARN]` or `[FAIL]`, then the check.
            mark = "[FAIL]" if not c["ok"] else "[WARN]" if c.get("warn") else "[ok  ]"
            click.echo(f"{mark} {c['name']}: {c['detail']}")
            if c.get("hint") and (not c["ok"] or c.get("warn")):
                click.echo(f"       hint: {c['hint']}")
    sys.exit(1 if failed else 0)
