"""`kint doctor`'s checks of v0.3.0's list (09-cli.md, "kint doctor") on a connected devchain
machine: the enrolment, the recovery file, the primary RPC's chain id, the secondary RPC,
the contract's code, the head against the mirror and the unanchored changes; each passing,
warning and failing for real (a real anvil, supervisors, workers and Sibyl stores; the
endpoints changed through the space's config.toml, as a user would).

One story: A connects and anchors (the module's fixture), B restores from A's recovery
code (a fixture too); each test leaves A's memory anchored and its config as it found them,
so that it runs alone or in any order."""

from __future__ import annotations

import json
import subprocess

import pytest

from chain_machines import RULE_1, connect_with_code, kjson, ok, recovery_code
from conftest import Sandbox, sibyl_client
from kint.chain.config import BASE_CHAIN_ID, devchain_record
from kint.commands.doctor import RECOVERY_HINT
from machines_together import new_machines, side_by_side
from rpc_proxy import RpcProxy, closed_port_url

NOWHERE = "0x000000000000000000000000000000000000dEaD"  # no code on any devchain
# The session key's row on a machine without one: a warning, whatever the chain does.
NO_SESSION_KEY = {"name": "session key", "ok": True, "warn": True,
                  "detail": "no session key on this machine",
                  "hint": "run `kint session-key create`, then fund and authorize it, before "
                          "pushing; pulls and reads need none"}


@pytest.fixture(scope="module")
def story(tmp_path_factory, chain_home):
    """A and B of the story, and the last test's machine of its own ("moves"), their
    supervisors started together (machines_together.py)."""
    a, b, moves = new_machines([tmp_path_factory.mktemp("doctor-a"),
                                tmp_path_factory.mktemp("doctor-b"),
                                tmp_path_factory.mktemp("doctor-moves")], chain_home)
    devchain = json.loads(devchain_record(chain_home).read_text())
    box = {"a": a, "b": b, "moves": moves, "devchain": devchain}
    try:
        client = sibyl_client(a.sibyl_db, a.tenant)
        client.set_entity("rules", "release-gate", {"rule": RULE_1})
        client.set_entity("rules", "deploy-window", {"rule": "deploys only before 3pm"})
        client.storage.close()
        connected = kjson(a, "connect", "--dev")
        box.update(owner=connected["owner"], space16=connected["space"])
        box["pushed"] = kjson(a, "push")["epochs"][-1]
        yield box
    finally:
        a.shutdown()
        b.shutdown()
        moves.shutdown()


@pytest.fixture(scope="module")
def b_connected(story):
    """Machine B connected with A's recovery code: the machine that restores and reads
    (each of its tests pulls first). A fixture, so that each test of B runs alone or in
    any order."""
    b = story["b"]
    connect_with_code(b, story["owner"], recovery_code(story["a"], story["space16"]))
    return b


def checks_of(sb: Sandbox, **env: str) -> dict[str, dict]:
    """The --json run's checks by name, its exit code checked against them: where a test
    reads only the checks (a text run would cost a command and be read by nobody)."""
    out = sb.kint("doctor", "--json", env=env or None)
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    assert (out.returncode == 1) == any(not c["ok"] for c in checks.values()), out.stdout
    return checks


def doctor(sb: Sandbox, **env: str) -> tuple[subprocess.CompletedProcess[str], dict[str, dict]]:
    """The text run's output, and the --json run's checks by name (the same checks). The
    two run at once: doctor reads and writes nothing either's answer depends on, and each
    is mostly its interpreter's start and imports (~0.6 s of one core)."""
    text, checks = side_by_side(lambda: sb.kint("doctor", env=env or None),
                                lambda: checks_of(sb, **env))
    return text, checks


def failing(sb: Sandbox) -> tuple[list[str], dict[str, dict]]:
    """doctor's lines and checks, where one check fails (exit 1)."""
    text, checks = doctor(sb)
    assert text.returncode == 1, text.stdout
    return text.stdout.splitlines(), checks


def space_config(sb: Sandbox, body: str, *, top: str = "") -> None:
    """config.toml with `top` at the top level and `body` in this space's table (the
    worker reads it again at the next request)."""
    path = sb.kint_home / "config.toml"
    table = f'[spaces."{sb.label(sb.sibyl_db)}"]\n' if body else ""
    path.write_text(f"{top}{table}{body}")
    path.chmod(0o600)


