// Drives kint's authorize page in a real headless Chromium (Debian's, never a downloaded
// one), through the pinned playwright-core, for tests/test_authorize_page.py.
//
// Usage: node drive_page.mjs '<json>'; prints one JSON object on stdout.
// The JSON names the page URL, the Chromium binary, the devchain's RPC URL, the test wallet
// (accounts, chain id, how it shows itself) and a list of steps to run in order.
//
// The test wallet is an EIP-1193 provider injected before any page script runs. It
// announces itself with EIP-6963 (or only sets window.ethereum, for the fallback), answers
// accounts and chain id itself, and forwards eth_sendTransaction to the devchain through a
// binding to this process; the devchain sends it from the owner, which the test has made
// an impersonated, funded account there. Every request the page makes of it is recorded.
//
// Every request that would leave 127.0.0.1/localhost is aborted and recorded, so nothing
// the page or the Base Account SDK does can reach the internet.
import { chromium } from "playwright-core";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";

const cfg = JSON.parse(process.argv[2]);
const out = { steps: [], console: [], csp: [], blocked: [], popups: [], calls: [] };

const LAUNCH_ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];

async function devchainRpc(method, params) {
  const reply = await fetch(cfg.rpc, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const body = await reply.json();
  if (body.error) throw Object.assign(new Error(body.error.message), { code: body.error.code });
  return body.result;
}

function walletScript(wallet) {
  // Runs in the page before its own scripts (CDP init script: the page's CSP does not apply).
  return `(() => {
    const cfg = ${JSON.stringify(wallet)};
    let accounts = cfg.accounts.slice();
    const calls = [];
    const provider = {
      isKintTestWallet: true,
      async request({ method, params }) {
        calls.push({ method, params: params === undefined ? null : params });
        switch (method) {
          case "eth_requestAccounts":
          case "eth_accounts":
            return accounts.slice();
          case "eth_chainId":
            return cfg.chainId;
          case "wallet_switchEthereumChain":
            if (params && params[0] && params[0].chainId === cfg.chainId) return null;
            throw Object.assign(new Error("unknown chain"), { code: 4902 });
          case "eth_sendTransaction":
            if (cfg.reject) throw Object.assign(new Error("User rejected the request."), { code: 4001 });
            return await window.kintTestRpc(method, params);
          default:
            return await window.kintTestRpc(method, params || []);
        }
      },
      on() {}, removeListener() {},
    };
    window.__kintTestWallet = { calls, setAccounts(list) { accounts = list.slice(); } };
    document.addEventListener("securitypolicyviolation", (e) => {
      (window.__kintCsp = window.__kintCsp || []).push(e.violatedDirective + " " + e.blockedURI);
    });
    if (cfg.legacy) { window.ethereum = provider; return; }
    const detail = Object.freeze({
      info: Object.freeze({ uuid: cfg.uuid, name: cfg.name, rdns: cfg.rdns,
        icon: "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4=" }),
      provider,
    });
    const announce = () => window.dispatchEvent(new CustomEvent("eip6963:announceProvider", { detail }));
    window.addEventListener("eip6963:requestProvider", announce);
    announce();
  })();`;
}

// A page on another origin (localhost, another port) that posts a forged result to kint.
async function attackerServer(target, body) {
  const html = `<!doctype html><body><script>
    fetch(${JSON.stringify(target)}, { method: "POST", mode: "no-cors",
      headers: { "Content-Type": "application/json" }, body: ${JSON.stringify(body)} })
      .then(() => { document.body.dataset.done = "sent"; },
            (e) => { document.body.dataset.done = "failed " + e; });
  </script></body>`;
  const server = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/html" });
    res.end(html);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return server;
}

const loopback = (url) => /^(https?|wss?):\/\/(127\.0\.0\.1|localhost)(:\d+)?\//.test(url);

const userDataDir = await mkdtemp(join(tmpdir(), "kint-chromium-"));
let context;
try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: cfg.chromium, headless: true, args: LAUNCH_ARGS, timeout: 60_000,
  });
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (loopback(url) || url.startsWith("data:")) return route.continue();
    out.blocked.push(url);
    return route.abort("blockedbyclient");
  });
  await context.exposeFunction("kintTestRpc", devchainRpc);
  await context.addInitScript({ content: walletScript(cfg.wallet) });
  context.on("page", (p) => { if (p.url() !== "about:blank") out.popups.push(p.url()); });
  const page = context.pages()[0] || await context.newPage();
  page.on("popup", (p) => out.popups.push(p.url()));
  page.on("console", (m) => out.console.push(`${m.type()}: ${m.text()}`));
  await page.goto(cfg.url);

  for (const step of cfg.steps) {
    const record = { do: step.do };
    if (step.do === "click") {
      await page.locator(`#wallets button`, { hasText: step.wallet }).click({ timeout: 10_000 });
    } else if (step.do === "wait_state") {
      await page.waitForFunction(
        (states) => states.includes(document.body.dataset.state),
        step.states, { timeout: step.timeout_ms || 30_000 });
      record.state = await page.evaluate(() => document.body.dataset.state);
      record.status = await page.textContent("#status");
    } else if (step.do === "snapshot") {
      record.calls = await page.evaluate(() => window.__kintTestWallet.calls.map((c) => c.method));
      record.wallets = await page.$$eval("#wallets button", (bs) => bs.map((b) => b.textContent));
      record.globals = await page.evaluate(() => ({
        createBaseAccountSDK: typeof window.createBaseAccountSDK }));
    } else if (step.do === "set_accounts") {
      await page.evaluate((list) => window.__kintTestWallet.setAccounts(list), step.accounts);
    } else if (step.do === "wait_popup") {
      const deadline = Date.now() + (step.timeout_ms || 15_000);
      while (!out.popups.some((u) => u.startsWith(step.prefix)) &&
             !out.blocked.some((u) => u.startsWith(step.prefix)) && Date.now() < deadline) {
        await page.waitForTimeout(100);
      }
    } else if (step.do === "forge") {
      const server = await attackerServer(step.target, step.body);
      const forged = await context.newPage();
      await forged.goto(`http://localhost:${server.address().port}/`);
      await forged.waitForFunction(() => document.body.dataset.done, null, { timeout: 10_000 });
      record.result = await forged.evaluate(() => document.body.dataset.done);
      await forged.close();
      server.close();
    } else if (step.do === "screenshot") {
      await page.screenshot({ path: step.path, fullPage: true });
    } else if (step.do === "sleep") {
      await page.waitForTimeout(step.ms);
    } else {
      throw new Error(`unknown step ${step.do}`);
    }
    out.steps.push(record);
  }
  out.calls = await page.evaluate(() => window.__kintTestWallet.calls);
  out.csp = await page.evaluate(() => window.__kintCsp || []);
} catch (err) {
  out.error = String(err && err.stack ? err.stack : err);
} finally {
  if (context) await context.close().catch(() => {});
  await rm(userDataDir, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(out.error ? 1 : 0);
