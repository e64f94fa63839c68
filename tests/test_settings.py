"""Settings a long-lived daemon honours (issue 12), without a chain: the schema and its
defaults, config.toml checked key by key and read again when it changes (the last good one
serving while a broken one is refused), the request's settings checked by the protocol,
`kint config show`, the one-line report of a value the supervisor does not take (one test
per class of setting), secrets that never reach a file or a log, and docs/settings.md
listing each setting once. The devchain half is tests/test_settings_chain.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from conftest import make_sandbox, write_store
from kint.protocol import ErrorCode, ProtocolError
from kint.protocol.server_codec import decode_request
from kint.settings import loader
from kint.settings.reload import ConfigWatch
from kint.settings.schema import BY_NAME, SETTINGS
from kint.settings.tomlfile import ConfigError, parse_config
from kint.settings.wire import outgoing

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {"default", "file", "daemon environment", "this call", "devchain record",
           "connect --rpc-urls", "kint-server session"}
SECRET = "correct-horse-battery-staple-7f3a"


# -- the schema ------------------------------------------------------------------------------


def test_the_seed_variables_keep_their_documented_defaults():
    defaults = {name: BY_NAME[name].default for name in BY_NAME}
    assert defaults["KINT_QUIET_SECONDS"] == 300
    assert defaults["KINT_POLL_SECONDS"] == 15 and BY_NAME["KINT_POLL_SECONDS"].minimum == 1
    assert defaults["KINT_SIZE_TRIGGER_BYTES"] == 32768
    assert defaults["KINT_NO_WATCHER"] is False
    assert defaults["KINT_BOOTSTRAP_SECONDS"] == 20
    assert defaults["KINT_RPC_TIMEOUT"] == 10
    assert defaults["KINT_VERIFY_HEAD_SECONDS"] == 2
    assert defaults["KINT_KEY_TTL"] == "24h"
    assert defaults["KINT_OFFLINE"] is False and defaults["KINT_ALLOW_SINGLE_RPC"] is False
    assert defaults["KINT_RPC_URL"] == "https://mainnet.base.org"
    assert defaults["KINT_CONTRACT"] == "0xa22E03f7a4145Bf4909a83595C90a38E14d79600"
    assert defaults["KINT_HOME"] == "~/.kint"
    assert defaults["KINT_WORKER_HEARTBEAT_TIMEOUT"] == 10
    assert defaults["KINT_WORKER_IDLE_SECONDS"] == 900
    assert defaults["KINT_LOG_MAX_BYTES"] == 262144
    secrets = {s.name for s in SETTINGS if s.secret}
    assert secrets == {"KINT_SESSION_PASSPHRASE", "KINT_OWNER_KEY"}
    assert not any(s.in_file for s in SETTINGS if s.secret)


def test_kint_reads_every_setting_one_way():
    """No module reads a setting from os.environ or envsettings any more."""
    names = {s.name for s in SETTINGS}
    offenders = []
    for path in (ROOT / "kint").rglob("*.py"):
        if path.parts[-2] == "settings":
            continue
        text = path.read_text()
        if "env_float" in text:
            offenders.append(f"{path}: env_float")
        for name in re.findall(r"os\.environ(?:\.get)?\(?\[?\"([A-Z_]+)\"", text):
            if name in names:
                offenders.append(f"{path}: {name}")
    assert offenders == []


# -- config.toml ----------------------------------------------------------------------------


@pytest.mark.parametrize("text,key,why", [
    ('rpc_url = "ftp://example.org"', "rpc_url", "is not an http(s) URL"),
    ("quiet_seconds = \"soon\"", "quiet_seconds", "is not a number"),
    ("poll_seconds = 0.5", "poll_seconds", "below the minimum, 1"),
    ("contract = \"0x1234\"", "contract", "is not an address"),
    ("offline = 1", "offline", "must be true or false"),
    ('offline = "yes"', "offline", "is not 1 (on) or 0 (off)"),
    ("key_ttl = \"forever\"", "key_ttl", "is not a duration"),
    ("quiet_secs = 5", "quiet_secs", "is not a kint setting"),
    ('session_passphrase = "x"', "session_passphrase", "is a secret"),
    ('owner_key = "x"', "owner_key", "is a secret"),
    ('home = "/tmp"', "home", "cannot be set in config.toml"),
    ('[spaces."alice"]\nworker_idle_seconds = 5', 'spaces."alice".worker_idle_seconds',
     "not a per-space setting"),
    ('[spaces."a@hermes:w"]\nrpc_url = 5', 'spaces."a@hermes:w".rpc_url', "must be a string"),
    ("spaces = 3", "spaces", "must be tables"),
    ("rpc_url = ", None, "is not valid TOML"),
])
def test_a_bad_value_is_refused_naming_the_file_and_the_key(tmp_path, text, key, why):
    path = tmp_path / "config.toml"
    with pytest.raises(ConfigError) as caught:
        parse_config(path, text.encode())
    assert caught.value.key == key
    assert str(caught.value).startswith(f"{path}: {key + ': ' if key else ''}")
    assert why in str(caught.value)


def test_an_endpoint_urllib_cannot_split_is_refused_as_no_url(tmp_path):
    """A `[` that opens no IPv6 host makes urllib raise ValueError: in the environment it
    failed every op that read the setting with INTERNAL (a worker's status, config show),
    where a bad value is refused or left unused; its key is not shown."""
    from kint.settings.values import BadValue, parse

    url = "https://[rpc.example/v2/kintkeypart"
    with pytest.raises(BadValue, match="is not an http"):
        parse(BY_NAME["KINT_RPC_URL"], url)
    with pytest.raises(ConfigError) as caught:
        parse_config(tmp_path / "config.toml", f'rpc_url = "{url}"'.encode())
    assert "is not an http(s) URL" in str(caught.value)
    assert "kintkeypart" not in str(caught.value)


@pytest.mark.parametrize("text, key, why", [
    ('rpc_url = ["https://base.example/v2/API-KEY-1"]', "rpc_url", "an array must be a string"),
    ('[spaces."alice"]\nrpc_url_2 = {u = "https://x.example/v2/API-KEY-1"}',
     'spaces."alice".rpc_url_2', "a table must be a string"),
])
def test_an_endpoint_that_is_no_string_is_refused_without_its_contents(tmp_path, text, key, why):
    """An endpoint given as an array or a table may still hold the URL, API key and all:
    neither the error, nor the refusal a last good configuration carries for it (what
    status and `kint config show` print), quotes it."""
    from kint.settings.tomlfile import ConfigFile, with_refusals

    path = tmp_path / "config.toml"
    with pytest.raises(ConfigError) as caught:
        parse_config(path, text.encode())
    assert caught.value.key == key and why in str(caught.value), str(caught.value)
    marked = with_refusals(ConfigFile(path=path), text.encode(), caught.value)
    lines = [*marked.refused.values(), *marked.refused_spaces.get("alice", {}).values()]
    assert len(lines) == 1 and why in lines[0], lines
    assert "API-KEY" not in str(caught.value) + "".join(lines)


def test_a_good_file_gives_the_machine_and_each_space_their_values(tmp_path):
    cfg = parse_config(tmp_path / "config.toml", b'''
rpc_timeout = 3
offline = true
quiet_seconds = 60
[spaces."alice@hermes:work"]
quiet_seconds = 5
rpc_url = "https://rpc.example/v1/KEY"
''')
    assert cfg.machine == {"KINT_RPC_TIMEOUT": 3.0, "KINT_OFFLINE": True,
                           "KINT_QUIET_SECONDS": 60.0}
    assert cfg.spaces["alice@hermes:work"] == {"KINT_QUIET_SECONDS": 5.0,
                                               "KINT_RPC_URL": "https://rpc.example/v1/KEY"}


def test_the_layers_default_file_environment_space_table(tmp_path, monkeypatch):
    cfg = parse_config(tmp_path / "config.toml", b'''
rpc_timeout = 3
quiet_seconds = 60
verify_head_seconds = 4
[spaces."alice"]
quiet_seconds = 5
''')
    env = {"KINT_QUIET_SECONDS": "90", "KINT_VERIFY_HEAD_SECONDS": "nope",
           "KINT_POLL_SECONDS": "0.2"}
    monkeypatch.setattr(loader._process, "daemon", True)

    def at(name, space=("alice",)):
        v = loader.resolve(BY_NAME[name], cfg, environ=env, space=space)
        return v.value, v.source, v.table

    assert at("KINT_SIZE_TRIGGER_BYTES") == (32768.0, "default", None)
    assert at("KINT_RPC_TIMEOUT") == (3.0, "file", None)
    assert at("KINT_QUIET_SECONDS", space=("bob",)) == (90.0, "daemon environment", None)
    assert at("KINT_QUIET_SECONDS") == (5.0, "file", "alice")  # a space's table beats both
    assert at("KINT_VERIFY_HEAD_SECONDS") == (4.0, "file", None)  # a bad env value: unused
    assert at("KINT_POLL_SECONDS") == (1.0, "daemon environment", None)  # raised to its minimum


def test_a_contract_whose_case_is_not_its_checksum_is_refused_as_a_typo(tmp_path,
                                                                         monkeypatch):
    """KINT_CONTRACT goes through the check every owner does (kint.custody.ids): a
    mixed-case address whose case is not its EIP-55 checksum is a likely typo, another
    contract to anchor to, and is refused in the environment and in config.toml alike,
    naming the setting and echoing no other. Before, only its shape was checked (and
    eth_utils' is_address, which no longer checks the checksum), so it was used. One case
    throughout carries no checksum and is taken as it is."""
    from kint.chain import config as chain_config
    from kint.settings.loader import refusal
    from kint.settings.schema import DEFAULT_CONTRACT

    digits = DEFAULT_CONTRACT[2:]
    at = next(i for i, c in enumerate(digits) if c.isupper())
    typo = "0x" + digits[:at] + digits[at].lower() + digits[at + 1:]
    env = {"KINT_CONTRACT": typo, "KINT_RPC_URL": "https://base.example/v2/SECRETKEY123"}
    empty = parse_config(tmp_path / "config.toml", b"")
    found = loader.resolve(BY_NAME["KINT_CONTRACT"], empty, environ=env)
    assert found.value is None and found.refused is not None, found
    message, hint = refusal(found)
    assert message.startswith(f"KINT_CONTRACT='{typo}' in "), message
    assert "does not match its EIP-55 checksum" in message, message
    assert "SECRETKEY123" not in message + hint and "KINT_RPC_URL" not in message + hint
    # The chain's own reader of the contract (for a caller that did not check the settings
    # first) says the same.
    monkeypatch.setattr(chain_config.settings, "value", lambda name: typo)
    with pytest.raises(chain_config.ChainConfigError, match="EIP-55 checksum"):
        chain_config.contract_address()
    with pytest.raises(ConfigError, match="does not match its EIP-55 checksum"):
        parse_config(tmp_path / "config.toml", f'contract = "{typo}"\n'.encode())
    for spelled in (DEFAULT_CONTRACT, DEFAULT_CONTRACT.lower(), "0x" + digits.upper()):
        taken = loader.resolve(BY_NAME["KINT_CONTRACT"], empty,
                               environ={"KINT_CONTRACT": spelled})
        assert taken.refused is None and taken.value == spelled, spelled


def test_a_floor_is_lowered_through_kints_one_hook_and_every_check_sees_it(tmp_path):
    """A test harness lowers KINT_POLL_SECONDS' floor (tests/support/kint_test_timings.py)
    with `schema.lower_minimum`, not by writing into a frozen Setting: the environment,
    the config file and a value a session sends all take the lower floor, the table's own
    Setting is left as it was, and a higher floor is refused. In a process of its own, as
    the change lasts for the process."""
    script = f"""
from pathlib import Path
from kint.settings import loader, schema
from kint.settings.tomlfile import parse_config
from kint.settings.wire import parse_sent

table = schema.BY_NAME["KINT_POLL_SECONDS"]
lowered = schema.lower_minimum("KINT_POLL_SECONDS", 0.25)
assert table.minimum == 1.0 and lowered.minimum == 0.25
assert schema.BY_NAME["KINT_POLL_SECONDS"] is lowered is schema.BY_KEY["poll_seconds"]
assert lowered in schema.SETTINGS and table not in schema.SETTINGS
cfg = parse_config(Path({str(tmp_path / "config.toml")!r}), b"poll_seconds = 0.5")
assert loader.resolve(lowered, cfg).value == 0.5
assert loader.resolve(lowered, parse_config(Path("c.toml"), b""),
                      environ={{"KINT_POLL_SECONDS": "0.3"}}).value == 0.3
assert parse_sent(lowered, "0.1") == 0.25
try:
    schema.lower_minimum("KINT_POLL_SECONDS", 2.0)
except ValueError:
    pass
else:
    raise AssertionError("a higher floor was taken")
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr


def test_a_request_sees_the_process_settings_resolving_only_what_it_reads(tmp_path,
                                                                           monkeypatch):
    """The worker's view of one request: the same values as every setting resolved at
    once from the same reading of the file (the space's table, the environment, the
    call's own on top), but only those the request reads are resolved."""
    from kint.settings.wire import apply

    (tmp_path / "config.toml").write_bytes(b'rpc_timeout = 3\n[spaces."alice"]\n'
                                           b'quiet_seconds = 5\n')
    monkeypatch.setenv("KINT_HOME", str(tmp_path))
    monkeypatch.setenv("KINT_VERIFY_HEAD_SECONDS", "7")
    monkeypatch.setattr(loader._process, "home", tmp_path)
    monkeypatch.setattr(loader._process, "daemon", True)
    monkeypatch.setattr(loader._process, "space", ("alice",))
    values, notices = apply("verify", {"KINT_OFFLINE": "1"}, label="alice")
    assert notices == []
    assert len(values) == 1  # the call's own value; nothing else resolved yet
    with loader.overlay(values):
        assert loader.value("KINT_OFFLINE") is True  # the call's
        assert loader.value("KINT_VERIFY_HEAD_SECONDS") == 7.0  # the environment's
        assert loader.value("KINT_QUIET_SECONDS") == 5.0  # the space's table
        assert loader.lookup("KINT_RPC_TIMEOUT").source == "file"
    assert len(values) == 4
    # Each value as resolving every setting at once from the same reading of the file
    # gives it (the old, eager way).
    cfg, _ = loader.config()
    every = {s.name: loader.resolve(s, cfg, space=("alice",)) for s in SETTINGS}
    assert all(values[s.name] == every[s.name] for s in SETTINGS if s.name != "KINT_OFFLINE")


def test_requests_that_send_no_setting_share_the_view_of_the_reading_in_force(tmp_path,
                                                                            monkeypatch):
    """In the daemon, the requests that send nothing share one view per reading of the file
    (a setting resolved once, not per request); a change of the file gives the next request
    a new view with the new values; a request that sends a setting gets a view of its own,
    which the shared one never sees; a client, whose environment is the call's, shares none."""
    from kint.settings.wire import apply

    config = tmp_path / "config.toml"
    config.write_bytes(b"rpc_timeout = 3\n")
    monkeypatch.setenv("KINT_HOME", str(tmp_path))
    monkeypatch.setattr(loader._process, "home", tmp_path)
    monkeypatch.setattr(loader._process, "own_watch", None)
    monkeypatch.setattr(loader._process, "daemon", True)
    monkeypatch.setattr(loader._process, "space", ("alice",))
    monkeypatch.setattr(loader, "_shared_view", None)
    first, notices = apply("status", {}, label="alice")
    assert notices == [] and first["KINT_RPC_TIMEOUT"].value == 3
    assert apply("verify", {}, label="alice")[0] is first
    own, _ = apply("verify", {"KINT_OFFLINE": "1"}, label="alice")
    assert own is not first and own["KINT_OFFLINE"].source == "this call"
    assert first["KINT_OFFLINE"].source == "default"
    assert apply("status", {}, label="alice")[0] is first
    config.write_bytes(b"rpc_timeout = 12\n")  # another size: another signature
    after, _ = apply("status", {}, label="alice")
    assert after is not first and after["KINT_RPC_TIMEOUT"].value == 12
    assert apply("status", {}, label="alice")[0] is after
    # Another space named (`configure`): its own view, with its own table's values.
    config.write_bytes(b'rpc_timeout = 12\n[spaces."bob"]\nquiet_seconds = 9\n')
    alices, _ = apply("status", {}, label="alice")
    assert alices["KINT_QUIET_SECONDS"].value != 9
    monkeypatch.setattr(loader._process, "space", ("bob",))
    bobs, _ = apply("status", {}, label="bob")
    assert bobs is not alices and bobs["KINT_QUIET_SECONDS"].value == 9
    monkeypatch.setattr(loader._process, "daemon", False)
    assert apply("status", {}, label="alice")[0] is not apply("status", {}, label="alice")[0]


def test_the_last_good_configuration_keeps_serving_in_every_process(tmp_path):
    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    path = home / "config.toml"
    path.write_text("quiet_seconds = 60\n")
    first = ConfigWatch(home)
    cfg, error = first.current()
    assert error is None and cfg.machine == {"KINT_QUIET_SECONDS": 60.0}
    assert (home / "config.last-good.toml").stat().st_mode & 0o777 == 0o600

    path.write_text("quiet_seconds = -1\n")
    cfg, error = first.current()
    assert cfg.machine == {"KINT_QUIET_SECONDS": 60.0}
    assert str(error) == f"{path}: quiet_seconds: -1 is below the minimum, 0"
    # A process started while the file is broken (a worker spawned later) serves the copy.
    cfg, error = ConfigWatch(home).current()
    assert cfg.machine == {"KINT_QUIET_SECONDS": 60.0} and error is not None

    path.write_text("quiet_seconds = 30\n")
    assert first.current() == (parse_config(path, path.read_bytes()), None)
    path.unlink()
    cfg, error = first.current()
    assert (cfg.machine, error) == ({}, None)
    assert not (home / "config.last-good.toml").exists()


# -- the request ----------------------------------------------------------------------------


def _request(op: str, args: dict) -> dict:
    return {"v": 1, "id": "r1", "op": op, "tenant": "t", "db": "/tmp/x.db", "args": args}


def test_the_settings_a_request_carries_are_checked_like_any_argument():
    ok = decode_request(orjson.dumps(_request("verify", {
        "query": "q", "settings": {"KINT_OFFLINE": "1", "KINT_SESSION_PASSPHRASE": "set"}})))
    assert ok.args["settings"] == {"KINT_OFFLINE": "1", "KINT_SESSION_PASSPHRASE": "set"}
    proof = {"KINT_SESSION_PASSPHRASE": "set:" + "ab" * 16 + ":" + "cd" * 32}
    assert decode_request(orjson.dumps(_request("verify", {
        "query": "q", "settings": proof}))).args["settings"] == proof
    for settings, why in [
        ({"KINT_HOME": "/x"}, "not a setting the daemon reads"),
        ({"KINT_OWNER_KEY": "set"}, "not a setting the daemon reads"),
        ({"KINT_SESSION_PASSPHRASE": SECRET},
         "KINT_SESSION_PASSPHRASE as neither `set` nor its proof"),
        ({"KINT_SESSION_PASSPHRASE": "set:" + SECRET},
         "KINT_SESSION_PASSPHRASE as neither `set` nor its proof"),
        ({"KINT_SESSION_PASSPHRASE": "set:" + "ab" * 16 + ":" + "cd" * 31},
         "KINT_SESSION_PASSPHRASE as neither `set` nor its proof"),
        ({"KINT_OFFLINE": 1}, "bad value for KINT_OFFLINE"),
        ({"KINT_OFFLINE": "x" * 5000}, "bad value for KINT_OFFLINE"),
        ({"KINT_OFFLINE": ""}, "bad value for KINT_OFFLINE"),
        (["KINT_OFFLINE"], "must be an object"),
    ]:
        with pytest.raises(ProtocolError) as caught:
            decode_request(orjson.dumps(_request("verify", {"query": "q",
                                                             "settings": settings})))
        assert caught.value.code is ErrorCode.BAD_REQUEST
        assert "'settings'" in caught.value.message and why in caught.value.message
    with pytest.raises(ProtocolError):  # the supervisor's own ops take none
        decode_request(orjson.dumps({"v": 1, "id": "r2", "op": "sup.status",
                                     "args": {"settings": {}}}))


def test_a_client_sends_what_the_daemon_reads_and_never_a_secret():
    env = {"KINT_OFFLINE": "1", "KINT_RPC_URL": "http://127.0.0.1:9", "KINT_HOME": "/h",
           "KINT_SESSION_PASSPHRASE": SECRET, "KINT_OWNER_KEY": "0x" + "11" * 32,
           "KINT_TENANT": "t", "KINT_ANVIL": "/bin/anvil", "KINT_QUIET_SECONDS": "5",
           "KINT_RPC_TIMEOUT": ""}
    sent = outgoing(env)
    proof = sent.pop("KINT_SESSION_PASSPHRASE")
    assert sent == {"KINT_OFFLINE": "1", "KINT_RPC_URL": "http://127.0.0.1:9",
                    "KINT_QUIET_SECONDS": "5"}
    # Of the secret, that it is set and a proof a worker checks against its own
    # (kint.settings.secret_proof): a fresh nonce each request, so no two proofs match.
    again = outgoing(env)["KINT_SESSION_PASSPHRASE"]
    assert proof.startswith("set:") and again.startswith("set:") and proof != again
    assert SECRET not in proof and SECRET.encode().hex() not in proof


# -- a real supervisor ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    """One machine whose supervisor was started with KINT_WORKER_IDLE_SECONDS=600 in its
    environment, and nothing else of kint's."""
    sb = make_sandbox(tmp_path_factory.mktemp("settings"))
    write_store(sb.sibyl_db)
    out = sb.kint("supervisor", "start", env={"KINT_WORKER_IDLE_SECONDS": "600"})
    assert out.returncode == 0, out.stderr
    yield sb
    sb.shutdown()


def show(sb, **env):
    out = sb.kint("config", "show", "--json", env=env)
    assert out.returncode == 0, out.stderr
    return {e["name"]: e for e in json.loads(out.stdout)["settings"]}, out.stderr


def config_file(sb, text: str) -> None:
    path = sb.kint_home / "config.toml"
    path.write_text(text)


def test_config_show_names_the_source_of_every_value(box):
    config_file(box, f'rpc_timeout = 3\n[spaces."{box.tenant}"]\nquiet_seconds = 45\n')
    try:
        found, stderr = show(box, KINT_OFFLINE="1", KINT_SESSION_PASSPHRASE=SECRET,
                             KINT_ANVIL="/opt/anvil")
    finally:
        (box.kint_home / "config.toml").unlink()
    assert set(found) == {s.name for s in SETTINGS}
    for entry in found.values():
        assert entry["source"] in SOURCES, entry
    assert found["KINT_RPC_TIMEOUT"] == {**found["KINT_RPC_TIMEOUT"], "value": 3,
                                         "source": "file",
                                         "where": str(box.kint_home / "config.toml")}
    assert found["KINT_QUIET_SECONDS"]["value"] == 45
    assert found["KINT_QUIET_SECONDS"]["where"].endswith(f'[spaces."{box.tenant}"]')
    assert (found["KINT_WORKER_IDLE_SECONDS"]["value"],
            found["KINT_WORKER_IDLE_SECONDS"]["source"]) == (600, "daemon environment")
    assert (found["KINT_OFFLINE"]["value"], found["KINT_OFFLINE"]["source"]) == (True,
                                                                                  "this call")
    assert (found["KINT_ANVIL"]["value"], found["KINT_ANVIL"]["source"]) == ("/opt/anvil",
                                                                              "this call")
    assert (found["KINT_POLL_SECONDS"]["value"], found["KINT_POLL_SECONDS"]["source"]) == (
        15, "default")
    assert found["KINT_HOME"]["value"] == str(box.kint_home)
    # A secret: only whether it is set, and the supervisor's is not this command's.
    assert found["KINT_SESSION_PASSPHRASE"]["value"] == "unset"
    assert found["KINT_OWNER_KEY"]["value"] == "unset"
    # Said in the object's `notices` under --json (stderr quiet of it), on stderr without.
    told = "KINT_SESSION_PASSPHRASE is set in this environment but the supervisor runs without it"
    assert told not in stderr, stderr
    shown = box.kint("config", "show", "--json", env={"KINT_SESSION_PASSPHRASE": SECRET})
    assert any(told in line for line in json.loads(shown.stdout)["notices"]), shown.stdout
    plain = box.kint("config", "show", env={"KINT_SESSION_PASSPHRASE": SECRET})
    assert told in plain.stderr and SECRET not in plain.stdout + plain.stderr, plain.stderr
    text = box.kint("config", "show", env={"KINT_OFFLINE": "1"}).stdout
    assert re.search(r"^KINT_OFFLINE +1 +this call$", text, re.M), text
    assert re.search(r"^KINT_WORKER_IDLE_SECONDS +600 +daemon environment$", text, re.M)


def _reports(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "in this environment is not used" in line]


def daemon(sb, **sent: str) -> dict:
    """The `config` op straight from the test (no CLI start-up): the worker's settings, with
    `sent` as a client's environment would send them."""
    result = sb.call("config", sb.sibyl_db, timeout_s=30,
                     args={"settings": sent} if sent else {})
    result["values"] = {e["name"]: (e["value"], e["source"]) for e in result["settings"]}
    return result


# name: (a caller's value, what the supervisor runs with, how to change it)
CLASSES = {
    # space scope: a chain endpoint, the contract
    "KINT_RPC_URL": ("http://127.0.0.1:9/secret-key", "https://mainnet.base.org (the default)",
                     'set rpc_url under [spaces."{label}"] in {file}'),
    "KINT_CONTRACT": ("0x" + "ab" * 20,
                      "0xa22E03f7a4145Bf4909a83595C90a38E14d79600 (the default)",
                      'set contract under [spaces."{label}"] in {file}'),
    # space scope, taken from kint-server when it attaches: the watcher's timings
    "KINT_QUIET_SECONDS": ("5", "300 (the default)", "kint-server sends it when it attaches"),
    # machine scope: from the default (the file would do), from the supervisor's environment
    "KINT_LOG_MAX_BYTES": ("4096", "262144 (the default)", "set log_max_bytes in {file}"),
    "KINT_WORKER_IDLE_SECONDS": ("5", "600 (from the supervisor's environment)",
                                 "the supervisor was started with it"),
}


def test_a_value_the_supervisor_does_not_take_is_reported_in_one_line(box):
    """One class of setting a line: each value a command's environment gives and the
    supervisor does not take for the call is named with the running value, its source and
    how to change it; the call runs with the supervisor's."""
    env = {name: given for name, (given, _, _) in CLASSES.items()}
    out = box.kint("status", env=env)
    assert out.returncode == 0, out.stderr
    reports = _reports(out.stderr)
    # Under --json the object carries the same lines, for a script that reads stdout alone,
    # and stderr stays quiet of them.
    shown = box.kint("status", "--json", env=env)
    assert _reports("\n".join(json.loads(shown.stdout)["notices"])) == reports, shown.stdout
    assert _reports(shown.stderr) == [], shown.stderr
    assert len(reports) == len(CLASSES), out.stderr
    label, file = box.tenant, box.kint_home / "config.toml"
    for name, (given, running, how) in CLASSES.items():
        shown = "http://127.0.0.1:9/<redacted>" if name == "KINT_RPC_URL" else given
        [line] = [r for r in reports if r.startswith(f"kint: {name}={shown} in this ")]
        assert "is not used: " in line and f"runs with {running}; to change it, " in line
        assert how.format(label=label, file=file) in line, line
    assert "secret-key" not in out.stderr
    # The secret class: only that it is set travels, and the difference is said.
    result = daemon(box, KINT_SESSION_PASSPHRASE="set")
    assert result["values"]["KINT_SESSION_PASSPHRASE"] == ("unset", "default")
    [line] = result["notices"]
    assert line.startswith("kint: KINT_SESSION_PASSPHRASE is set in this environment but the "
                           "supervisor runs without it")


def _another_value(setting, running) -> str:
    """A value of `setting` a caller could give that is not `running`, by its kind."""
    if setting.kind == "flag":
        return "0" if running else "1"
    if setting.kind in ("float", "int"):
        return str(int(running) + 7)
    if setting.kind == "url":
        return "http://127.0.0.1:9/secret-key"
    if setting.kind == "address":
        return "0x" + "ab" * 20
    raise AssertionError(f"{setting.name}: say which value of kind {setting.kind} differs")


def test_every_machine_and_space_setting_that_differs_is_told_in_one_line(box):
    """A supervisor runs with the values it was started with (an on-demand start takes the
    starting command's environment), so each `machine` or `space` setting it reads that a
    later command gives another value gets that command its one line, whichever it is: the
    schema decides which are checked, so a setting added later is covered too. A secret
    travels only as set: its line is for a supervisor that runs without it."""
    running = daemon(box)["values"]
    compared = [s for s in SETTINGS if s.scope in ("machine", "space") and s.sent]
    sent = {s.name: ("set" if s.secret else _another_value(s, running[s.name][0]))
            for s in compared}
    assert {"KINT_NO_KEYCHAIN", "KINT_WORKER_IDLE_SECONDS", "KINT_LOG_MAX_BYTES",
            "KINT_RPC_URL", "KINT_SESSION_PASSPHRASE"} <= set(sent)
    notices = daemon(box, **sent)["notices"]
    for name in sent:
        lines = [n for n in notices if n.startswith(f"kint: {name}=")
                 or n.startswith(f"kint: {name} is set")]
        assert len(lines) == 1, (name, notices)
    assert len(notices) == len(sent), notices
    assert not any("secret-key" in n for n in notices)


def test_supervisor_status_lists_the_settings_it_was_started_with(box):
    """`kint supervisor status` ends with the settings the supervisor took from its
    environment (--json: `started_with`), so a command that sets none can still see what
    a supervisor started by another command runs with."""
    out = box.kint("supervisor", "status", "--json")
    assert out.returncode == 0, out.stderr
    given = [{"name": "KINT_WORKER_IDLE_SECONDS", "value": "600"}]
    if sys.platform == "darwin":  # the sandboxes switch the Keychain off there
        given.insert(0, {"name": "KINT_NO_KEYCHAIN", "value": "1"})
    assert json.loads(out.stdout)["supervisor"]["started_with"] == given
    text = box.kint("supervisor", "status").stdout
    assert text.splitlines()[-1] == "started with: " + ", ".join(
        f"{e['name']}={e['value']}" for e in given), text


def test_the_settings_started_with_never_show_a_secret_or_an_endpoints_key(tmp_path):
    """What an on-demand start took from a command's environment, as status lists it: the
    settings the daemon reads (not a client's own, nor KINT_HOME, which status names
    already), a secret only as set, an endpoint without its user, path or query. End to
    end: a one-off `KINT_RPC_URL=... kint status` starts the supervisor, and its status
    says so."""
    from kint.settings.started_with import started_with

    env = {"KINT_SESSION_PASSPHRASE": SECRET, "KINT_OWNER_KEY": "0x" + "11" * 32,
           "KINT_RPC_URL": "https://user:pw@base.example/v2/APIKEY123?k=QUERYKEY9",
           "KINT_HOME": "/h", "KINT_ANVIL": "/bin/anvil", "KINT_QUIET_SECONDS": "5",
           "KINT_TENANT": "t", "KINT_RPC_TIMEOUT": " "}
    assert started_with(env) == [
        {"name": "KINT_RPC_URL", "value": "https://base.example/<redacted>"},
        {"name": "KINT_SESSION_PASSPHRASE", "value": "set"},
        {"name": "KINT_QUIET_SECONDS", "value": "5"}]
    sb = make_sandbox(tmp_path / "machine")
    try:
        started = sb.kint("status", env={"KINT_RPC_URL": "http://127.0.0.1:9/APIKEY123",
                                         "KINT_SESSION_PASSPHRASE": SECRET})
        assert started.returncode == 0, started.stderr
        out = sb.kint("supervisor", "status")
    finally:
        sb.shutdown()
    assert out.returncode == 0, out.stderr
    last = out.stdout.splitlines()[-1]
    assert last.startswith("started with: ") and "KINT_RPC_URL=http://127.0.0.1:9/<redacted>" \
        in last and "KINT_SESSION_PASSPHRASE=set" in last, out.stdout
    assert "APIKEY123" not in out.stdout and SECRET not in out.stdout


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS has the Keychain it switches off")
def test_a_setting_that_does_nothing_on_this_platform_is_said_not_dropped(box):
    """v0.3.0's KINT_NO_KEYCHAIN switches off the macOS Keychain; where there is none it
    does nothing, and a command that sets it is told so (not told to move it to the
    config file, where it would do nothing either); `config show` marks it too."""
    no_effect = ("kint: KINT_NO_KEYCHAIN=1 in this environment has no effect on "
                 f"{sys.platform}: there is no macOS Keychain here; the local secret is "
                 "KINT_SESSION_PASSPHRASE, else KINT_HOME/local.secret")
    out = box.kint("status", env={"KINT_NO_KEYCHAIN": "1"})
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [no_effect], out.stderr
    out = box.kint("status", "--json", env={"KINT_NO_KEYCHAIN": "1"})
    assert json.loads(out.stdout)["notices"] == [no_effect] and out.stderr == "", out
    # Set for the machine (here in the config file): `config show` marks it.
    config_file(box, "no_keychain = true\n")
    try:
        found, stderr = show(box)
        text = box.kint("config", "show").stdout
    finally:
        (box.kint_home / "config.toml").unlink()
    assert stderr == ""
    assert found["KINT_NO_KEYCHAIN"]["no_effect_here"] == (
        f"no effect on {sys.platform}: there is no macOS Keychain here; the local secret is "
        "KINT_SESSION_PASSPHRASE, else KINT_HOME/local.secret")
    assert found["KINT_OFFLINE"]["no_effect_here"] is None
    assert re.search(rf"^KINT_NO_KEYCHAIN +1 +file \(.*config.toml\); no effect on "
                     rf"{sys.platform}: there is no macOS Keychain here", text, re.M), text
    # Off (`0`) asks for nothing, so there is nothing to say.
    out = box.kint("status", "--json", env={"KINT_NO_KEYCHAIN": "0"})
    assert out.returncode == 0 and out.stderr == "", out.stderr


def test_a_call_setting_is_applied_and_a_bad_one_said(box):
    result = daemon(box, KINT_RPC_TIMEOUT="0.5", KINT_KEY_TTL="1h", KINT_OFFLINE="1",
                    KINT_VERIFY_HEAD_SECONDS="0.01", KINT_NONCE_RETRY_SECONDS="3",
                    KINT_ALLOW_SINGLE_RPC="1")
    assert "notices" not in result
    assert {n: result["values"][n] for n in ("KINT_RPC_TIMEOUT", "KINT_KEY_TTL", "KINT_OFFLINE",
                                             "KINT_VERIFY_HEAD_SECONDS",
                                             "KINT_NONCE_RETRY_SECONDS",
                                             "KINT_ALLOW_SINGLE_RPC")} == {
        "KINT_RPC_TIMEOUT": (0.5, "this call"), "KINT_KEY_TTL": ("1h", "this call"),
        "KINT_OFFLINE": (True, "this call"), "KINT_ALLOW_SINGLE_RPC": (True, "this call"),
        "KINT_VERIFY_HEAD_SECONDS": (0.1, "this call"),  # raised to its minimum
        "KINT_NONCE_RETRY_SECONDS": (3.0, "this call")}
    # The next call without them runs with the supervisor's again.
    assert daemon(box)["values"]["KINT_RPC_TIMEOUT"] == (10.0, "default")
    result = daemon(box, KINT_RPC_TIMEOUT="soon")
    assert result["notices"] == ["kint: KINT_RPC_TIMEOUT='soon' in this environment is not a "
                                 "number, so it is not used: this call runs with 10 (the "
                                 "default)"]
    # A switch is on for `1` only (v0.3.0's rule); `true` is said, not silently off.
    result = daemon(box, KINT_OFFLINE="true")
    assert result["values"]["KINT_OFFLINE"] == (False, "default")
    assert result["notices"] == ["kint: KINT_OFFLINE='true' in this environment is not 1 (on) "
                                 "or 0 (off), so it is not used: this call runs with unset (the "
                                 "default)"]


def test_a_changed_config_applies_on_the_next_request_and_a_broken_one_is_refused(box):
    path = box.kint_home / "config.toml"
    head = "KINT_VERIFY_HEAD_SECONDS"
    try:
        config_file(box, "verify_head_seconds = 7\n")
        assert daemon(box)["values"][head] == (7, "file")
        config_file(box, f'verify_head_seconds = 8\n[spaces."{box.tenant}"]\npoll_seconds = 3\n')
        result = daemon(box)
        assert result["values"][head] == (8, "file")
        assert result["values"]["KINT_POLL_SECONDS"] == (3, "file")

        config_file(box, "verify_head_seconds = 9\nquiet_seconds = 'later'\n")
        refusal = (f"kint: {path}: quiet_seconds: 'later' is not a number; the last good "
                   f"configuration keeps serving")
        result = daemon(box)
        assert result["values"][head] == (8, "file") and result["notices"] == [refusal]
        assert result["config_error"] == f"{path}: quiet_seconds: 'later' is not a number"
        out = box.kint("config", "show")  # the command says it once, on stderr
        assert out.returncode == 0 and out.stderr.count(refusal) == 1, out.stderr
        assert re.search(r"^KINT_VERIFY_HEAD_SECONDS +8 +file ", out.stdout, re.M)
        check = box.kint("config", "check")
        assert check.returncode == 2
        assert check.stderr.splitlines()[0] == (f"kint: error: {path}: quiet_seconds: 'later' "
                                                f"is not a number [CONFIG_INVALID]")
        check = box.kint("config", "check", "--json")  # the refusal as an object, on stdout
        assert check.returncode == 2 and check.stderr == "", check.stderr
        assert json.loads(check.stdout) == {
            "error": "CONFIG_INVALID", "message": f"{path}: quiet_seconds: 'later' is not a "
            "number", "hint": "fix that key; until then the supervisor keeps serving the last "
            "good configuration"}
        # A worker started while the file is broken serves the last good one too.
        box.call("sup.restart", args={"target": box.tenant}, timeout_s=30)
        result = daemon(box)
        assert result["values"][head] == (8, "file") and result["notices"] == [refusal]

        config_file(box, "verify_head_seconds = 9\n")
        result = daemon(box)
        assert result["values"][head] == (9, "file") and "notices" not in result
    finally:
        path.unlink(missing_ok=True)


def test_the_supervisor_reads_the_config_file_again_on_change_and_on_reload(box):
    path, log = box.kint_home / "config.toml", box.kint_home / "supervisor.log"
    try:
        config_file(box, "worker_heartbeat_timeout = 12\n")  # no command: within a second
        box.wait_for(lambda: "heartbeat_timeout_s 10.0 -> 12.0" in log.read_text(), timeout=15,
                     what="the supervisor reading the changed file")
        config_file(box, "worker_heartbeat_timeout = 'often'\n")
        out = box.kint("supervisor", "reload")
        assert out.returncode == 2
        assert out.stderr.splitlines()[0] == (
            f"kint: error: {path}: worker_heartbeat_timeout: 'often' is not a number; the last "
            f"good configuration keeps serving [CONFIG_INVALID]")
        refused = box.kint("supervisor", "reload", "--json")
        assert refused.returncode == 2 and json.loads(refused.stdout)["error"] == "CONFIG_INVALID"
        config_file(box, "worker_heartbeat_timeout = 14\n")
        out = box.kint("supervisor", "reload")
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == (f"configuration read: {path} (1 machine setting(s), 0 "
                                      f"space table(s))")
        # `--json`: the fields `kint config check --json` gives the same file.
        read = {"config_file": str(path), "exists": True,
                "machine": ["KINT_WORKER_HEARTBEAT_TIMEOUT"], "spaces": []}
        for argv in (("supervisor", "reload", "--json"), ("config", "check", "--json")):
            out = box.kint(*argv)
            assert out.returncode == 0 and json.loads(out.stdout) == read, out.stderr
        assert "heartbeat_timeout_s 12.0 -> 14.0" in log.read_text()
    finally:
        path.unlink(missing_ok=True)


def test_secrets_never_reach_the_config_file_a_log_or_a_reply(box):
    config_file(box, f'session_passphrase = "{SECRET}"\n')
    try:
        out = box.kint("config", "check")
        assert out.returncode == 2
        assert "session_passphrase: KINT_SESSION_PASSPHRASE is a secret" in out.stderr
        assert SECRET not in out.stderr
    finally:
        (box.kint_home / "config.toml").unlink()
    env = {"KINT_SESSION_PASSPHRASE": SECRET, "KINT_OWNER_KEY": "0x" + "5e" * 32}
    outputs = [box.kint(*args, env=env) for args in (("status", "--json"),
                                                    ("config", "show", "--json"))]
    for out in outputs:
        assert SECRET not in out.stdout + out.stderr and "5e5e5e" not in out.stdout + out.stderr
    for path in box.kint_home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert SECRET.encode() not in data and b"5e5e5e5e" not in data, path


def test_docs_list_each_setting_once_with_where_it_may_be_set():
    from kint.settings.docs import tables

    text = (ROOT / "docs" / "settings.md").read_text()
    assert tables() in text, "run python -m kint.settings.docs to regenerate the tables"
    rows: dict[str, int] = {}  # rows of every table of settings ("| variable | ...")
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for table in re.findall(r"^\| variable \| default \|.*\n(?:\|.*\n)*", page.read_text(),
                                re.M):
            for name in re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", table, re.M):
                rows[name] = rows.get(name, 0) + 1
    assert {s.name: 1 for s in SETTINGS} == {n: c for n, c in rows.items() if n in BY_NAME}


def test_config_check_names_a_key_or_the_file(tmp_path):
    """`kint config check` says which to fix: the key it names, or, when the file is not
    TOML at all (no key to name), the file."""
    box = make_sandbox(tmp_path / "m")
    box.kint_home.mkdir(mode=0o700)
    path = box.kint_home / "config.toml"
    for text, hint in (("quiet_seconds = \"later\"\n", "hint: fix that key;"),
                       ("not toml [[[\n", "hint: fix the file;")):
        path.write_text(text)
        path.chmod(0o600)
        out = box.kint("config", "check")
        assert out.returncode == 2 and out.stderr.splitlines()[1].startswith(hint), out.stderr


# -- v0.3.0's macOS Keychain endpoint --------------------------------------------------------


ALCHEMY_KEY = "aLcH3my-key_0123456789"


@pytest.fixture
def macos_keychain(tmp_path, monkeypatch):
    """The macOS Keychain cannot be had on Linux, so two stand-ins (a mock, said here): a
    `security` tool in place of /usr/bin/security that answers for the item `dev.api.alchemy` as
    macOS's tool would (`-w` prints the password; a missing item exits 44), and `sys.platform` set
    to darwin, as tests/test_custody_v030.py does for the session secret."""
    import importlib

    from kint.chain import keychain_rpc
    from kint.custody import local_secret

    # Imported on the real platform first: web3's import (pydantic, zoneinfo) reads
    # sysconfig, which looks for darwin's build data once sys.platform says darwin, and the
    # test failed run alone, where an earlier test of the file had imported it.
    importlib.import_module("kint.chain.config")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    item = tmp_path / "alchemy-item"
    tool = bin_dir / "security"
    tool.write_text("#!/bin/sh\n"
                    f'[ "$*" = "find-generic-password -s dev.api.alchemy -a api-key -w" ] '
                    f"|| exit 2\n[ -f {item} ] || exit 44\ncat {item}\n")
    tool.chmod(0o755)
    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    monkeypatch.setattr(keychain_rpc, "SECURITY_TOOL", str(tool))
    monkeypatch.setenv("KINT_HOME", str(home))
    for name in ("KINT_RPC_URL", "KINT_RPC_URL_2", "KINT_NO_KEYCHAIN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(local_secret.sys, "platform", "darwin")
    keychain_rpc.forget()
    yield home, item
    keychain_rpc.forget()


def test_on_macos_the_keychains_alchemy_key_names_the_primary_endpoint(macos_keychain,
                                                                      monkeypatch):
    """v0.3.0 (10-configuration.md): with KINT_RPC_URL unset, the primary endpoint is the
    Alchemy key in the Keychain item `dev.api.alchemy`, else mainnet.base.org; the second
    opinion is then mainnet.base.org; KINT_NO_KEYCHAIN=1 skips the item."""
    from kint.chain import keychain_rpc
    from kint.chain.config import load_chain_config
    from kint.custody import local_secret

    home, item = macos_keychain
    assert load_chain_config(home).rpc_urls == ("https://mainnet.base.org",
                                                "https://base-rpc.publicnode.com")
    item.write_text(ALCHEMY_KEY + "\n")
    keychain_rpc.forget()
    chain = load_chain_config(home)
    assert chain.rpc_urls == (f"https://base-mainnet.g.alchemy.com/v2/{ALCHEMY_KEY}",
                              "https://mainnet.base.org")
    assert (chain.rpc_source, chain.rpc_where) == ("macOS Keychain", "dev.api.alchemy")
    monkeypatch.setenv("KINT_RPC_URL", "https://rpc.example/")
    assert load_chain_config(home).rpc_urls[0] == "https://rpc.example/"  # a setting beats it
    monkeypatch.delenv("KINT_RPC_URL")
    monkeypatch.setenv("KINT_NO_KEYCHAIN", "1")
    assert load_chain_config(home).rpc_urls[0] == "https://mainnet.base.org"
    monkeypatch.delenv("KINT_NO_KEYCHAIN")
    monkeypatch.setattr(local_secret.sys, "platform", "linux")  # no Keychain: never asked
    keychain_rpc.forget()
    assert load_chain_config(home).rpc_urls[0] == "https://mainnet.base.org"
    # An item that holds no API key is said, not used (and not printed).
    monkeypatch.setattr(local_secret.sys, "platform", "darwin")
    item.write_text("not a key / at all\n")
    keychain_rpc.forget()
    assert load_chain_config(home).rpc_urls[0] == "https://mainnet.base.org"


def test_the_keychains_endpoint_is_named_where_a_hint_sends_the_user(macos_keychain,
                                                                    monkeypatch):
    """An endpoint from the Keychain's Alchemy key: a hint that sends the user to check the
    endpoint names the Keychain's item (and KINT_RPC_URL unset), and one that asks for
    another endpoint (a stale head among them) names KINT_RPC_URL as what takes its place,
    and where the process that read the Keychain sees it. Both said plain "KINT_RPC_URL"
    (review39b S2), which is unset here. kint-server tells the agent to stop and hand it to
    the human: the Keychain is no step of its own. The Keychain is a stand-in (the fixture):
    no CLI on this platform reads it, so the hints are built in this process."""
    from kint.chain import keychain_rpc
    from kint.chain.config import load_chain_config
    from kint.custody import local_secret

    home, item = macos_keychain
    item.write_text(ALCHEMY_KEY + "\n")
    keychain_rpc.forget()
    chain = load_chain_config(home)
    # Back on this platform before what follows is imported (urllib's proxies on darwin).
    monkeypatch.setattr(local_secret.sys, "platform", "linux")
    from kint.agent_server.agent_hints import agent_error
    from kint.chain.endpoint_source import other_endpoint
    from kint.client_errors import KintError
    from kint.settings import loader as settings_loader
    from kint.tenant_worker.rpc_hint import endpoint_hint, stale_hint, stale_journal_hint

    keychain = ("the macOS Keychain's Alchemy key (item `dev.api.alchemy`, read while "
                "KINT_RPC_URL is unset)")
    assert endpoint_hint(chain) == (f"check {keychain} and KINT_RPC_URL_2 and the endpoint, "
                                    f"then try again")
    # A command's own read: config.toml, which it and a connected space's worker both read.
    assert other_endpoint(chain) == ("KINT_RPC_URL (`rpc_url` in config.toml), which takes "
                                     "the place of the macOS Keychain's Alchemy key, or `kint "
                                     "connect --rpc-urls URL` for this space alone")
    # A worker's (the supervisor's processes): where the running supervisor sees it, where
    # it named no place, and one the user's own shell is not (review39e S2).
    replaced = ("KINT_RPC_URL (`rpc_url` in config.toml, or the supervisor's environment), "
                "which takes the place of the macOS Keychain's Alchemy key")
    monkeypatch.setattr(settings_loader._process, "daemon", True)
    assert other_endpoint(chain).startswith(replaced + ", or `kint connect"), \
        other_endpoint(chain)
    # A stale head: another endpoint, not the key, which reaches one fixed URL whose lag no
    # key mends; it said "check the macOS Keychain's Alchemy key" (review39e S1).
    stale = stale_hint(chain)
    assert stale == (f"check KINT_RPC_URL_2, or set {replaced}: the endpoint answered with an "
                     f"old or different head"), stale
    said = agent_error("memory_pull", KintError("STALE_RPC", "an old head", stale)).hint
    assert said == f"stop and tell the human: {stale}", said
    journal = stale_journal_hint(chain)
    assert journal == f"check KINT_RPC_URL_2, or set {replaced}, then run `kint pull`", journal


def test_the_size_trigger_pushes_only_past_its_bytes_as_in_v030(tmp_path, monkeypatch):
    """v0.3.0 (10-configuration.md, "The watcher"): more than KINT_SIZE_TRIGGER_BYTES of
    estimated change, at 400 bytes a row, pushes without waiting for quiet (82 rows at the
    default 32768). A change of exactly the trigger waits. The store file and the watcher
    are real; the unanchored counts are handed to it, the rule under test being the
    comparison (the count itself is the worker's diff, tests/test_watcher_progress.py)."""
    from kint.tenant_worker.watcher import Watcher

    db = write_store(tmp_path / "memory.db")
    monkeypatch.setenv("KINT_SIZE_TRIGGER_BYTES", "4000")
    monkeypatch.setenv("KINT_QUIET_SECONDS", "300")
    rows, pushed = [10], []
    watcher = Watcher(str(db), lambda: (rows[0], 0), pushed.append)
    now = time.monotonic()
    os.utime(db, ns=(time.time_ns(), time.time_ns() + 10**9))  # a store change
    watcher.tick(now)
    assert watcher.dirty and pushed == []  # 10 rows: 4000 bytes, not more than 4000
    rows[0] = 11
    watcher.tick(now + 61)  # the next count, a minute on (the quiet period is 300 s)
    assert pushed == ["watcher"]


# Every variable v0.3.0's 10-configuration.md documents, with its documented default (None:
# unset or derived) and bound: the specification of the settings users meet.
V030 = {
    "KINT_HOME": ("~/.kint", None), "KINT_TENANT": (None, None),
    "SIBYL_MEMORY_DB": ("~/.sibyl-memory/memory.db", None),
    "KINT_RPC_URL": ("https://mainnet.base.org", None), "KINT_RPC_URL_2": (None, None),
    "KINT_ALLOW_SINGLE_RPC": (False, None),
    "KINT_CONTRACT": ("0xa22E03f7a4145Bf4909a83595C90a38E14d79600", None),
    "KINT_RPC_TIMEOUT": (10, None), "KINT_NO_KEYCHAIN": (False, None),
    "KINT_SESSION_PASSPHRASE": (None, None), "KINT_KEY_TTL": ("24h", None),
    "KINT_OFFLINE": (False, None), "KINT_OWNER_KEY": (None, None),
    "KINT_QUIET_SECONDS": (300, None), "KINT_POLL_SECONDS": (15, 1),
    "KINT_SIZE_TRIGGER_BYTES": (32768, None), "KINT_NO_WATCHER": (False, None),
    "KINT_BOOTSTRAP_SECONDS": (20, None),
    "SIBYL_CREDENTIALS": ("~/.sibyl-memory/credentials.json", None),
    "HERMES_HOME": ("~/.hermes", None),
}


def test_every_v030_variable_is_a_setting_with_its_default_and_each_departure_is_documented():
    """Each variable v0.3.0 documents is a setting here with v0.3.0's default and bound (a
    floor v0.3.0 does not have only where the departures say so); each setting is either
    one of v0.3.0's or marked as kint's own; docs/settings.md lists every departure."""
    from kint.settings.schema import EXTENSIONS, V030_DEPARTURES

    for name, (default, floor) in V030.items():
        setting = BY_NAME[name]
        assert setting.default == default, name
        if floor is not None:
            assert setting.minimum == floor, name
        else:  # a floor v0.3.0 does not have is a departure, and said as one
            assert not setting.minimum or name in V030_DEPARTURES, name
    assert set(BY_NAME) == set(V030) | EXTENSIONS and not set(V030) & EXTENSIONS
    assert set(V030_DEPARTURES) <= set(V030)
    text = (ROOT / "docs" / "settings.md").read_text()
    section = text[text.index("### Where a setting departs from kint v0.3.0"):]
    # Each departure is a list item, wrapped at the docs' width: its lines joined as one.
    items = " ".join(ln.strip() if ln.startswith("  ") else "\n" + ln
                     for ln in section.splitlines()).splitlines()
    for name, note in V030_DEPARTURES.items():
        line = next(ln for ln in items if f"`{name}`" in ln)
        assert line.strip().endswith(f": {note}."), name
    assert all(f"`{name}`" in section for name in EXTENSIONS)


def test_a_space_table_may_still_give_the_single_rpc_switch(tmp_path):
    """KINT_ALLOW_SINGLE_RPC is now the pulling call's own (v0.3.0), yet a config.toml that
    set it in a space's table, when that was the only place, still loads, and that space's
    pulls still trust one endpoint unless the call says otherwise."""
    cfg = parse_config(tmp_path / "config.toml",
                       b'[spaces."work"]\nallow_single_rpc = true\n')
    switch = BY_NAME["KINT_ALLOW_SINGLE_RPC"]
    assert loader.resolve(switch, cfg, environ={}, space=("work", "ab" * 8)).value is True
    assert loader.resolve(switch, cfg, environ={}, space=("home", "cd" * 8)).value is False
    with pytest.raises(ConfigError, match="is not a per-space setting"):  # others stay refused
        parse_config(tmp_path / "config.toml", b'[spaces."work"]\noffline = true\n')


def test_a_security_tool_first_on_path_does_not_choose_the_endpoint(macos_keychain,
                                                                    monkeypatch, tmp_path):
    """Only macOS's own /usr/bin/security is asked: another `security` first on PATH would
    choose the primary endpoint (and see every request's traffic)."""
    from kint.chain import keychain_rpc
    from kint.chain.config import load_chain_config

    home, item = macos_keychain
    item.write_text(ALCHEMY_KEY + "\n")
    monkeypatch.setenv("PATH", f"{Path(keychain_rpc.SECURITY_TOOL).parent}:{os.environ['PATH']}")
    monkeypatch.setattr(keychain_rpc, "SECURITY_TOOL", str(tmp_path / "no-such-security"))
    keychain_rpc.forget()
    assert load_chain_config(home).rpc_urls[0] == "https://mainnet.base.org"


@pytest.mark.parametrize("primary, second", [
    ("https://mainnet.base.org", "https://base-rpc.publicnode.com"),
    ("https://mainnet.base.org/", "https://base-rpc.publicnode.com"),
    ("https://base.example/v2", "https://mainnet.base.org"),
])
def test_the_second_opinion_is_derived_from_the_primary_as_in_v030(monkeypatch, tmp_path,
                                                                   primary, second):
    """v0.3.0 (10-configuration.md, "Every variable"): with KINT_RPC_URL_2 unset, the second
    RPC is publicnode's when the primary is mainnet.base.org, with or without a trailing
    slash, and mainnet.base.org otherwise; set, it is taken as given."""
    from kint.chain.config import second_rpc

    monkeypatch.setenv("KINT_HOME", str(tmp_path))
    monkeypatch.delenv("KINT_RPC_URL_2", raising=False)
    assert second_rpc(primary) == second
    monkeypatch.setenv("KINT_RPC_URL_2", "https://other.example")
    assert second_rpc(primary) == "https://other.example"