def clear_config(sb: Sandbox) -> None:
    (sb.kint_home / "config.toml").unlink(missing_ok=True)


def test_in_step_every_new_line_passes(story):
    a, devchain, space16 = story["a"], story["devchain"], story["space16"]
    text, checks = doctor(a)
    assert text.returncode == 0, text.stdout
    lines = text.stdout.splitlines()
    recovery = a.kint_home / f"RECOVERY-{space16}.txt"
    seq, block = story["pushed"]["seq"], story["pushed"]["block"]  # 1, alone or first
    expected = [
        f"[ok  ] enrolment: owner {story['owner']} (eoa account), space {space16}",
        f"[ok  ] recovery file: {recovery}; keep a copy off this machine",
        "[ok  ] unanchored changes: none",
        f"[ok  ] rpc primary: {devchain['rpc_url']}: chain id {devchain['chain_id']} "
        f"(the devchain)",
        "[ok  ] rpc secondary: not asked on the devchain: a pull reads its one endpoint",
        f"[ok  ] head: this machine epoch {seq} at block {block}; chain epoch {seq} at block "
        f"{block}; in step",
    ]
    for line in expected:
        assert line in lines, (line, lines)
    code = checks["contract"]
    assert code["ok"] and not code.get("warn"), code
    assert code["detail"].startswith(f"{devchain['anchor']}: ") and code["detail"].endswith(
        " bytes of code, the EpochAnchor kint ships"), code
    for name in ("head", "unanchored changes", "rpc secondary"):
        assert not checks[name].get("warn") and checks[name]["hint"] == "", checks[name]


def test_unanchored_rows_warn_until_pushed(story):
    a = story["a"]
    client = sibyl_client(a.sibyl_db, a.tenant)
    client.set_entity("rules", "freeze", {"rule": "no deploys in the freeze week"})
    client.set_entity("rules", "release-gate", {"rule": RULE_1 + "; and a changelog"})
    assert client.delete_entity("rules", "deploy-window")
    client.storage.close()
    text, checks = doctor(a)
    assert text.returncode == 0, text.stdout  # a warning does not fail
    lines = text.stdout.splitlines()
    at = lines.index("[WARN] unanchored changes: 2 changed, 1 deleted since the last anchored "
                     "epoch: push")
    assert lines[at + 1] == ("       hint: run `kint push` (kint-server's watcher pushes them "
                             "on its own)")
    assert checks["unanchored changes"]["warn"] is True
    assert kjson(a, "status")["unanchored"] == 3  # the same diff status counts

    story["pushed"] = kjson(a, "push")["epochs"][-1]
    checks = checks_of(a)
    assert checks["unanchored changes"] == {"name": "unanchored changes", "ok": True,
                                            "detail": "none", "hint": ""}


def test_a_machine_behind_the_chain_is_not_in_step_until_it_pulls(story, b_connected):
    a, b = story["a"], b_connected
    ok(b.kint("pull"))
    checks = checks_of(b)
    assert checks["head"]["ok"] and not checks["head"].get("warn"), checks["head"]
    # B did not create the vault: its recovery file is not its to keep.
    assert checks["recovery file"] == {
        "name": "recovery file", "ok": True, "hint": "",
        "detail": "not kept here: another machine created the vault"}
    behind = story["pushed"]

    client = sibyl_client(a.sibyl_db, a.tenant)
    client.set_entity("rules", "rollback", {"rule": "every deploy has a rollback plan"})
    client.storage.close()
    story["pushed"] = kjson(a, "push")["epochs"][-1]
    text, checks = doctor(b)  # (B's session key is not authorized: that check warns)
    lines = text.stdout.splitlines()
    head = story["pushed"]
    at = lines.index(f"[WARN] head: this machine epoch {behind['seq']} at block "
                     f"{behind['block']}; chain epoch {head['seq']} at block {head['block']}; "
                     f"NOT in step: pull")
    assert lines[at + 1].startswith("       hint: run `kint pull`"), lines[at + 1]
    assert checks["unanchored changes"]["detail"] == "none"  # behind is not changed here
    assert kjson(b, "status")["in_step"] is False  # status says the same

    ok(b.kint("pull"))
    checks = checks_of(b)
    assert checks["head"]["detail"].endswith("; in step"), checks["head"]


