"""`kint authorize page`: the one-shot loopback page, its server's checks, and the page in a
real headless Chromium.

The browser is Debian's chromium (/usr/bin/chromium, installed by `make browser`), driven by
the pinned npm playwright-core from tests/browser/drive_page.mjs; it never downloads a
browser of its own. A test EIP-1193 wallet is injected into the page before its scripts run:
it announces itself with EIP-6963 (or sets only window.ethereum), and sends the page's
transaction on the session's devchain from the owner (impersonated on anvil by the test).
Every request that would leave loopback is aborted by the harness and reported, so a test
also proves the page loads nothing from anywhere else.
"""

from __future__ import annotations

import hashlib
import json
import re
import select
import shutil
import socket
import struct
import subprocess
import threading
import time
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from authorize_support import Machine, new_machine
from chain_machines import connect_with_wallet
from conftest import KINT
from kint.authorize_page.handler import content_security_policy
from kint.authorize_page.server import SDK_FILE, SDK_SHA256, AuthorizePage, PageRequest

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "tests" / "browser" / "drive_page.mjs"
CHROMIUM = Path("/usr/bin/chromium")
STATIC = ROOT / "kint" / "authorize_page" / "static"
OWNER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
KEY = "0x671163BFA6a95ecC7Aef91e6056d1Af37d710A42"
TEST_WALLET = "Kint Test Wallet"


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not CHROMIUM.exists():
        return (f"Debian's chromium is not installed at {CHROMIUM}: `make browser` installs it "
                f"(make test runs it)")
    if shutil.which("node") is None:
        return "node is not on PATH"
    if not (ROOT / "node_modules" / "playwright-core" / "package.json").exists():
        return "the pinned playwright-core is not installed: run `make node`"
    return None


needs_browser = pytest.mark.skipif(browser_missing() is not None,
                                   reason=browser_missing() or "")


def drive(url: str, steps: list[dict], rpc: str = "http://127.0.0.1:9", accounts=(),
          chain_id: int = 31337, legacy: bool = False, timeout: float = 240) -> dict:
    """Run the Chromium driver; its JSON report (an `error` key fails the test)."""
    cfg = {"url": url, "chromium": str(CHROMIUM), "rpc": rpc, "steps": steps,
           "wallet": {"accounts": list(accounts), "chainId": hex(chain_id), "name": TEST_WALLET,
                      "rdns": "dev.kint.test-wallet", "legacy": legacy,
                      "uuid": "6f1f3c1e-5b1a-4c3e-9d8e-000000000001"}}
    out = subprocess.run(["node", str(DRIVER), json.dumps(cfg)], cwd=ROOT, text=True,
                         capture_output=True, timeout=timeout)
    assert out.stdout.strip(), f"the driver printed nothing; stderr:\n{out.stderr}"
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert "error" not in report, report["error"] + "\n" + out.stderr
    return report


def request_for(chain_id: int = 31337) -> PageRequest:
    return PageRequest(owner=OWNER, key=KEY, expiry=1_900_000_000, chain_id=chain_id,
                       anchor="0x5FbDB2315678afecb367f032d93F642f64180aa3",
                       calldata="0x580da310" + "00" * 64)


@pytest.fixture
def page():
    refusals: list[str] = []
    with AuthorizePage(request_for(), on_refused=refusals.append) as p:
        p.refusals = refusals  # type: ignore[attr-defined]
        yield p


def post(page: AuthorizePage, *, token: str | None = None, origin: str | None = "same",
         site: str | None = "same-origin", ctype: str = "application/json",
         body: bytes | None = None, host: str | None = None) -> requests.Response:
    headers = {"Content-Type": ctype}
    if origin is not None:
        headers["Origin"] = page.origin if origin == "same" else origin
    if site is not None:
        headers["Sec-Fetch-Site"] = site
    if host is not None:
        headers["Host"] = host
    if body is None:
        body = json.dumps({"tx": "0x" + "ab" * 32, "account": OWNER}).encode()
    return requests.post(f"{page.origin}/kint/{token or page.token}/result", data=body,
                         headers=headers, timeout=5)


