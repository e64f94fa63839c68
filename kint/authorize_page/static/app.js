// kint authorize page: ask the owner's browser wallet to send setSessionKey(key, expiry) to
// EpochAnchor, then tell the kint command on this machine which transaction it sent.
//
// Wallets are found with EIP-6963 (eip6963:requestProvider / announceProvider), falling back
// to window.ethereum; a Base Account owner can load the pinned SDK that kint ships and
// serves from this same loopback server. The page refuses any account but the owner, and
// any chain but kint's. It never asks for a signature over a message, a passphrase or a key.
(() => {
  "use strict";

  const nonce = document.currentScript ? document.currentScript.nonce : "";
  const req = JSON.parse(document.getElementById("kint-request").textContent);
  const owner = String(req.owner).toLowerCase();
  const body = document.body;
  const status = document.getElementById("status");
  const walletsEl = document.getElementById("wallets");
  const seen = new Set();
  let busy = false;

  const show = (id, text) => { document.getElementById(id).textContent = text; };
  show("owner", req.owner);
  show("key", req.key);
  show("expiry", `${new Date(req.expiry * 1000).toISOString()} (unix ${req.expiry})`);
  show("anchor", req.anchor);
  show("chain", req.chainId === 8453 ? "8453 (Base)" : String(req.chainId));

  function setState(state, message) {
    body.dataset.state = state;
    status.textContent = message;
  }

  function setBusy(value) {
    busy = value;
    for (const button of walletsEl.querySelectorAll("button")) button.disabled = value;
  }

  // -- the wallets ------------------------------------------------------------------------

  function addWallet(id, name, icon, getProvider) {
    if (seen.has(id)) return;
    seen.add(id);
    document.getElementById("no-wallet").hidden = true;
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.wallet = id;
    if (typeof icon === "string" && icon.startsWith("data:image/")) {
      const img = document.createElement("img");
      img.alt = "";
      img.src = icon;
      button.append(img);
    }
    button.append(document.createTextNode(name));
    button.disabled = busy;
    button.addEventListener("click", () => run(name, getProvider));
    // The browser's own wallets first; the bundled Base Account SDK stays last.
    const last = walletsEl.querySelector('button[data-wallet="base-account"]');
    walletsEl.insertBefore(button, last);
  }

  window.addEventListener("eip6963:announceProvider", (event) => {
    const detail = event.detail;
    const info = detail && detail.info;
    const provider = detail && detail.provider;
    if (!info || typeof info.uuid !== "string" || typeof info.name !== "string") return;
    if (!provider || typeof provider.request !== "function") return;
    addWallet(`eip6963:${info.uuid}`, info.name.slice(0, 64), info.icon, async () => provider);
  });
  window.dispatchEvent(new Event("eip6963:requestProvider"));

  if (req.sdk) {
    addWallet("base-account", "Base Account", null, loadBaseAccount);
  }

  setTimeout(() => {
    const injected = window.ethereum;
    const announced = [...seen].some((id) => id.startsWith("eip6963:"));
    if (!announced && injected && typeof injected.request === "function") {
      addWallet("window.ethereum", "Browser wallet (window.ethereum)", null, async () => injected);
    }
    if (seen.size === 0) document.getElementById("no-wallet").hidden = false;
  }, 400);

  let sdkProvider = null;
  function loadBaseAccount() {
    if (sdkProvider) return Promise.resolve(sdkProvider);
    return new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = req.sdk.src;
      script.integrity = req.sdk.integrity;
      script.nonce = nonce;
      script.onload = () => {
        try {
          const sdk = window.createBaseAccountSDK({
            appName: "kint",
            appChainIds: [req.chainId],
            preference: { telemetry: false },
          });
          sdkProvider = sdk.getProvider();
          resolve(sdkProvider);
        } catch (err) {
          reject(err);
        }
      };
      script.onerror = () => reject(new Error("the bundled Base Account SDK did not load"));
      document.head.append(script);
    });
  }

  // -- the one transaction ----------------------------------------------------------------

  const hexChain = "0x" + Number(req.chainId).toString(16);

  async function chainOf(provider) {
    return parseInt(await provider.request({ method: "eth_chainId" }), 16);
  }

  async function run(name, getProvider) {
    if (busy) return;
    setBusy(true);
    setState("busy", `Asking ${name} to connect...`);
    try {
      const provider = await getProvider();
      const accounts = (await provider.request({ method: "eth_requestAccounts" })) || [];
      const match = accounts.find((a) => String(a).toLowerCase() === owner);
      if (!match) {
        const shown = accounts.length ? accounts.join(", ") : "no account";
        setState("refused", `Refused: ${name} connected ${shown}, not the owner ${req.owner}. ` +
          "Nothing was sent. Switch to the owner account in the wallet, then choose it again.");
        return;
      }
      let chain = await chainOf(provider);
      if (chain !== req.chainId) {
        try {
          await provider.request({ method: "wallet_switchEthereumChain",
                                   params: [{ chainId: hexChain }] });
        } catch (err) { /* checked below */ }
        chain = await chainOf(provider);
      }
      if (chain !== req.chainId) {
        setState("refused", `Refused: the wallet is on chain ${chain}, kint needs chain ` +
          `${req.chainId}. Nothing was sent. Switch the wallet's network, then try again.`);
        return;
      }
      setState("busy", "Confirm the transaction in your wallet...");
      const tx = await provider.request({
        method: "eth_sendTransaction",
        params: [{ from: match, to: req.anchor, data: req.calldata, value: "0x0" }],
      });
      await report(String(tx), String(match));
    } catch (err) {
      const message = err && err.message ? err.message : String(err);
      const code = err && err.code !== undefined ? ` (code ${err.code})` : "";
      setState("error", `The wallet did not send the transaction: ${message}${code}. ` +
        "You can try again.");
    } finally {
      setBusy(false);
    }
  }

  async function report(tx, account) {
    let reply;
    try {
      reply = await fetch(req.resultPath, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ tx, account }),
        credentials: "omit",
        cache: "no-store",
        referrerPolicy: "no-referrer",
      });
    } catch (err) {
      reply = null;
    }
    if (reply && reply.ok) {
      setState("sent", `Sent: transaction ${tx}. kint is now checking the chain; you can ` +
        "close this page.");
      for (const button of walletsEl.querySelectorAll("button")) button.remove();
    } else {
      setState("error", `The wallet sent transaction ${tx}, but the kint command did not ` +
        "take the report (it may have stopped). Check `kint session-key show`.");
    }
  }
})();