def test_a_machine_without_a_session_key_restores_and_its_doctor_warns(b_connected):
    """No session key on this machine (removed, so that it can never append): a warning,
    exit 0, as a key not authorized or funded is (02-quickstart.md: doctor warns), since
    it stops writes only; the restore works without it. It failed, exit 1, for a machine
    that does all it is kept for."""
    b = b_connected
    key = b.kint_home / "session.key"
    aside = key.with_name("session.key.aside")
    key.rename(aside)
    try:
        ok(b.kint("pull"))
        text, checks = doctor(b)
        assert checks["session key"] == NO_SESSION_KEY, checks["session key"]
        assert "[WARN] session key: no session key on this machine" in text.stdout.splitlines()
        assert text.returncode == 0, text.stdout
    finally:
        aside.rename(key)


def test_the_recovery_file_of_the_machine_that_created_the_vault(story):
    a = story["a"]
    path = a.kint_home / f"RECOVERY-{story['space16']}.txt"
    path.chmod(0o644)
    try:
        # Open to others: reported once, by the permissions check (whose rule a supervisor
        # start mends by, and which says the start leaves this file as it is), with the
        # rekey hint; the recovery file check is about the file being there.
        checks = checks_of(a)
        assert not all(c["ok"] for c in checks.values()), checks  # doctor fails (exit 1)
        assert checks["permissions"]["detail"] == f"left as they are on purpose: {path} 0o644"
        assert checks["permissions"]["hint"] == RECOVERY_HINT
        assert checks["recovery file"]["ok"], checks["recovery file"]
    finally:
        path.chmod(0o600)
    aside = path.with_name(path.name + ".aside")
    path.rename(aside)
    try:
        lines, checks = failing(a)
        assert (f"[FAIL] recovery file: this machine created the vault and {path} is missing "
                f"or empty: push refuses until it is there") in lines
        assert checks["recovery file"]["hint"].startswith("run `kint recovery-code`")
        assert checks["data key"]["ok"], checks["data key"]  # its own check, not the key's
    finally:
        aside.rename(path)
    assert checks_of(a)["recovery file"]["ok"]


def test_a_wrong_contract_address_fails(story):
    a = story["a"]
    space_config(a, f'contract = "{NOWHERE}"\n')
    try:
        lines, checks = failing(a)
        assert (f"[FAIL] contract: no code at {NOWHERE} on chain "
                f"{story['devchain']['chain_id']}: wrong address or wrong chain") in lines, lines
        assert checks["rpc primary"]["ok"], checks["rpc primary"]  # the endpoint is fine
        # The contract and the endpoint named where this space's are set (its config
        # table, its own endpoints), where it said KINT_CONTRACT and KINT_RPC_URL.
        hint = checks["contract"]["hint"]
        assert hint.startswith("check the contract (KINT_CONTRACT: `contract` in "), hint
        assert "KINT_RPC_URL" not in hint and "endpoint (" in hint, hint
        assert checks["head"] == {"name": "head", "ok": False,
                                  "detail": f"not read: there is no contract at {NOWHERE}",
                                  "hint": "see the contract check"}
    finally:
        clear_config(a)
    assert checks_of(a)["contract"]["ok"]


def test_other_code_at_the_address_warns_on_the_devchain_and_is_said_on_base(story):
    """The devchain runs the EpochAnchor kint ships, so other code there is another
    contract (a warning); Base runs v0.3.0's own build, whose bytes kint does not ship, so
    other code there is only said."""
    from kint.chain.devchain import deploy_test_smart_account

    a, devchain = story["a"], story["devchain"]
    other = deploy_test_smart_account(devchain["rpc_url"], story["owner"])
    space_config(a, f'contract = "{other}"\n')
    try:
        code = checks_of(a)["contract"]
        assert code["ok"] and code["warn"], code
        assert code["detail"].startswith(f"{other}: ") and code["detail"].endswith(
            " bytes of code that are not the EpochAnchor kint ships"), code
        with RpcProxy(devchain["rpc_url"]) as proxy:  # off the devchain: Base's settings
            space_config(a, "", top=f'rpc_url = "{proxy.url}"\nrpc_url_2 = "{proxy.url}"\n'
                         f'contract = "{other}"\n')
            code = checks_of(a)["contract"]
            assert code["ok"] and not code.get("warn"), code
            assert code["detail"].endswith(" bytes of code, not kint's own build of the "
                                           "interface (expected on Base: kint v0.3.0 "
                                           "deployed its own)"), code
    finally:
        clear_config(a)