def port_closed(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) != 0


# -- the server -------------------------------------------------------------------------------


def test_the_page_is_served_under_its_token_with_a_strict_csp(page):
    # v0.3.0's URL (02-quickstart.md, step 4): /kint/<token>, no trailing slash.
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/kint/[0-9a-f]{64}", page.url)
    reply = requests.get(page.url, timeout=5)
    assert reply.status_code == 200
    csp = reply.headers["Content-Security-Policy"]
    nonce = re.search(r"script-src 'nonce-([^']+)'", csp).group(1)
    assert csp == content_security_policy(nonce)
    assert "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    for name, value in {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
                        "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"}.items():
        assert reply.headers[name] == value
    html = reply.text
    base = f"/kint/{page.token}"
    assert f'<script src="{base}/app.js" nonce="{nonce}">' in html
    scripts = re.findall(r"<script[^>]*\bsrc=\"([^\"]+)\"", html)
    assert scripts == [f"{base}/app.js"], "every script is the package's own, served here"
    assert f'href="{base}/style.css"' in html
    config = json.loads(re.search(r'id="kint-request">(.*?)</script>', html).group(1))
    assert config["owner"] == OWNER and config["key"] == KEY and config["chainId"] == 31337
    assert config["resultPath"] == f"{base}/result"
    assert config["sdk"]["src"] == f"{base}/{SDK_FILE}"
    # Two loads, two nonces.
    again = requests.get(page.url, timeout=5).headers["Content-Security-Policy"]
    assert again != csp

    for name, ctype in (("app.js", "text/javascript"), ("style.css", "text/css"),
                        (SDK_FILE, "text/javascript")):
        asset = requests.get(f"{page.url}/{name}", timeout=5)
        assert asset.status_code == 200 and asset.headers["Content-Type"].startswith(ctype)
    sdk = requests.get(f"{page.url}/{SDK_FILE}", timeout=5).content
    assert hashlib.sha256(sdk).hexdigest() == SDK_SHA256
    assert config["sdk"]["integrity"].startswith("sha384-")

    for path in ("/", "/kint", "/kint/", f"/kint/{'0' * 64}", f"/kint/{'0' * 64}/app.js",
                 f"/kint/{page.token}/nope", f"/kint/{page.token}/", f"/kint/{page.token}x",
                 f"/kint/{page.token}/app.js/", f"/x/{page.token}"):
        assert requests.get(page.origin + path, timeout=5).status_code == 404, path
    wrong_host = requests.get(page.url, headers={"Host": f"evil.example:{page.port}"}, timeout=5)
    assert wrong_host.status_code == 403
    assert page.wait(0.05) is None


def test_the_token_straight_after_the_port_is_a_bare_404(page):
    """The paths the page had before it moved under /kint/: nothing is served there, a
    result posted there is not taken, and none of it prints on the terminal."""
    for path in (f"/{page.token}/", f"/{page.token}", f"/{page.token}/app.js",
                 f"/{page.token}/{SDK_FILE}"):
        assert requests.get(page.origin + path, timeout=5).status_code == 404, path
    old_result = requests.post(
        f"{page.origin}/{page.token}/result", timeout=5,
        data=json.dumps({"tx": "0x" + "ab" * 32, "account": OWNER}).encode(),
        headers={"Origin": page.origin, "Sec-Fetch-Site": "same-origin",
                 "Content-Type": "application/json"})
    assert old_result.status_code == 404
    assert page.wait(0) is None and page.refusals == []


