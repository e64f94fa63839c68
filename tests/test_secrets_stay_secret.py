"""No secret leaves where it belongs: after a whole connect, push, verify and restore cycle
on the devchain (real supervisors, workers and anvil), the derive signature, the salting
passphrase, the recovery code, the data key, the session key's private key and the local
secret appear in no log, no other file, no command's output (`--json` included) and no
process's argv. Two files hold a secret by design: local.secret, and RECOVERY-<space>.txt
(the recovery code, as v0.3.0 writes it)."""

from __future__ import annotations

import gzip
import http.server
import json
import os
import time
from functools import partial
from pathlib import Path

from eth_account import Account

from chain_machines import (authorize_machine, make_session_key, ok, recovery_code,
                            wallet_signature)
from conftest import make_sandbox, sibyl_client
from machines_together import new_machines, side_by_side
from rpc_proxy import LoopbackServer, answer_json
from support.procs import processes

SALT = "salty horse battery staple 7731"
HOLDERS = {"local.secret": "local_secret", "RECOVERY-": "recovery_code"}


def _argv_of_processes_naming(homes: list[Path]) -> list[str]:
    """The argv of every process whose environment or argv names one of `homes`."""
    marks = [os.fsencode(str(h)) for h in homes]
    return [argv.replace(b"\0", b" ").decode(errors="replace")
            for _, argv, env in processes() if any(m in env or m in argv for m in marks)]


def _texts_under(root: Path):
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":  # the mirror, the epoch cache: look inside too
            try:
                data += gzip.decompress(data)
            except (OSError, EOFError):
                pass
        yield path, data.decode("latin-1").lower()


def test_no_secret_in_a_log_a_file_an_output_or_an_argv(tmp_path_factory, chain_home):
    a, b = new_machines([tmp_path_factory.mktemp("leak-a"), tmp_path_factory.mktemp("leak-b")],
                        chain_home)
    owner, stranger = Account.create(), Account.create()
    outputs: list[str] = []

    def kint(machine, *argv: str, input: str | None = None):
        out = machine.kint(*argv, input=input)
        outputs.append(f"kint {' '.join(argv)}\n{out.stdout}\n{out.stderr}")
        return out

    try:
        client = sibyl_client(a.sibyl_db, a.tenant)
        client.set_entity("rules", "release-gate", {"rule": "never ship on a Friday"})
        client.storage.close()
        payload = ok(kint(a, "canonical-payload", "--owner", owner.address)).stdout
        signature = wallet_signature(owner, payload)
        sig_file = a.root / "signature.txt"
        sig_file.write_text(signature + "\n")
        connected = json.loads(ok(kint(a, "connect", "--owner", owner.address, "--signature-file",
                                       str(sig_file), "--passphrase-stdin", "--json",
                                       input=SALT + "\n")).stdout)
        authorize_machine(chain_home, owner, connected["session"])
        ok(kint(a, "push", "--json"))  # B's pull below reads this epoch
        code = recovery_code(a, connected["space"])
        wrong = code[:-1] + ("A" if code[-1] != "A" else "B")
        other = wallet_signature(stranger, payload)

        def on_a() -> dict:
            for argv in (("verify", "never ship on a Friday", "--json"), ("status", "--json"),
                         ("doctor", "--json"), ("config", "show", "--json"),
                         ("supervisor", "status", "--json"), ("recovery-code",)):
                kint(a, *argv)
            return json.loads(ok(kint(a, "recovery-code", "--json")).stdout)  # the path only

        def on_b() -> None:
            kint(b, "connect", "--owner", owner.address, "--recovery-code-stdin",
                 input=wrong + "\n")
            kint(b, "connect", "--owner", owner.address, "--signature", "-", input=other + "\n")
            ok(kint(b, "connect", "--owner", owner.address, "--recovery-code-stdin", "--json",
                    input=code + "\n"))
            ok(kint(b, "pull", "--json"))
            ok(kint(b, "verify", "never ship on a Friday", "--json"))

        # Once A's epoch is on chain, what each machine does next needs nothing of the
        # other's: the two run side by side.
        rewritten, _ = side_by_side(on_a, on_b)
        assert rewritten == {"recovery_file": str(a.kint_home /
                                                  f"RECOVERY-{connected['space'][:16]}.txt")}
        argvs = _argv_of_processes_naming([a.kint_home, b.kint_home])
        assert len(argvs) >= 4, argvs  # each machine's supervisor, forkserver, worker(s)

        from kint.custody.local_secret import load_local_secret
        from kint.custody.recovery_code import decode_recovery_code
        from kint.custody.session_key import unlock_session_key

        secrets = {
            "signature": signature.removeprefix("0x"),
            "stranger's signature": other.removeprefix("0x"),
            "salt passphrase": SALT,
            "recovery_code": code,
            "recovery code, undashed": code.replace("-", ""),
            "data key": decode_recovery_code(code).hex(),
            "session private key": unlock_session_key(a.kint_home).key.hex().removeprefix("0x"),
            "local_secret": load_local_secret(a.kint_home).password,
        }
        secrets = {what: value.lower() for what, value in secrets.items()}
        leaks = []
        for root in (a.root, b.root):
            for path, text in _texts_under(root):
                allowed = next((v for k, v in HOLDERS.items() if path.name.startswith(k)), None)
                leaks += [f"{path}: {what}" for what, value in secrets.items()
                          if what != allowed and value in text]
        for text in outputs + argvs:
            leaks += [f"{text.splitlines()[0][:80]}: {what}" for what, value in secrets.items()
                      if value in text.lower()]
        assert leaks == []
    finally:
        a.shutdown()
        b.shutdown()