def test_an_endpoint_of_another_chain_and_the_same_endpoint_twice(story):
    """Off the devchain (KINT_RPC_URL names another endpoint than the devchain's own), the
    space is configured for Base, chain 8453: an endpoint answering 31337 fails the chain id
    check; a secondary that is the primary again warns, and one on another chain fails."""
    a, devchain = story["a"], story["devchain"]
    with RpcProxy(devchain["rpc_url"]) as proxy:
        contract = f'contract = "{devchain["anchor"]}"\n'
        space_config(a, "", top=f'rpc_url = "{proxy.url}"\nrpc_url_2 = "{proxy.url}/"\n'
                     f"{contract}")
        try:
            lines, checks = failing(a)
            # kint.chain.chain_id's words, as authorize and a cold-start pull say it
            assert (f"[FAIL] rpc primary: {proxy.url} (KINT_RPC_URL) answers for chain "
                    f"{devchain['chain_id']}, not 8453, the chain this machine signs for"
                    ) in lines, lines
            assert checks["rpc primary"]["hint"].startswith(
                "point KINT_RPC_URL at an endpoint of chain 8453; for a local devchain, copy "
                "its record"), checks["rpc primary"]
            at = lines.index(f"[WARN] rpc secondary: {proxy.url} (SAME as primary: no second "
                             f"opinion on a cold start): a cold-start pull would refuse "
                             f"without one")  # v0.3.0's words (10-configuration.md)
            assert lines[at + 1].startswith("       hint: set KINT_RPC_URL_2 to another "
                                            "operator's endpoint"), lines[at + 1]
            assert checks["rpc secondary"]["ok"] and checks["rpc secondary"]["warn"]
            # Base's contract is v0.3.0's deployment: code that is not kint's own build is
            # said, not failed; here it is kint's build, so it is said to match.
            assert checks["contract"]["ok"], checks["contract"]

            space_config(a, "", top=f'rpc_url = "{proxy.url}"\nrpc_url_2 = '
                         f'"{devchain["rpc_url"]}"\n{contract}')
            checks = checks_of(a)
            assert checks["rpc secondary"] == {
                "name": "rpc secondary", "ok": False,
                "detail": f"{devchain['rpc_url']} (KINT_RPC_URL_2) answers for chain "
                          f"{devchain['chain_id']}, not 8453, the chain this machine signs for",
                "hint": "point KINT_RPC_URL_2 at an endpoint of chain 8453; for a local "
                        "devchain, copy its record ($KINT_HOME/devchain/devchain.json) to "
                        "this machine instead"}

            space_config(a, "", top=f'rpc_url = "{proxy.url}"\nrpc_url_2 = '
                         f'"http://127.0.0.1:1"\nallow_single_rpc = true\n{contract}')
            checks = checks_of(a)
            second = checks["rpc secondary"]
            assert second["ok"] and second["warn"], second
            assert second["detail"].startswith("http://127.0.0.1:1: reading the chain id: ")
            assert second["detail"].endswith("(KINT_ALLOW_SINGLE_RPC=1: a cold-start pull "
                                             "accepts the primary alone)"), second
        finally:
            clear_config(a)