def test_forged_results_are_refused_and_the_real_one_accepted(page):
    forged = {
        "wrong token": post(page, token="f" * 64),
        "wrong Origin": post(page, origin="http://evil.example"),
        "another loopback port": post(page, origin=f"http://127.0.0.1:{page.port + 1}"),
        "localhost Origin": post(page, origin=f"http://localhost:{page.port}"),
        "no Origin": post(page, origin=None),
        "cross-site": post(page, site="cross-site"),
        "same-site": post(page, site="same-site"),
        "no Sec-Fetch-Site": post(page, site=None),
        "text/plain": post(page, ctype="text/plain"),
        "not JSON": post(page, body=b"{tx"),
        "not the owner": post(page, body=json.dumps({"tx": "0x01",
                                                     "account": "0x" + "11" * 20}).encode()),
        "bad tx": post(page, body=json.dumps({"tx": "<script>", "account": OWNER}).encode()),
        "wrong Host": post(page, host="evil.example"),
    }
    expected = {"wrong token": 404, "text/plain": 415, "not JSON": 400, "not the owner": 400,
                "bad tx": 400}
    for what, reply in forged.items():
        assert reply.status_code == expected.get(what, 403), what
        assert page.wait(0) is None, f"{what} was taken as the result"
    assert len(page.refusals) == len(forged) - 1  # a wrong token is not even a request for it
    assert any("Origin 'http://evil.example'" in r for r in page.refusals)
    assert any("Sec-Fetch-Site 'cross-site' is not same-origin" in r for r in page.refusals)

    assert post(page).status_code == 200
    result = page.wait(1)
    assert result is not None and result.tx == "0x" + "ab" * 32 and result.account == OWNER
    assert post(page).status_code == 409, "one result only"
    port = page.port
    page.close()
    assert port_closed(port)


def test_a_request_without_the_token_prints_nothing_whatever_its_host(page):
    """Any local user can reach the port, but only one who knows the token can put a line
    on the waiting terminal: the token is checked before the Host."""
    evil = {"Host": "evil.example"}
    anonymous = [
        requests.get(page.origin + "/", headers=evil, timeout=5),
        requests.get(f"{page.origin}/kint/{'0' * 64}", headers=evil, timeout=5),
        requests.get(f"{page.origin}/kint/{'0' * 64}/app.js", headers=evil, timeout=5),
        requests.get(f"{page.origin}/{page.token}/", headers=evil, timeout=5),
        post(page, token="f" * 64, host="evil.example"),
        post(page, token="f" * 64, host=f"127.0.0.1:{page.port + 1}"),
    ]
    assert [r.status_code for r in anonymous] == [404] * len(anonymous)
    assert page.refusals == []
    # With the token, a foreign Host is still refused, and said so.
    rebound = requests.get(page.url, headers=evil, timeout=5)
    assert rebound.status_code == 403
    assert page.refusals == ["Host 'evil.example' is not this server's"]
    assert page.wait(0) is None


