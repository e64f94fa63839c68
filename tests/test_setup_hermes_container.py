"""`kint setup hermes` and Hermes' container mode, with the real Hermes (hermes-agent in
.venv-hermes). A profile whose HERMES_HOME holds `.container-mode` (its NixOS module's
`container.enable` writes it) runs no command on the host: hermes-agent 0.19's `main()`
re-runs `hermes` inside the container through `docker exec ... HERMES_BIN <its arguments>`
(hermes_cli/main.py `_exec_in_container`), so the arguments setup gives Hermes on stdin
(hermes_run.py) would be on the container runtime's command line, which every user of the
machine reads. Setup refuses such a profile before any `hermes` runs.

Two parts cannot be had here and are stood in for, in the test's own files: this box is a
container itself (`/.dockerenv`), where Hermes never routes (it is inside already), so a
`sitecustomize` on PYTHONPATH tells Hermes' Python it is not (`hermes_constants`'
cached answer); and there is no docker, so a `docker` stand-in records its command line and
runs the `hermes` it is given as the container would, with HERMES_DEV=1 (Hermes' own switch
for "do not route again").
"""

from __future__ import annotations

import json

from harness_stand_ins import calls, stand_in
from real_clients import ROOT, client_or_skip, harness_env

from kint.harnesses import hermes_run

TOKEN = "tok-of-the-user-5d1e"
NOT_A_CONTAINER = """try:
    import hermes_constants
    hermes_constants._container_detected = False
except ImportError:  # a Python without Hermes (kint's own)
    pass
"""
# `docker inspect` finds the container; `docker exec [-i|-it] [-u USER] [-e K=V]... NAME
# HERMES_BIN ARGS...` runs HERMES_BIN ARGS with HERMES_DEV=1, here.
DOCKER = """
args = sys.argv[1:]
if args[0] == "inspect":
    sys.exit(print("ok"))
assert args[0] == "exec", args
i = 1
while args[i].startswith("-"):
    i += 2 if args[i] in ("-u", "-e") else 1
hermes, rest = args[i + 1], args[i + 2:]
os.execve(hermes, [hermes, *rest], {**os.environ, "HERMES_DEV": "1"})
"""


def container_mode_home(sandbox, tmp_path, hermes) -> tuple[dict[str, str], object]:
    """Hermes' root in container mode (its `.container-mode` naming the real `hermes` as
    the container's), the environment with the stand-ins, and the file."""
    folder = tmp_path / "not-a-container"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(NOT_A_CONTAINER)
    stand_in(tmp_path / "bin", "docker", DOCKER)
    root = sandbox.hermes_home
    root.mkdir(parents=True, exist_ok=True)
    marker = root / ".container-mode"
    marker.write_text(f"backend=docker\ncontainer_name=hermes-agent\nexec_user=hermes\n"
                      f"hermes_bin={hermes}\n")
    env = harness_env(sandbox, tmp_path, hermes=hermes)
    return {"PATH": f"{tmp_path / 'bin'}:{env['PATH']}", "PYTHONPATH": str(folder)}, marker


def test_a_profile_in_container_mode_is_refused_before_hermes_runs(sandbox, tmp_path):
    """No `docker exec` ever runs (it would carry the user's `--env` value on its command
    line), the profile fails naming `.container-mode`, and its config is not written."""
    hermes = client_or_skip(ROOT / ".venv-hermes" / "bin" / "hermes",
                            "hermes-agent (PyPI hermes-agent, in .venv-hermes)")
    env, marker = container_mode_home(sandbox, tmp_path, hermes)

    out = sandbox.kint("setup", "hermes", "--json", "--env", f"MY_TOOL_TOKEN={TOKEN}",
                       env=env, timeout=300)
    runs = calls(sandbox.home, "docker")
    assert TOKEN not in json.dumps(runs), f"the user's value on docker's command line: {runs}"
    assert runs == [], runs
    assert out.returncode == 1, out.stdout + out.stderr
    [report] = json.loads(out.stdout)["reports"]
    assert (report["target"], report["status"], report["code"]) == (
        "hermes[default]", "failed", "HARNESS_ERROR"), report
    assert report["lines"][0] == (
        f"hermes[default]: failed: Hermes runs profile default in container mode ({marker}, "
        "which its NixOS module's container.enable writes): it re-runs each `hermes` command "
        "in the container with its arguments on the container runtime's command line, where "
        "every user of this machine can read the values setup gives it [HARNESS_ERROR]")
    assert report["hint"] == ("run `kint setup hermes` inside that container, where Hermes "
                              "runs; nothing was changed")
    assert not (sandbox.hermes_home / "config.yaml").exists()