def test_a_space_connected_on_the_devchain_read_off_it_names_both_chains(story):
    """A connected on the devchain; the machine's KINT_RPC_URL then names another endpoint,
    so kint reads Base (as after `kint devchain stop`). The space's epochs, mirror and
    watermark are the devchain's: doctor fails a `chain` check naming both chains and the
    way back, status shows why it has no head, and verify, push, pull, compact and
    recovery-code refuse in those words, where they said only that the chain did not answer
    or was not in step, or (pull) refused the endpoint as stale."""
    a, devchain = story["a"], story["devchain"]
    head = kjson(a, "status")["chain_head"]
    said = (f"this space was connected on the devchain (chain id 31337), where this machine "
            f"has anchored or pulled its epochs up to {head['seq']}; kint now reads Base "
            f"(chain id 8453)")
    way_back = "read the devchain again: `kint devchain start`"
    with RpcProxy(devchain["rpc_url"]) as proxy:
        space_config(a, "", top=f'rpc_url = "{proxy.url}"\nrpc_url_2 = "{proxy.url}/"\n')
        try:
            lines, checks = failing(a)
            assert checks["chain"]["detail"] == said and not checks["chain"]["ok"], checks
            assert checks["chain"]["hint"].startswith(way_back), checks["chain"]
            # The machine's endpoint is set by rpc_url in config.toml: the way back names
            # it, where it said "with KINT_RPC_URL unset", which is set nowhere here.
            assert (f"with rpc_url in {a.kint_home / 'config.toml'} removed or naming its "
                    f"endpoint") in checks["chain"]["hint"], checks["chain"]
            assert "KINT_RPC_URL" not in checks["chain"]["hint"], checks["chain"]
            assert f"[FAIL] chain: {said}" in lines, lines
            status = kjson(a, "status")
            assert status["chain_head"] is None and status["chain_head_unavailable"] == said
            verified = a.kint("verify", "release rule", "--json")
            refusal = json.loads(verified.stdout)
            assert verified.returncode == 2 and refusal["error"] == "CONFIG_INVALID", refusal
            assert refusal["message"] == said, refusal
            # Push, pull, compact and recovery-code refuse in the same words before any
            # chain call: a pull read Base's head and refused as a stale or lying RPC
            # (exit 6), pointing at the endpoint rather than at the chain.
            asked = len(proxy.calls)
            refusals = ((("pull",), 5), (("pull", "--full"), 5), (("push",), 5),
                        (("compact",), 5), (("recovery-code",), 2))

            def refused(lane) -> None:  # noqa: ANN001 - a slice of refusals
                for command, code in lane:
                    out = a.kint(*command)
                    assert out.returncode == code, (command, out.stdout + out.stderr)
                    assert f"kint: error: {said} [CONFIG_INVALID]" in out.stderr, out.stderr
                    assert f"hint: {way_back}" in out.stderr, out.stderr

            # One after another: each is refused before any chain call or write, but each
            # holds the space's one op slot while it is (two at once, one met BUSY).
            refused(refusals)
            assert proxy.calls[asked:] == [], proxy.calls[asked:]
            # Connecting again there would have rewritten the enrolment for Base without a
            # word, leaving the devchain's mirror and watermark under it: refused, as the
            # machine holds the devchain's epochs.
            enrol = a.kint_home / f"enrol-{story['space16']}.json"
            before = enrol.read_bytes()
            again = a.kint("connect", "--owner", story["owner"], "--recovery-code-stdin",
                           input=recovery_code(a, story["space16"]) + "\n")
            assert again.returncode == 2, again.stdout + again.stderr
            assert (f"kint: error: {said}: connect does not move the space off them "
                    f"[CONFIG_INVALID]") in again.stderr, again.stderr
            assert f"hint: {way_back}" in again.stderr, again.stderr
            assert enrol.read_bytes() == before
        finally:
            clear_config(a)
    checks = checks_of(a)
    assert "chain" not in checks, checks
    assert kjson(a, "status")["chain_head"] == head  # nothing was anchored anywhere


