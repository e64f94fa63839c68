"""`kint setup hermes` sets Hermes' profiles up side by side (kint/harnesses/hermes.py,
PROFILES_AT_ONCE): each profile is its own config file and store, and most of its time is
Hermes' CLI starting. Its report keeps the profiles' order whichever ends first, and a
profile that fails is named in its own lines without stopping or hiding the others.

A stand-in `hermes` (tests/harness_stand_ins.py; hermes-agent 0.19's answers, as in
test_setup_failures.py, one state file a profile) shows that the profiles' `mcp add` overlapped
without timing anything: each waits, up to a bound, for another profile's `mcp add` to have begun,
and says whether one had. One after another, the first would wait out its bound alone.
"""

from __future__ import annotations

import json

from harness_stand_ins import hermes_script, stand_in

PROFILES = ("alpha", "beta", "broken")
MEET_BOUND_S = 30

HERMES_SCRIPT = hermes_script(
    'home / f"hermes-{profile}.json"',
    prelude='home = Path(os.environ["HOME"])\nprofile = sys.argv[2]',
    before_add=f"""\
(home / f"adding-{{profile}}").touch()
deadline = time.monotonic() + {MEET_BOUND_S}
while (len(list(home.glob("adding-*"))) < 2 and time.monotonic() < deadline):
    time.sleep(0.05)
(home / f"met-{{profile}}").write_text(str(len(list(home.glob("adding-*"))) >= 2))
if profile == "broken":
    sys.exit(print("boom: this profile's config is read-only") or 1)
""")


def test_profiles_are_set_up_side_by_side_in_a_stable_order_and_one_failing_hides_none(
        sandbox, tmp_path):
    stand_in(tmp_path / "bin", "hermes", HERMES_SCRIPT)
    root = sandbox.hermes_home
    for profile in PROFILES:
        (root / "profiles" / profile).mkdir(parents=True)
    out = sandbox.kint("setup", "hermes", env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    lines = out.stdout.splitlines()
    heads = [line for line in lines if not line.startswith("  ")]
    assert [h.split(":")[0] for h in heads] == [
        "hermes[default]", "hermes[alpha]", "hermes[beta]", "hermes[broken]"], out.stdout
    for profile in ("default", "alpha", "beta"):
        assert any(h.startswith(f"hermes[{profile}]: registered kint (store ")
                   for h in heads), out.stdout
    assert "boom: this profile's config is read-only" in heads[-1], out.stdout
    assert out.returncode != 0, out.stdout + out.stderr
    saved = json.loads((sandbox.home / "hermes-alpha.json").read_text())
    assert saved["mcp_servers"]["kint"]["env"]["SIBYL_MEMORY_DB"] == str(
        root / "profiles" / "alpha" / "sibyl" / "profiles" / "alpha" / "memory.db")
    assert not (sandbox.home / "hermes-broken.json").exists()
    met = {p: (sandbox.home / f"met-{p}").read_text()
           for p in ("default", *PROFILES)}
    assert set(met.values()) == {"True"}, met
    # The plugin went into each profile that registered, from one look at Hermes' Python.
    for folder in (root, root / "profiles" / "alpha", root / "profiles" / "beta"):
        assert (folder / "plugins").is_dir(), folder


