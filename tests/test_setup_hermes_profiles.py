"""`kint setup hermes` sets Hermes' profiles up side by side (kint/harnesses/hermes.py,
PROFILES_AT_ONCE): each profile is its own config file and store, and most of its time is
Hermes' CLI starting. Its report keeps the profiles' order whichever ends first, and a
profile that fails is named in its own lines without stopping or hiding the others.

A stand-in `hermes` (tests/harness_stand_ins.py; hermes-agent 0.19's answers, as in
test_setup_failures.py, one state file a profile) shows that the profiles' `mcp add` overlapped
without timing anything: each waits, up to a bound, for another profile's `mcp add` to have begun,
and says whether one had. One after another, the first would wait out its bound alone.
Within a profile, its first two reads (kint's entry, the memory provider) overlap the same
way, and a profile whose read fails is named with the others still set up.
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




# In each profile, its first read of kint's entry and its read of the memory provider wait,
# up to the bound, for the other to have begun, and say whether it had: one after another,
# the first would wait out its bound alone. Hermes' answer for the `broken` profile's entry
# is the one for a config.yaml it cannot parse, given once both its reads have begun.
READS_SCRIPT = hermes_script(
    'home / f"hermes-{profile}.json"',
    prelude=f"""\
home = Path(os.environ["HOME"])
profile = sys.argv[2]
if sys.argv[3:6] == ["config", "get", "--json"] and not (home / f"met-{{profile}}").exists():
    mine = "entry" if sys.argv[6] == "mcp_servers.kint" else "provider"
    other = home / f"reading-{{'provider' if mine == 'entry' else 'entry'}}-{{profile}}"
    (home / f"reading-{{mine}}-{{profile}}").touch()
    deadline = time.monotonic() + {MEET_BOUND_S}
    while not other.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    (home / f"met-{{profile}}").write_text(str(other.exists()))
    if profile == "broken" and mine == "entry":
        sys.exit(print("Failed to parse config.yaml: bad indentation. Falling back") or 1)
""")


def test_a_profiles_entry_and_memory_provider_are_read_at_once(sandbox, tmp_path):
    stand_in(tmp_path / "bin", "hermes", READS_SCRIPT)
    root = sandbox.hermes_home
    for profile in ("alpha", "broken"):
        (root / "profiles" / profile).mkdir(parents=True)
    out = sandbox.kint("setup", "hermes", env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    heads = [line for line in out.stdout.splitlines() if not line.startswith("  ")]
    assert [h.split(":")[0] for h in heads] == [
        "hermes[default]", "hermes[alpha]", "hermes[broken]"], out.stdout
    assert heads[0].startswith("hermes[default]: registered kint (store "), out.stdout
    assert heads[1].startswith("hermes[alpha]: registered kint (store "), out.stdout
    assert heads[2].startswith("hermes[broken]: failed: Hermes cannot parse the config of "
                               "profile broken: config.yaml: bad indentation"), out.stdout
    assert out.returncode != 0, out.stdout + out.stderr
    assert not (sandbox.home / "hermes-broken.json").exists()
    met = {p: (sandbox.home / f"met-{p}").read_text() for p in ("default", "alpha", "broken")}
    assert set(met.values()) == {"True"}, met