def test_a_hung_primary_costs_doctor_one_bounded_call(story):
    a, devchain = story["a"], story["devchain"]
    with RpcProxy(devchain["rpc_url"], max_hang_s=60) as proxy:
        space_config(a, f'rpc_url = "{proxy.url}"\n')
        try:
            assert checks_of(a)["rpc primary"]["ok"]  # through the proxy, answering
            proxy.set_mode("hang")
            seen = len(proxy.calls)
            out = a.kint("doctor", "--json", env={"KINT_RPC_TIMEOUT": "1"}, timeout=120)
            checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
            assert out.returncode == 1
            assert proxy.calls[seen:] == ["eth_chainId"], proxy.calls[seen:]
            primary = checks["rpc primary"]
            assert not primary["ok"] and primary["detail"].startswith(
                f"{proxy.url}: reading the chain id: "), primary
            for name in ("contract", "session key", "head"):
                assert checks[name]["detail"] == "not checked: the primary RPC did not answer"
                assert not checks[name]["ok"]
            # Local checks still say what they know.
            assert checks["unanchored changes"]["detail"] == "none"
            # So does a missing session key: the warning a machine whose chain answers gets
            # (no chain needed to see it), where the head's failure keeps the exit status 1.
            key = a.kint_home / "session.key"
            aside = key.with_name("session.key.aside")
            key.rename(aside)
            try:
                out = a.kint("doctor", "--json", env={"KINT_RPC_TIMEOUT": "1"}, timeout=120)
            finally:
                aside.rename(key)
            checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
            assert checks["session key"] == NO_SESSION_KEY, checks["session key"]
            assert out.returncode == 1 and not checks["head"]["ok"], out.stdout

            # A primary that answers its first call and hangs on the next: nothing more is
            # asked of it. Its bound gives the first call room on a loaded box (doctor
            # starts no call past two bounds): the held one times out on any.
            proxy.release()
            proxy.set_mode("hang_methods", methods=["eth_getCode"])
            seen = len(proxy.calls)
            out = a.kint("doctor", "--json", env={"KINT_RPC_TIMEOUT": "5"}, timeout=120)
            checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
            assert proxy.calls[seen:] == ["eth_chainId", "eth_getCode"], proxy.calls[seen:]
            assert checks["rpc primary"]["ok"] and not checks["contract"]["ok"]
            for name in ("session key", "head"):
                assert checks[name]["detail"] == "not checked: the primary RPC did not answer"
        finally:
            proxy.release()
            proxy.forward()
            clear_config(a)


def test_an_endpoint_refusing_a_read_as_a_transaction_is_a_failed_check(story):
    """A read answered with "insufficient funds" (which only a transaction can earn: a lying
    or broken endpoint) comes back from kint's chain calls as the contract's refusal, not as
    the endpoint's failure. doctor says so on the check's own line; it was the whole doctor
    op's INTERNAL error."""
    a, devchain = story["a"], story["devchain"]
    with RpcProxy(devchain["rpc_url"]) as proxy:
        space_config(a, f'rpc_url = "{proxy.url}"\n')
        try:
            proxy.set_mode("error_methods", methods=["eth_getBalance"],
                           message="insufficient funds for gas * price + value")
            text, checks = doctor(a)
            assert text.returncode == 1, text.stdout + text.stderr
            key = checks["session key"]
            assert not key["ok"] and "InsufficientFunds" in key["detail"], key
            assert proxy.lies, "the endpoint was never asked for the balance"
            assert checks["contract"]["ok"] and checks["head"]["ok"], checks
            assert "INTERNAL" not in text.stdout + text.stderr

            # A view's error object is quoted on one line and cut short: an endpoint's
            # answer may be a whole page.
            proxy.set_mode("error_methods", methods=["eth_call"],
                           message="reverted:\n" + "0xdeadbeef" * 1000)
            checks = checks_of(a)
            said = [c for c in checks.values() if "the endpoint answered with an error" in
                    c["detail"]]
            assert said, checks
            for c in said:
                assert len(c["detail"]) < 400 and c["detail"].endswith("...)"), c
            # A read that failed names where A's endpoint is set, the space's table in
            # config.toml, where the head's and contract's said "check KINT_RPC_URL".
            where = f'{a.kint_home / "config.toml"} [spaces."{a.label(a.sibyl_db)}"]'
            proxy.set_mode("error_methods", methods=["eth_getCode"], message="no code read")
            for name, c in (("head", checks["head"]), ("contract", checks_of(a)["contract"])):
                assert not c["ok"] and c["name"] == name, c
                assert c["hint"] == (f"check the endpoints set in {where} and that they "
                                     f"answer, then try again"), c
        finally:
            proxy.forward()
            clear_config(a)


def test_doctor_waits_at_most_its_own_bound_a_call_and_says_so(story):
    a = story["a"]
    out = a.kint("doctor", "--json", env={"KINT_RPC_TIMEOUT": "30"})
    primary = {c["name"]: c for c in json.loads(out.stdout)["checks"]}["rpc primary"]
    assert primary["ok"] and primary["detail"].endswith(
        "(doctor waits 12 s a call at most; KINT_RPC_TIMEOUT is 30 s)"), primary