def test_the_owner_key_stays_out_of_the_supervisor_a_command_starts(sandbox):
    """KINT_OWNER_KEY is read by `kint authorize direct` and `burn-nonce` only. A command
    that starts the supervisor gave it its whole environment: with the owner's key exported
    in the shell, the key lived on in the daemon's environment, and its workers', after
    the command ended. The daemon gets the caller's environment less the secrets no daemon
    reads; KINT_SESSION_PASSPHRASE, which it reads, still reaches it."""
    owner_key = "0x" + Account.create().key.hex().removeprefix("0x")
    out = sandbox.kint("supervisor", "start", env={"KINT_OWNER_KEY": owner_key,
                                                   "KINT_SESSION_PASSPHRASE": SALT})
    assert out.returncode == 0, out.stderr
    daemons = [env for pid, argv, env in processes()
               if b"kint.supervisor" in argv and os.fsencode(str(sandbox.kint_home)) in argv]
    assert len(daemons) == 1, daemons
    environ = dict(item.split(b"=", 1) for item in daemons[0].split(b"\0") if b"=" in item)
    assert b"KINT_OWNER_KEY" not in environ
    assert owner_key.encode() not in daemons[0]
    assert environ[b"KINT_SESSION_PASSPHRASE"] == SALT.encode()
    assert environ[b"KINT_HOME"] == os.fsencode(str(sandbox.kint_home))


# A keyed endpoint's secret parts: a path segment and a query value, as providers put them.
PATH_KEY, QUERY_KEY = "kintpathkey0d1e2f3a4b5c", "kintquerykey9f8e7d6c5b"
SECOND_KEY = "kintsecondkey5a4b3c2d1e"
# KINT_RPC_TIMEOUT while the endpoint hangs: short, since no wait makes it answer (the
# settings' minimum is 0.1 s). The endpoint that answers keeps the sandbox's 1 s, so a
# loaded box still hears its words.
HUNG_RPC_TIMEOUT_S = "0.2"


class _Echo(http.server.BaseHTTPRequestHandler):
    """An endpoint whose refusals quote the URL it was asked at (an error page naming the
    bad key; a JSON-RPC error doing the same), or that never answers."""

    def log_message(self, *args) -> None:  # noqa: D102 - quiet
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        mode = self.server.mode  # type: ignore[attr-defined]
        if mode == "hang":
            time.sleep(3)
            return
        if mode == "page":
            data = f"<html>no such key: {self.path}</html>".encode()
        else:  # "error": one JSON-RPC error object per request
            items = body if isinstance(body, list) else [body]
            errors = [{"jsonrpc": "2.0", "id": item.get("id"),
                       "error": {"code": -32001, "message": f"unknown key {self.path}"}}
                      for item in items]
            data = json.dumps(errors if isinstance(body, list) else errors[0]).encode()
        answer_json(self, data)


