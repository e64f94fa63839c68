"""kint inside real Hermes (issue 13, item 3): hermes-agent from PyPI (pinned, in
.venv-hermes, where `make hermes` installs kint beside it), two profiles made by Hermes' own
CLI, `kint setup hermes --hermes-profile` installing kint's memory-provider plugin into each
and pointing each MCP entry at the store that plugin writes, and Hermes' own plugin loader
and memory hooks driven without a model (tests/support/hermes_session.py, run by Hermes'
Python):

- each profile's store lands where Sibyl's Hermes adapter puts it under `hermes -p <p>`
  (`<root>/profiles/<p>/sibyl/profiles/<p>/memory.db`), which is the store setup wrote into
  that profile's MCP entry and the store `kint supervisor discover` finds;
- two sessions give two spaces (`<tenant>@hermes:<p>`) and two workers;
- `kint --db <a profile's store>` names that profile's space from a shell whose cwd and
  HERMES_HOME are elsewhere;
- a session that rewrote an anchored row through Hermes' tool hook ends with an exit push
  that is not held, and lands.

Then `kint setup hermes` for every profile, as tests/test_setup_clients.py checks the other
clients (the same machine, so Hermes' CLI and setup run once for both checks): the default
profile, which selects no memory provider, is registered on its own store and gets the
plugin with its provider left alone; the two others are left as they were; Hermes reads
each entry back, and `hermes -p <p> mcp test kint` loads kint-server through Hermes'
bare-environment launcher under the machine's KINT_HOME, with no second supervisor; a
second run changes no byte and makes no backup.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from chain_machines import kjson, new_machine, ok
from conftest import KINT, SUPPORT
from real_clients import (ROOT, SERVER, client_or_skip, harness_env, kint_setup,
                          no_second_supervisor)

from kint.spaces import space_id

PROFILES = ("alpha", "beta")
PYTHON = ROOT / ".venv-hermes" / "bin" / "python"
WAIT = {"timeout": 120, "interval": 0.5}


class HermesSession:
    """One profile's session in Hermes' own Python (see tests/support/hermes_session.py).
    Started without waiting for it (`started` waits for its first line, the provider it
    loaded), so that both profiles' sessions pay Hermes' start and imports at once."""

    def __init__(self, env: dict[str, str], profile: str, log: Path) -> None:
        self.stderr = open(log, "ab")
        self.proc = subprocess.Popen([str(PYTHON), str(SUPPORT / "hermes_session.py"), profile],
                                     env=env, cwd=log.parent, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.info: dict = {}

    def started(self) -> HermesSession:
        self.info = self._read()
        return self

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the Hermes session exited ({self.proc.wait(30)}): see {self.stderr.name}"
        answer = json.loads(line)
        assert "error" not in answer, answer
        return answer

    def send(self, op: str, **args: object) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def closing(self) -> None:
        """The session told to end (Hermes' shutdown of its memory provider), its answer
        read by `closed`: both profiles' sessions end at once, as they were started."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": "close"}) + "\n")
        self.proc.stdin.flush()

    def closed(self) -> None:
        assert self._read() == {"closed": True}
        assert self.proc.wait(120) == 0
        self.stderr.close()


def test_two_hermes_profiles_load_kints_plugin_and_end_with_an_exit_push(
        tmp_path_factory, chain_home):
    hermes = client_or_skip(ROOT / ".venv-hermes" / "bin" / "hermes",
                            "hermes-agent (PyPI hermes-agent, in .venv-hermes)")
    work = tmp_path_factory.mktemp("hermes-agent")
    sb = new_machine(work / "machine", chain_home)
    try:
        _run(sb, hermes, work)
    finally:
        sb.shutdown()


def _run(sb, hermes: Path, work: Path) -> None:
    env = harness_env(sb, work, hermes=hermes)
    root = sb.hermes_home
    # Both profiles at once: each create writes its own folder under profiles/ (a new,
    # empty profile: no clone of another's files, no alias, no skills).
    for done in _in_parallel([[str(hermes), "profile", "create", p, "--no-alias", "--no-skills"]
                              for p in PROFILES], env, work):
        ok(done)
    # What Sibyl's own Hermes setup leaves: Sibyl's adapter as the memory provider (each
    # profile's own config.yaml, so both at once).
    for done in _in_parallel([[str(hermes), "-p", p, "config", "set", "memory.provider",
                               "sibyl"] for p in PROFILES], env, work):
        ok(done)
    assert not (root / "profiles" / "alpha" / "plugins").exists()

    stores = {p: root / "profiles" / p / "sibyl" / "profiles" / p / "memory.db"
              for p in PROFILES}
    out = kint_setup(sb, env, "hermes", *[a for p in PROFILES for a in ("--hermes-profile", p)])
    lines = out.stdout.splitlines()
    for p in PROFILES:
        plugin = root / "profiles" / p / "plugins" / "kint-sibyl"
        assert f"hermes[{p}]: registered kint (store {stores[p]})" in lines, out.stdout
        assert f"  hermes[{p}]: plugin kint-sibyl installed in {plugin}" in lines, out.stdout
        assert f"  hermes[{p}]: memory provider sibyl -> kint-sibyl" in lines, out.stdout
    # Each entry as Hermes reads it (its store, and no KINT_SPACE): `_every_profile`, once
    # the run for every profile has left these two as they are.

    # Hermes' process environment: the user's shell (KINT_HOME included), the watcher's
    # quiet period long, so only the exit pushes anchor.
    session_env = {**sb.env, "KINT_QUIET_SECONDS": "3600"}
    labels = {p: f"{sb.tenant}@hermes:{p}" for p in PROFILES}
    sessions = _started({p: HermesSession(session_env, p, work / f"hermes-{p}-1.log")
                         for p in PROFILES})
    for p, session in sessions.items():
        assert session.info == {
            "provider": "kint-sibyl", "hermes_home": str(root / "profiles" / p),
            "identity": p, "store": str(stores[p]),
            "class": "kint.hermes_plugin.KintSibylAdapter",
            "plugin": str(root / "profiles" / p / "plugins" / "kint-sibyl" / "__init__.py")
        }, session.info

    # Two spaces, two workers, each on its profile's store.
    status = kjson(sb, "supervisor", "status")
    rows = {r["label"]: r for r in status["spaces"]}
    assert set(rows) == set(labels.values())
    assert {rows[labels[p]]["store"] for p in PROFILES} == {str(s) for s in stores.values()}
    assert len({rows[label]["pid"] for label in labels.values()}) == 2
    found = {r["store"]: r["label"] for r in kjson(sb, "supervisor", "discover")["stores"]}
    assert found == {str(stores[p]): labels[p] for p in PROFILES}

    # `kint --db <store>` from other shells: another cwd, and HERMES_HOME the other
    # profile's folder, or unset. Both at once (two spaces, two workers).
    shells = {"alpha": {"HERMES_HOME": str(root / "profiles" / "beta")}, "beta": {}}
    connects = {p: subprocess.Popen(
        [KINT, "--db", str(stores[p]), "connect", "--dev", "--json"],
        env={k: v for k, v in sb.env.items() if k != "HERMES_HOME"} | shells[p], cwd=work,
        text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        for p in PROFILES}
    for p, proc in connects.items():
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stdout + stderr
        assert json.loads(stdout)["space"] == space_id(labels[p])[:16]

    # First sessions: a tool call and a turn, then the end of the session (both at once).
    for p, session in sessions.items():
        assert session.send("remember", category="rules", name="release-gate",
                            body={"rule": f"{p}: never ship on a Friday"})["ok"] is True
        assert session.send("turn", user="what is the release rule?",
                            assistant="never ship on a Friday")["ok"] is True
        session.closing()
    _closed(sessions)
    heads = {p: _landed(sb, stores[p], 0) for p in PROFILES}

    # Second sessions rewrite the anchored rule through Hermes' tool hook: noted by kint's
    # plugin, so the exit push is not held (Sibyl's adapter alone would hold it). The two
    # profiles' sessions run side by side, as the first ones did.
    sessions = _started({p: HermesSession(session_env, p, work / f"hermes-{p}-2.log")
                         for p in PROFILES})
    for p, session in sessions.items():
        assert session.send("remember", category="rules", name="release-gate",
                            body={"rule": f"{p}: never ship on a Friday or a Monday"})["ok"]
        session.closing()
    _closed(sessions)
    for p in PROFILES:
        _landed(sb, stores[p], heads[p])
    log = (sb.kint_home / "supervisor.log").read_text(errors="replace")
    assert "exit push not made" not in log
    for p in PROFILES:
        assert log.count(f"space {space_id(labels[p])[:16]}: exit push: ") == 2, log[-3000:]
    _every_profile(sb, hermes, env, work, stores)


def _started(sessions: dict[str, HermesSession]) -> dict[str, HermesSession]:
    """Each session once it has loaded its provider (all of them started already)."""
    return {p: session.started() for p, session in sessions.items()}


def _closed(sessions: dict[str, HermesSession]) -> None:
    """Each session, told to end already (`closing`), ended."""
    for session in sessions.values():
        session.closed()


def _in_parallel(argvs: list[list[str]], env: dict[str, str], cwd: Path
                 ) -> list[subprocess.CompletedProcess[str]]:
    """Hermes' CLI run for each argv at once (reads of separate profiles), each as `run`
    runs it: its start and imports are most of what each costs."""
    procs = [subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for argv in argvs]
    done = []
    for argv, proc in zip(argvs, procs):
        stdout, stderr = proc.communicate(timeout=180)
        done.append(subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr))
    return done


def _every_profile(sb, hermes: Path, env: dict[str, str], work: Path,
                   stores: dict[str, Path]) -> None:
    """`kint setup hermes` with no profile named: every profile. The default one is new to
    it (it selects no memory provider: the plugin goes in, the provider is left alone);
    alpha and beta, switched already, are left as they were."""
    root = sb.hermes_home
    stores = {"default": root / "sibyl" / "memory.db", **stores}
    configs = {"default": root / "config.yaml",
               **{p: root / "profiles" / p / "config.yaml" for p in PROFILES}}
    before = {p: configs[p].read_bytes() for p in PROFILES}
    baks = sorted(root.rglob("config.yaml.bak-*"))
    out = kint_setup(sb, env, "hermes")
    assert out.stdout.splitlines() == [
        f"hermes[default]: registered kint (store {stores['default']})",
        f"  hermes[default]: plugin kint-sibyl installed in {root / 'plugins' / 'kint-sibyl'}",
        *(f"hermes[{p}]: kint already registered (store {stores[p]}), nothing changed"
          for p in PROFILES)], out.stdout
    # This second run for alpha and beta changed no byte of theirs and backed none up (a
    # new backup, if any, is the default profile's, whose config it changed).
    assert {p: configs[p].read_bytes() for p in PROFILES} == before
    new_baks = set(root.rglob("config.yaml.bak-*")) - set(baks)
    assert [b for b in new_baks if b.parent != root] == [], new_baks

    tenant = sb.tenant
    # Hermes' reading of each entry, and its list and test of kint in alpha and beta: all
    # reads, so one batch of Hermes commands at once.
    reads = [[str(hermes), "-p", p, "config", "get", "--json", "mcp_servers.kint"]
             for p in stores]
    done = _in_parallel(reads + [[str(hermes), "-p", p, "mcp", what, *rest] for p in PROFILES
                                 for what, rest in (("list", []), ("test", ["kint"]))],
                        env, work)
    read, checked = done[:len(reads)], done[len(reads):]
    for (profile, store), got in zip(stores.items(), read):
        assert json.loads(ok(got).stdout) == {
            "command": SERVER, "enabled": True,
            "env": {"KINT_HOME": str(sb.kint_home), "SIBYL_MEMORY_DB": str(store),
                    "KINT_TENANT": tenant}}, (profile, got.stdout)
    for listed, tested in zip(checked[::2], checked[1::2]):
        assert re.search(r"^\s+kint\s+.*enabled", listed.stdout, re.M), listed.stdout
        assert "✓ Connected" in tested.stdout, tested.stdout + tested.stderr
        assert "✓ Tools discovered: 14" in tested.stdout, tested.stdout

    # Each profile's server ran under the machine's KINT_HOME (its log is there), as its
    # own space on its own store.
    log = (sb.kint_home / "kint.log").read_text()
    for profile in PROFILES:
        label = f"{tenant}@hermes:{profile}"
        assert (f"kint-server: serving Sibyl's tools plus kint's on stdio (tenant {tenant}, "
                f"db {stores[profile]}); space {space_id(label)[:16]} ({label})") in log
    no_second_supervisor(sb)

    # The default profile's second run, named alone: only it is looked at, and nothing of
    # any profile changes.
    before_all = {p: c.read_bytes() for p, c in configs.items()}
    baks = sorted(root.rglob("config.yaml.bak-*"))
    again = kint_setup(sb, env, "hermes", "--hermes-profile", "default")
    assert again.stdout.splitlines() == [
        f"hermes[default]: kint already registered (store {stores['default']}), nothing "
        "changed"]
    assert {p: c.read_bytes() for p, c in configs.items()} == before_all
    assert sorted(root.rglob("config.yaml.bak-*")) == baks


def _landed(sb, store: Path, before: int) -> int:
    """Wait for the store's exit push on chain: head past `before`, nothing unanchored. Each
    look is the status op `kint --db <store> status --json` sends, asked from this process
    (a command per look cost its start; `kint --db` is checked above)."""
    def pushed():
        status = sb.call("status", store, args={"chain": True}, timeout_s=30)
        return status if status["head"]["seq"] > before and status["unanchored"] == 0 else None

    return sb.wait_for(pushed, what=f"the exit push of {store}", **WAIT)["head"]["seq"]