def test_a_primary_that_failed_without_a_wait_says_no_wait_of_doctors(story):
    """The note of doctor's cap (the test above) is for the calls it makes after the
    primary's. A primary that failed otherwise than by a timeout (which says the cap in its
    own words: test_doctor_call_cap.py) waited nothing and is asked nothing more: the note
    there was noise, and came after the error's own parenthesis ("(ConnectionError) (doctor
    waits 12 s ..."). A refused connection, an HTTP status, an error object: each says its
    failure alone. An endpoint of another chain answered: later calls wait the cap, and the
    note stays, as on a passing line."""
    a, devchain = story["a"], story["devchain"]
    slow = {"KINT_RPC_TIMEOUT": "30"}  # above doctor's 12 s cap
    refused = closed_port_url()
    space_config(a, f'rpc_url = "{refused}"\n')
    try:
        primary = checks_of(a, **slow)["rpc primary"]
        assert primary["detail"] == (f"{refused}: reading the chain id: the endpoint could "
                                     f"not be reached (ConnectionError)"), primary
        with RpcProxy(devchain["rpc_url"]) as proxy:
            space_config(a, f'rpc_url = "{proxy.url}"\n')
            proxy.set_mode("rate_limited", methods=["eth_chainId"], count=1000)
            primary = checks_of(a, **slow)["rpc primary"]
            assert primary["detail"] == (
                f"{proxy.url}: reading the chain id: the endpoint is rate limiting this "
                f"client (HTTP 429 Too Many Requests): try again in a moment, or use an "
                f"endpoint with a higher limit"), primary
            proxy.set_mode("error_methods", methods=["eth_chainId"], message="no chain here")
            primary = checks_of(a, **slow)["rpc primary"]
            assert primary["detail"].startswith(
                f"{proxy.url}: reading the chain id: the endpoint answered with an error (")
            assert "no chain here" in primary["detail"] and primary["detail"].endswith(")")
            assert "doctor waits" not in primary["detail"], primary
            proxy.set_mode("forward", chain_id=5)
            primary = checks_of(a, **slow)["rpc primary"]
            assert not primary["ok"] and primary["detail"] == (
                f"{proxy.url} (KINT_RPC_URL) answers for chain 5, not {devchain['chain_id']}, "
                f"the chain this machine signs for (doctor waits 12 s a call at most; "
                f"KINT_RPC_TIMEOUT is 30 s)"), primary
    finally:
        clear_config(a)


# The slow endpoint's delay on every call, and the bound of each command below (1.4 s and
# 2.6 s before, scaled alike): each call answers inside the bound by 3 s, room for a loaded
# box, where 1.2 s was less than an unheld call through a proxy was seen to take under four
# test workers (test_doctor_call_cap's 2 s); two delays are past it however fast the box.
SLOW_CALL_S = 3.5
SLOW_BOUND_S = 6.5
assert SLOW_CALL_S < SLOW_BOUND_S < 2 * SLOW_CALL_S


def test_status_and_doctor_over_a_slow_endpoint_start_no_call_past_their_budgets(story):
    """An endpoint slow but answering: each call within its bound, yet enough of them
    could outlast what the command waits for. The two commands run side by side on the
    same slow endpoint (each op on a thread of the space's worker, each call delayed by the
    proxy on a thread of its own, each command's budget counted from its own first call),
    where each cost a test of its own; now the longer of the two.

    `kint status` reads the session key's balance, authorization and expiry after the
    chain head, each bounded by KINT_VERIFY_HEAD_SECONDS; no read starts once that budget
    has passed since the first, so status says so instead of paying a budget a read. Each
    call answers after SLOW_CALL_S (3.5 s), inside a SLOW_BOUND_S (6.5 s) budget by 3 s (a
    loaded box adds to that); the first two key reads start inside the budget, the third at
    7 s at the earliest, never inside it, however fast the box.

    `kint doctor` starts no call once the chain's checks have taken two calls' bound (here
    2 x 6.5 s): the checks left say so, and doctor answers. Each call answers inside its
    6.5 s bound by 3 s; the two calls before the session key's take 7 s, inside the 13 s
    by 6 s; the four calls before the head's take 14 s at the least, past the 13 s, however
    fast the box (a loaded one only adds to them)."""
    a = story["a"]
    with RpcProxy(story["devchain"]["rpc_url"], max_hang_s=30) as proxy:
        space_config(a, f'rpc_url = "{proxy.url}"\n')
        try:
            proxy.set_mode("delay", seconds=SLOW_CALL_S)
            bound = str(SLOW_BOUND_S)
            status, doctored = side_by_side(
                lambda: a.kint("status", "--json", env={"KINT_VERIFY_HEAD_SECONDS": bound}),
                lambda: a.kint("doctor", "--json", env={"KINT_RPC_TIMEOUT": bound},
                               timeout=120))
            out = json.loads(ok(status).stdout)
            assert out["chain_head"] is not None, out  # the head itself was read in time
            facts = out["session_key"]
            assert facts["error"] == \
                f"not read: the chain took longer than {SLOW_BOUND_S:g} s to answer", facts
            assert "balance_wei" not in facts

            checks = {c["name"]: c for c in json.loads(doctored.stdout)["checks"]}
            assert checks["rpc primary"]["ok"] and checks["contract"]["ok"], checks
            assert checks["head"]["detail"] == \
                f"not checked: the chain's checks took {2 * SLOW_BOUND_S:g} s already"
            # The endpoint to check is the one in force, set in the space's table: the hint
            # said "check KINT_RPC_URL", which A's space does not use.
            where = f'{a.kint_home / "config.toml"} [spaces."{a.label(a.sibyl_db)}"]'
            assert checks["head"]["hint"] == (f"the endpoint answers slowly: check the "
                                              f"endpoints set in {where} and that they answer, "
                                              f"or run doctor again"), checks["head"]
            assert not checks["head"]["ok"] and doctored.returncode == 1
        finally:
            proxy.forward()
            clear_config(a)


