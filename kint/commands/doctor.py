"""`kint doctor`: named checks, each passing or failing with what to do."""

from __future__ import annotations

import stat
import sys
from pathlib import Path
from typing import Any

import click

from kint import spaces
from kint.client import KintError
from kint.commands.common import (Ctx, echo_json, explained, json_option, print_notices,
                                  sent_settings)
from kint.commands.doctor_env import environment_checks
from kint.commands.owner_flag import check_owner, owner_option
from kint.install_source import install_source
from kint.paths import LOCAL_SECRET_FILE, kint_home
from kint.protocol.checks import check


def _home(home: Path) -> dict[str, Any]:
    """v0.3.0's `kint home` row: the path and its mode, 0700 expected (anything else warns;
    the `permissions` check below names what a supervisor start would make private)."""
    try:
        mode = stat.S_IMODE(home.stat().st_mode)
    except FileNotFoundError:
        return check("kint home", True, f"{home} (not created yet)",
                     "any kint command on a space creates it, 0700", warn=True)
    except OSError as err:
        return check("kint home", False, f"{home}: {err.strerror or err}", "check KINT_HOME")
    return check("kint home", True, f"{home} (mode 0{mode:o})",
                 "" if mode == 0o700 else f"chmod 700 {home}", warn=mode != 0o700)


def _placement(home: Path) -> dict[str, Any]:
    sibyl_dir = (Path.home() / ".sibyl-memory").resolve()
    resolved = home.resolve()
    inside = resolved == sibyl_dir or sibyl_dir in resolved.parents
    return check("kint home placement", not inside,
                 f"{home}" + (" is inside ~/.sibyl-memory: its files would be counted twice by "
                              "the cap" if inside else " is outside Sibyl's paths"),
                 "set KINT_HOME outside ~/.sibyl-memory")


def _tenant(explicit: str | None) -> dict[str, Any]:
    """The tenant this doctor (and every command here without --tenant) runs under, and
    where it came from: --tenant, KINT_TENANT, Sibyl's credentials.json, Sibyl's default.
    Credentials the user has that give no tenant (a file SIBYL_CREDENTIALS names that is not
    there, a symlink, one that does not parse) warn: Sibyl reads them as no account, so the
    tenant falls to Sibyl's default, another space, without a word anywhere else."""
    origin = spaces.tenant_origin(explicit)
    detail = f"{origin.tenant} (from {origin.source})"
    if origin.unused is None:
        return check("tenant", True, detail)
    return check("tenant", True, f"{detail}: {origin.unused}",
                 "correct SIBYL_CREDENTIALS or Sibyl's credentials file (or remove it), or "
                 "pin the tenant (KINT_TENANT, kint --tenant, kint setup --env "
                 "KINT_TENANT=...)", warn=True)


# Each kind of loose entry (kint.home_modes' rule) with what to do about it: what a
# supervisor start mends, and the two files it leaves as they are on purpose, because one
# that was open to others may have been read.
MENDED_HINT = ("a supervisor start makes kint's own files private (`kint supervisor stop`, "
               "then `kint supervisor start`), as does chmod go-rwx on each")
LOCAL_SECRET_HINT = ("local.secret: kint refuses it while others can read it: chmod 600 it "
                     "if no one else could have read it, else remove it and `kint session-key "
                     "rotate` (the new key needs its own ETH and authorization)")
RECOVERY_HINT = ("RECOVERY-*.txt: chmod 600 it, and as its code is the data key, `kint "
                 "rekey` if anyone else could have read it (a supervisor start never makes "
                 "it private)")
SHOWN = 5  # entries named in the detail line, then "and N more"


def _listed(entries: list[str], count: int) -> str:
    more = f" and {count - len(entries)} more" if count > len(entries) else ""
    return ", ".join(entries) + more