def test_a_keyed_endpoints_key_is_in_no_output_log_or_file(tmp_path):
    """v0.3.0 redacts keyed RPC URLs where it prints one, with a known gap: the text of an
    exception raised inside web3 or requests. Here an endpoint on loopback answers every
    call with a page, or a JSON-RPC error, quoting the path and query it was asked at (the
    key), or hangs: the commands that read the chain (session-key show, connect, status,
    doctor) and the ones that name the endpoint (config show, supervisor status) say what
    failed without the key, in text and `--json`, and no log or file under the machine
    holds it. Before, web3's "Could not decode '<the page>'" and the endpoint's error
    object reached the refusal whole."""
    endpoint = LoopbackServer(_Echo)
    server = endpoint.server  # the handler reads its `mode`, set below
    base = endpoint.url
    sb = make_sandbox(tmp_path / "m", KINT_RPC_URL=f"{base}/v2/{PATH_KEY}?apikey={QUERY_KEY}",
                      KINT_RPC_URL_2=f"{base}/{SECOND_KEY}", KINT_RPC_TIMEOUT="1")
    outputs: list[str] = []

    def run(mode: str, *commands: tuple[tuple[str, ...], str | None]) -> None:
        # Hung, each command waits out the RPC timeout at every call it makes (both
        # endpoints, a few calls each): that wait is all a longer timeout would add.
        timeout = {"KINT_RPC_TIMEOUT": HUNG_RPC_TIMEOUT_S} if mode == "hang" else {}
        for argv, given in commands:
            out = sb.kint(*argv, input=given, env=timeout)
            outputs.append(f"{mode}: kint {' '.join(argv)}\n{out.stdout}\n{out.stderr}")

    try:
        make_session_key(sb)
        from kint.custody.vault_message import canonical_payload

        owner = Account.create()
        # The owner's derive signature, checked before connect reads the chain, as a vault
        # passphrase is stretched (a scrypt of ~0.4 s at every connect, for the same
        # refusal): the key does not change what connect says of the chain.
        signed = wallet_signature(owner, canonical_payload(owner.address).decode()) + "\n"
        connect = ("connect", "--owner", owner.address, "--signature", "-")
        # Three lanes at once, each in its order: the commands of the heaviest start-up
        # (web3's imports, the MCP SDK's; `session-key show` reads the chain in the
        # command, each failing call waiting out its tries), the other commands that read
        # the chain, and those the supervisor and the worker answer from what they hold.
        # Most of each lane is a wait on the endpoint, so a third lane overlaps waits where
        # two ran them in turn. None changes what another reads (every connect is refused);
        # the supervisor is started first, so every command meets it running whichever
        # lane gets there first.
        heavy = ((("session-key", "show"), None), (("doctor",), None))
        chain = ((("doctor", "--json"), None), (connect, signed), ((*connect, "--json"), signed))
        light = ((("status",), None), (("status", "--json"), None), (("config", "show"), None),
                 (("config", "show", "--json"), None), (("supervisor", "status", "--json"), None))
        run("page", (("supervisor", "start"), None))
        for mode in ("page", "error", "hang"):
            server.mode = mode  # type: ignore[attr-defined]
            side_by_side(partial(run, mode, *heavy), partial(run, mode, *chain),
                         partial(run, mode, *light))
        said = "\n".join(outputs)
        # The endpoint's words were met and quoted, less the key.
        assert "unknown key <redacted>" in said, said[-3000:]
        secrets = (PATH_KEY, QUERY_KEY, SECOND_KEY)
        leaks = [f"{text.splitlines()[0]}: {key}" for text in outputs for key in secrets
                 if key in text]
        leaks += [f"{path}: {key}" for path, text in _texts_under(sb.root) for key in secrets
                  if key in text and path.name != "config.toml"]
        assert leaks == []
    finally:
        sb.shutdown()
        endpoint.stop()


def test_every_part_redact_url_hides_is_scrubbed_from_an_endpoints_words():
    """The user and password too (no endpoint above can carry them), and a short path
    segment is left alone: it is no key, and would garble every word holding it."""
    from kint.settings.urls import scrub_url_secrets, url_secrets

    url = ("https://kintuser:kintpassword@rpc.example:8545/v2/kintkeypart?key=kintqueryvalue"
           "#kintfrag")
    said = ("POST https://kintuser:kintpassword@rpc.example:8545/v2/kintkeypart?key=kintqueryvalue"
            " failed; key kintqueryvalue unknown; v2 is the API; kintfrag")
    assert scrub_url_secrets(said, url_secrets(url)) == (
        "POST https://<redacted>:<redacted>@rpc.example:8545<redacted> failed; key <redacted> "
        "unknown; v2 is the API; <redacted>")


def test_an_endpoint_urllib_cannot_split_is_shown_without_its_key_and_raises_nothing():
    """A `[` that opens no IPv6 host makes urllib raise. Such a KINT_RPC_URL in the
    environment of the command that started a supervisor failed every `kint supervisor
    status` with INTERNAL (the status lists what it was started with), and its refusal's
    words raised too; neither may show the key it holds."""
    from kint.settings.started_with import started_with
    from kint.settings.urls import redact_url, url_may_hold_a_key, url_secrets

    url = "https://[rpc.example/v2/kintkeypart"
    assert "kintkeypart" not in redact_url(url)
    assert url_may_hold_a_key(url)
    assert url_secrets(url) == [url]
    listed = started_with({"KINT_RPC_URL": url, "KINT_QUIET_SECONDS": "5"})
    assert [e["name"] for e in listed] == ["KINT_RPC_URL", "KINT_QUIET_SECONDS"]
    assert "kintkeypart" not in listed[0]["value"]