def test_a_space_that_anchored_nothing_moves_chain_on_connect_and_says_so(story):
    """A space connected on the devchain that anchored nothing from this machine (its
    mirror at epoch 0, no watermark), connected again while kint reads Base: the enrolment
    moves to Base, and connect says so (a `chain:` line, `chain_moved` in --json), where it
    rewrote the enrolment without a word."""
    fresh = story["moves"]
    try:
        connected = kjson(fresh, "connect", "--dev")
        space16 = connected["space"]
        assert connected["chain_moved"] is None, connected
        with RpcProxy(story["devchain"]["rpc_url"]) as proxy:
            space_config(fresh, "", top=f'rpc_url = "{proxy.url}"\n'
                                         f'rpc_url_2 = "{proxy.url}/"\n')
            # The refusal said "its epochs are there" of a space that has none.
            push = fresh.kint("push")
            assert push.returncode == 5, push.stdout + push.stderr
            assert ("where this machine has anchored or pulled none of its epochs; kint now "
                    "reads Base (chain id 8453) [CONFIG_INVALID]") in push.stderr, push.stderr
            assert ("; or run `kint connect` again to connect the space on Base"
                    in push.stderr), push.stderr
            # anvil answers for 31337, Base's contract is not on it: the head read fails,
            # and connect went on from this machine's wraps, moving the enrolment to Base
            # through an endpoint of the devchain. It refuses that endpoint now, before it.
            refused = fresh.kint("connect", "--owner", connected["owner"],
                                 "--recovery-code-stdin",
                                 input=recovery_code(fresh, space16) + "\n")
            assert refused.returncode == 2, refused.stdout + refused.stderr
            assert (f"kint: error: {proxy.url} (KINT_RPC_URL) answers for chain 31337, not "
                    f"8453, the chain this machine signs for; nothing was connected "
                    f"[STALE_RPC]") in refused.stderr.splitlines(), refused.stderr
            enrolment = json.loads((fresh.kint_home / f"enrol-{space16}.json").read_text())
            assert enrolment["chain_id"] == 31337, enrolment
            with proxy.answering_as(BASE_CHAIN_ID):  # an endpoint of Base, as kint reads
                moved = fresh.kint("connect", "--owner", connected["owner"],
                                   "--recovery-code-stdin",
                                   input=recovery_code(fresh, space16) + "\n")
            assert moved.returncode == 0, moved.stdout + moved.stderr
            assert ("chain: this space was connected on the devchain (chain id 31337), where "
                    "this machine has anchored or pulled none of its epochs; kint now reads "
                    "Base (chain id 8453): the space is connected on the one kint reads now"
                    ) in moved.stdout.splitlines(), moved.stdout
            enrolment = json.loads((fresh.kint_home / f"enrol-{space16}.json").read_text())
            assert enrolment["chain_id"] == 8453, enrolment
    finally:
        fresh.shutdown()