def _permissions(home: Path) -> dict[str, Any]:
    """What the next supervisor start would make private (KINT_HOME itself and the entries
    under it that kint.home_modes calls loose, by its one rule), and the loose files it
    leaves as they are."""
    from kint.home_modes import LOOSE_BITS, HomeWalk
    from kint.supervisor.bindings import bound_stores

    mended: list[str] = []
    kept: list[str] = []
    count = 0
    secret = False
    try:
        top = home.lstat()
    except OSError:
        top = None
    if top is not None and stat.S_ISDIR(top.st_mode) and top.st_mode & LOOSE_BITS:
        mended.append(f"{home} {oct(stat.S_IMODE(top.st_mode))}")
        count = 1
    walk = HomeWalk(home, bound_stores(home))
    for entry in walk.loose():
        if entry.kept:
            kept.append(f"{entry.path} {oct(entry.mode)}")
            secret = secret or entry.name == LOCAL_SECRET_FILE
        else:
            count += 1
            if len(mended) < SHOWN:
                mended.append(f"{entry.path} {oct(entry.mode)}")
    parts, hints = [], []
    if count:
        parts.append("open to others: " + _listed(mended, count))
        hints.append(MENDED_HINT)
    if kept:
        parts.append("left as they are on purpose: " + _listed(kept[:SHOWN], len(kept)))
        hints += [LOCAL_SECRET_HINT] if secret else []
        hints += [RECOVERY_HINT] if len(kept) > secret else []
    if walk.refusal is not None:
        parts.append(f"nothing under {home} was looked at: {walk.refusal}")
        hints.append("set KINT_HOME to a folder of kint's own")
    if walk.stopped:
        parts.append(f"only the first {walk.bound} entries under {home} were looked at")
        hints.append("keep only kint's files under KINT_HOME")
    failed = bool(count or kept)
    return check("permissions", not failed,
                 "; ".join(parts) if parts else f"nothing under {home} open to others",
                 "; ".join(hints), warn=bool(parts) and not failed)


def _reachable(client: Any) -> dict[str, Any]:
    """The supervisor answers; a [WARN] when its worker forkserver could not import one of
    its preload modules (spawner.py): workers then start without it."""
    try:
        forkserver = client.call("sup.status", timeout_s=5)["supervisor"].get("forkserver")
    except KintError:
        forkserver = None
    missing = (forkserver or {}).get("missing_preload") or []
    if not missing:
        return check("supervisor reachable", True, "answering", "")
    return check("supervisor reachable", True,
                 "answering, but its worker forkserver could not import "
                 + "; ".join(missing),
                 f"reinstall kint in this environment (`pip install --force-reinstall "
                 f"{install_source()}`), then `kint supervisor stop`: the next command "
                 f"starts a new one",
                 warn=True)


@click.command("doctor")
@owner_option()
@json_option("Print the checks as JSON.")
@click.pass_obj
def doctor_cmd(obj: Ctx, owner: str | None, as_json: bool) -> None:
    """Named checks: Sibyl packages, python, PYTHONPATH, kint home (its mode), kint home
    placement, permissions, tenant (and where it came from), supervisor reachable; from the
    space's worker the sibyl store, store shared (when another KINT_HOME's worker has it
    open), chain settings (when one is refused), enrolment, data
    key, recovery file, state files, an interrupted push, disk space, a half-done pull,
    unanchored changes, the chain (when it is not the one the space was connected on), and
    on the chain rpc primary (its chain id), rpc secondary, the contract's code, the
    session key and the head against the mirror (v0.3.0's names where it has the check).
    RPC URLs show scheme, host and port only. Exit code 1 when any fails ([WARN] lines
    pass)."""
    check_owner(obj, owner)
    home = kint_home()
    checks = [*environment_checks(), _home(home), _placement(home), _permissions(home),
              _tenant(obj.tenant)]
    client = obj.client(autostart=False)
    reachable = client.ping(2.0)
    if reachable:
        checks.append(_reachable(client))
    else:
        from kint.supervisor.start_refusals import unanswering_supervisor

        silent = unanswering_supervisor(home)  # one runs (stopped, stuck): no start helps
        checks.append(check("supervisor reachable", False,
                            str(silent) if silent else f"no supervisor for {home}",
                            silent.hint if silent else "run `kint supervisor start`"))
    ref = spaces.resolve(obj.tenant, obj.db)
    problem = spaces.store_problem(ref.db)
    if problem is not None:  # never sent: its worker would fail at every start
        checks.append(check("sibyl store", False, f"{ref.db} {problem}", spaces.STORE_HINT))
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