def test_the_cli_prints_v030s_lines_for_a_base_account_then_gives_up_at_the_timeout(
        own_machine):
    """A space connected with --smart-account (a Base Account: its vault key is a
    passphrase) is authorized from the page, and the command says so in v0.3.0's words
    (02-quickstart.md, step 4), the URL under /kint/."""
    m = own_machine()
    owner = m.owner(0).address  # a Base Account that has never sent a transaction
    connected = m.kint("connect", "--owner", owner, "--smart-account", "--passphrase-stdin",
                       input="correct horse battery\n")
    assert connected.returncode == 0, connected.stdout + connected.stderr
    proc = subprocess.Popen([KINT, "authorize", "page"], text=True,
                            env={**m.sb.env, "KINT_AUTHORIZE_PAGE_TIMEOUT": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2, stdout + stderr
    first, url_line = stdout.splitlines()[:2]
    assert first == (f"open this page in the browser where your Base Account is logged in "
                     f"(owner {owner}):")
    assert re.fullmatch(r"  http://127\.0\.0\.1:\d+/kint/[0-9a-f]{64}", url_line), url_line
    assert "no result from the page within 1 s; the page server is closed" in stderr
    assert port_closed(urlsplit(url_line.strip()).port)


def test_the_static_files_ship_and_load_nothing_remote():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "static/*" in project["tool"]["setuptools"]["package-data"]["kint.authorize_page"]
    assert hashlib.sha256((STATIC / SDK_FILE).read_bytes()).hexdigest() == SDK_SHA256
    assert "Apache License" in (STATIC / SDK_FILE.replace(".min.js", ".LICENSE.txt")).read_text()
    for name in ("page.html", "app.js", "style.css"):
        text = (STATIC / name).read_text()
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, name


# -- the page in Chromium ---------------------------------------------------------------------


class PageRun:
    """`kint authorize page` as a user runs it: the URL read from its output as it prints."""

    def __init__(self, m: Machine, owner: str) -> None:
        env = {**m.sb.env, "KINT_AUTHORIZE_POLL_SECONDS": "0.2", "KINT_AUTHORIZE_POLL_COUNT": "100"}
        self.proc = subprocess.Popen([KINT, "authorize", "page", "--owner", owner], text=True,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.stderr: list[str] = []
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()
        self.stdout = [self.proc.stdout.readline(), self.proc.stdout.readline()]
        self.url = self.stdout[1].strip()
        assert self.url.startswith("http://127.0.0.1:"), "".join(self.stdout + self.stderr)

    def finish(self, timeout: float = 60) -> tuple[int, str, str]:
        rest = self.proc.stdout.read()
        self.proc.wait(timeout)
        return self.proc.returncode, "".join(self.stdout) + rest, "".join(self.stderr)


@pytest.fixture
def own_machine(tmp_path, chain_home):
    """A machine of the test's own, its supervisor stopped after the test: `kint authorize`
    reads the chain through the space's worker, so it starts one (left running, it
    outlived the suite)."""
    made: list[Machine] = []

    def make() -> Machine:
        made.append(new_machine(tmp_path / "machine", chain_home))
        return made[-1]

    yield make
    for machine in made:
        machine.sb.shutdown()


@pytest.fixture
def browser_machine(own_machine):
    reason = browser_missing()
    if reason:
        pytest.skip(reason)
    return own_machine()


def impersonated_owner(m: Machine):
    owner = m.owner()
    m.rpc("anvil_impersonateAccount", [owner.address])
    return owner


@needs_browser
def test_the_page_authorizes_the_session_key_in_chromium(browser_machine):
    m = browser_machine
    owner = impersonated_owner(m)
    connect_with_wallet(m.sb, owner)  # an EOA owner, connected here with its signature
    run = PageRun(m, owner.address)
    # Not v0.3.0's Base Account line: this owner is an EOA in a browser-extension wallet.
    assert run.stdout[0] == (f"open this page in the browser whose wallet holds the owner "
                             f"account (owner {owner.address}):\n")
    assert re.fullmatch(r"  http://127\.0\.0\.1:\d+/kint/[0-9a-f]{64}\n", run.stdout[1])
    try:
        report = drive(run.url, rpc=m.url, accounts=[owner.address], steps=[
            {"do": "forge", "target": run.url + "/result",
             "body": json.dumps({"tx": "0x" + "00" * 32, "account": owner.address})},
            {"do": "click", "wallet": TEST_WALLET},
            {"do": "wait_state", "states": ["sent", "refused", "error"]},
        ])
        code, stdout, stderr = run.finish()
    finally:
        m.rpc("anvil_stopImpersonatingAccount", [owner.address])
    assert report["steps"][-1]["state"] == "sent", report
    assert code == 0, stdout + stderr
    # kint v0.3.0's line once canWrite turns true (02-quickstart.md).
    assert re.search(rf"^authorized: {m.key} may push under {owner.address} until "
                     rf"\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", stdout, re.M), stdout
    # The forged result from another origin was refused by the server; the real one taken.
    assert "refused a result sent to the page server: Origin 'http://localhost:" in stderr
    assert m.anchor.can_write(owner.address, m.key)
    sends = [c for c in report["calls"] if c["method"] == "eth_sendTransaction"]
    assert len(sends) == 1
    tx = sends[0]["params"][0]
    assert tx["from"].lower() == owner.address.lower() and tx["to"] == m.anchor.address
    expiry = m.anchor.session_key_expiry(owner.address, m.key)
    assert tx["data"] == "0x" + m.anchor.encode_set_session_key(m.key, expiry).hex()
    assert report["csp"] == [] and report["blocked"] == [], report
    assert not [c for c in report["console"] if c.startswith("error")], report["console"]
    assert port_closed(urlsplit(run.url).port), "the server is gone after its one result"


@needs_browser
def test_the_page_refuses_an_account_that_is_not_the_owner(browser_machine):
    m = browser_machine
    owner, stranger = impersonated_owner(m), m.owner()
    run = PageRun(m, owner.address)
    # Not connected here: kint cannot tell a Base Account from an EOA, and names neither.
    assert run.stdout[0] == (f"open this page in the browser whose wallet holds the owner "
                             f"account (owner {owner.address}):\n")
    try:
        report = drive(run.url, rpc=m.url, accounts=[stranger.address], legacy=True, steps=[
            {"do": "click", "wallet": "window.ethereum"},
            {"do": "wait_state", "states": ["refused", "sent", "error"]},
            {"do": "snapshot"},
            {"do": "set_accounts", "accounts": [owner.address]},
            {"do": "click", "wallet": "window.ethereum"},
            {"do": "wait_state", "states": ["sent", "refused", "error"]},
        ])
        code, stdout, stderr = run.finish()
    finally:
        m.rpc("anvil_stopImpersonatingAccount", [owner.address])
    refusal, snapshot = report["steps"][1], report["steps"][2]
    assert refusal["state"] == "refused", report
    assert (f"connected {stranger.address}, not the owner {owner.address}. Nothing was sent."
            in refusal["status"])
    assert snapshot["calls"] == ["eth_requestAccounts"], "nothing was sent"
    assert snapshot["wallets"][0] == "Browser wallet (window.ethereum)"
    # Once the wallet switches to the owner, the same page goes through.
    assert report["steps"][-1]["state"] == "sent", report
    assert code == 0, stdout + stderr
    assert m.tx_count(stranger.address) == 0 and m.tx_count(owner.address) == 1
    assert m.anchor.can_write(owner.address, m.key)


@needs_browser
def test_the_bundled_base_account_sdk_loads_from_loopback_under_the_csp():
    with AuthorizePage(request_for(chain_id=8453)) as page:
        report = drive(page.url, chain_id=8453, steps=[
            {"do": "snapshot"},
            {"do": "click", "wallet": "Base Account"},
            {"do": "wait_popup", "prefix": "https://keys.coinbase.com/"},
            {"do": "snapshot"},
        ])
        assert page.wait(0) is None
    before, after = report["steps"][0], report["steps"][-1]
    assert before["globals"]["createBaseAccountSDK"] == "undefined", "loaded only on demand"
    assert after["globals"]["createBaseAccountSDK"] == "function"
    assert report["csp"] == [], report["csp"]
    # The SDK's only way out was its wallet popup, which the harness stopped at the door.
    assert report["blocked"] and all(u.startswith("https://keys.coinbase.com/connect?")
                                     for u in report["blocked"]), report["blocked"]
    assert "127.0.0.1" not in "".join(u.split("origin=")[0] for u in report["blocked"])
    assert not any(page.token in u for u in report["blocked"]), "the token never leaves"
    assert report["calls"] == []


def test_a_connection_that_sends_nothing_is_closed_and_the_page_still_answers():
    """Any local process can connect before it knows the token: one that sends nothing, or
    less body than it announced, is cut off after the request timeout, never holding a
    thread of the CLI for the page's whole wait."""
    with AuthorizePage(request_for(), request_timeout_s=1) as page:
        idle = socket.create_connection(("127.0.0.1", page.port), timeout=30)
        short = socket.create_connection(("127.0.0.1", page.port), timeout=30)
        short.sendall(f"POST /kint/{page.token}/result HTTP/1.1\r\nHost: 127.0.0.1:{page.port}\r\n"
                      f"Origin: {page.origin}\r\nSec-Fetch-Site: same-origin\r\n"
                      f"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{".encode())
        try:
            assert idle.recv(1024) == b"", "the idle connection is closed, unanswered"
            assert short.recv(1024) == b"", "the short body is closed, unanswered"
        finally:
            idle.close()
            short.close()
        assert page.wait(0) is None
        assert post(page).status_code == 200


def test_a_connection_that_sends_a_byte_now_and_then_is_closed_at_its_deadline():
    """A per-read timeout alone is reset by every byte: a local process that sends its
    request line a byte every 0.3 s would keep a thread of the CLI for the page's whole
    wait. The request has the timeout in all, from the connection: it is cut off well
    before the trickle of a hundred bytes ends."""
    with AuthorizePage(request_for(), request_timeout_s=1) as page:
        trickle = socket.create_connection(("127.0.0.1", page.port), timeout=30)
        request = f"GET /kint/{page.token} HTTP/1.1\r\n".encode() + b"X-Slow: " + b"a" * 200
        closed_after = None
        try:
            for sent in range(100):
                try:
                    trickle.sendall(request[sent:sent + 1])
                except OSError:  # reset or broken pipe: the server has closed it
                    closed_after = sent
                    break
                readable, _, _ = select.select([trickle], [], [], 0.3)
                if readable:
                    assert trickle.recv(1024) == b"", "cut off, unanswered"
                    closed_after = sent
                    break
        finally:
            trickle.close()
        assert closed_after is not None, "the trickling connection was never closed"
        assert page.wait(0) is None
        assert post(page).status_code == 200


def test_a_connection_reset_mid_request_prints_nothing_on_the_terminal(capfd):
    """The page's server prints on the waiting command's terminal only what the command
    says (a refusal of a request that knew the token). A local process that does not know
    the token, connecting and resetting half-way through its headers, made socketserver
    print a traceback there, once per connection; now nothing, and the page still answers."""
    threads = threading.active_count()
    with AuthorizePage(request_for()) as page:
        for _ in range(3):
            rude = socket.create_connection(("127.0.0.1", page.port), timeout=30)
            rude.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # the headers never end
            rude.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            rude.close()  # linger 0: a reset, not a close
        assert post(page).status_code == 200
    deadline = time.monotonic() + 60
    while threading.active_count() > threads and time.monotonic() < deadline:
        time.sleep(0.05)  # every connection's handler has ended, and said what it would
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_ctrl_c_while_the_page_waits_is_an_interruption(own_machine):
    """Ctrl-C while the page waits for the wallet ends as every command's Ctrl-C does
    (INTERRUPTED, exit 130: docs/commands.md, "Exit status"), the server closed; it was
    refused as a TIMEOUT with exit 2, as if the page had waited out its 900 s."""
    import signal

    from conftest import wait_until

    m = own_machine()
    run = PageRun(m, m.owner(0).address)
    run.proc.send_signal(signal.SIGINT)
    code, _stdout, _ = run.finish()
    said = wait_until(lambda: "".join(run.stderr) if "hint:" in "".join(run.stderr) else None,
                      timeout=10)
    assert code == 130, (code, said)
    assert "[INTERRUPTED]" in said and "[TIMEOUT]" not in said, said
    assert "the page server is closed" in said, said
    assert port_closed(urlsplit(run.url).port)