def test_container_mode_is_hermes_own_answer(sandbox, tmp_path, monkeypatch):
    """`container_mode` asks the real Hermes once the file is there: container mode, the
    file named; HERMES_DEV=1 (Hermes runs the command itself) not; no file, nothing asked."""
    hermes = client_or_skip(ROOT / ".venv-hermes" / "bin" / "hermes",
                            "hermes-agent (PyPI hermes-agent, in .venv-hermes)")
    env, marker = container_mode_home(sandbox, tmp_path, hermes)
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    monkeypatch.delenv("HERMES_DEV", raising=False)
    home = marker.parent
    assert hermes_run.container_mode(str(hermes), home, timeout=60) == marker
    monkeypatch.setenv("HERMES_DEV", "1")
    assert hermes_run.container_mode(str(hermes), home, timeout=60) is None
    monkeypatch.delenv("HERMES_DEV")
    marker.unlink()
    monkeypatch.setattr(hermes_run, "run_cli", None)  # nothing is run without the file
    assert hermes_run.container_mode(str(hermes), home, timeout=60) is None


# A `hermes` that is no Python script, as Hermes' NixOS module installs it (a makeWrapper
# shell script): setup cannot ask it, and applies Hermes' own exemptions itself. It would
# fail any command it were given, so a setup that runs it says so.
WRAPPER = "#!/bin/sh\necho \"hermes wrapper run: $*\" >&2\nexit 3\n"
# This box is a container itself (`/.dockerenv`), where Hermes never routes: kint's own
# Python, in the setup the test runs, is told it is not, through the module's constants
# (hermes_run.CONTAINER_FILES and the rest).
KINT_NOT_IN_A_CONTAINER = """try:
    from kint.harnesses import hermes_run
    hermes_run.CONTAINER_FILES, hermes_run.CONTAINER_MARKS = (), ()
except ImportError:
    pass
"""


def wrapper_home(sandbox, tmp_path) -> tuple[dict[str, str], object]:
    """Hermes' root in container mode with a shell `hermes` on PATH, and kint told it is
    not in a container; the environment for `kint setup`, and the file."""
    folder = tmp_path / "kint-not-in-a-container"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(KINT_NOT_IN_A_CONTAINER)
    bin_dir = tmp_path / "wrapper-bin"
    bin_dir.mkdir()
    (bin_dir / "hermes").write_text(WRAPPER)
    (bin_dir / "hermes").chmod(0o755)
    root = sandbox.hermes_home
    root.mkdir(parents=True, exist_ok=True)
    marker = root / ".container-mode"
    marker.write_text("backend=docker\ncontainer_name=hermes-agent\n")
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(folder),
            "HERMES_DEV": ""}, marker


def test_a_wrapper_hermes_gets_hermes_own_exemptions(tmp_path, monkeypatch):
    """A shell `hermes` with `.container-mode` beside it: container mode, unless HERMES_DEV
    is "1" or this is a container already (a file of `CONTAINER_FILES` there; the box's own
    `/.dockerenv` pointed elsewhere). Before, the file alone refused it, where Hermes would
    have run the command itself."""
    hermes = tmp_path / "hermes"
    hermes.write_text(WRAPPER)
    hermes.chmod(0o755)
    home = tmp_path / "hermes-home"
    home.mkdir()
    marker = home / ".container-mode"
    marker.write_text("backend=docker\n")
    inside = tmp_path / "dockerenv"
    monkeypatch.setattr(hermes_run, "CONTAINER_FILES", (str(inside),))
    monkeypatch.setattr(hermes_run, "CONTAINER_MARKS", ())
    monkeypatch.delenv(hermes_run.CONTAINER_ENV, raising=False)
    monkeypatch.delenv("HERMES_DEV", raising=False)
    assert hermes_run.container_mode(str(hermes), home, timeout=10) == marker
    monkeypatch.setenv("HERMES_DEV", "1")
    assert hermes_run.container_mode(str(hermes), home, timeout=10) is None
    monkeypatch.setenv("HERMES_DEV", "0")  # Hermes takes "1" alone
    assert hermes_run.container_mode(str(hermes), home, timeout=10) == marker
    inside.write_text("")
    assert hermes_run.container_mode(str(hermes), home, timeout=10) is None


def test_setup_all_skips_a_profile_in_container_mode(sandbox, tmp_path):
    """Under `kint setup all` Hermes was not named: a profile in container mode is
    `skipped` with the reason, exit 0, as a harness whose CLI is missing is; `kint setup
    hermes` fails it (exit 1). Either way no `hermes` runs. Before, `all` failed it."""
    env, marker = wrapper_home(sandbox, tmp_path)
    out = sandbox.kint("setup", "all", "--json", env=env, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "hermes wrapper run" not in out.stderr, out.stderr
    reports = {r["target"]: r for r in json.loads(out.stdout)["reports"]}
    report = reports["hermes[default]"]
    assert report["status"] == "skipped", report
    assert report["lines"] == [
        f"hermes[default]: Hermes runs profile default in container mode ({marker}, which "
        "its NixOS module's container.enable writes): it re-runs each `hermes` command in "
        "the container with its arguments on the container runtime's command line, where "
        "every user of this machine can read the values setup gives it; run `kint setup "
        "hermes` inside that container, where Hermes runs; nothing was changed, skipped"]

    out = sandbox.kint("setup", "hermes", "--json", env=env, timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    [report] = json.loads(out.stdout)["reports"]
    assert (report["status"], report["code"]) == ("failed", "HARNESS_ERROR"), report
    assert "hermes wrapper run" not in out.stderr, out.stderr
