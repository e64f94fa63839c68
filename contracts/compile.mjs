#!/usr/bin/env node
// Compile the contracts in contracts/ with the pinned npm `solc` (standard-JSON API) and write
// one artifact per contract inside the Python package, kint/chain/artifacts/<Name>.json, so a
// wheel install carries exactly the bytes this compiler made of this source. Deterministic:
// the same source and compiler give the same bytes (metadata bytecodeHash "none" keeps the
// source path and comments out of the bytecode).
//
//   node contracts/compile.mjs           write the artifacts
//   node contracts/compile.mjs --check   compile, compare with the committed artifacts;
//                                        exit 1 (and say what differs) if any is not identical
//
// Exit codes: 0 ok, 1 an artifact differs/missing (--check), 2 compilation failed, 64 usage.

import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(HERE);
const require = createRequire(join(ROOT, "package.json"));
const solc = require("solc");

// EpochAnchor is the product; TestSmartAccount is a test-only ERC-1271 account.
const CONTRACTS = ["EpochAnchor", "TestSmartAccount"];
const OUT_DIR = join(ROOT, "kint", "chain", "artifacts");
// Everything that changes the bytecode, recorded verbatim in each artifact.
const SETTINGS = {
  evmVersion: "cancun",
  optimizer: { enabled: true, runs: 200 },
  metadata: { bytecodeHash: "none" },
};

function compile(name, sourceBytes) {
  const file = `${name}.sol`;
  const input = {
    language: "Solidity",
    sources: { [file]: { content: sourceBytes.toString("utf8") } },
    settings: {
      ...SETTINGS,
      outputSelection: { [file]: { [name]: ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] } },
    },
  };
  let output;
  try {
    output = JSON.parse(solc.compile(JSON.stringify(input)));
  } catch (err) {
    console.error(`compile.mjs: solc failed on ${file}: ${err && err.stack ? err.stack : err}`);
    process.exit(2);
  }
  const problems = output.errors || [];
  for (const p of problems) console.error((p.formattedMessage || p.message || JSON.stringify(p)).trimEnd());
  const errors = problems.filter((e) => e.severity === "error");
  if (errors.length) {
    console.error(`compile.mjs: ${errors.length} error(s) compiling contracts/${file}`);
    process.exit(2);
  }
  const contract = output.contracts?.[file]?.[name];
  if (!contract || !contract.evm?.bytecode?.object) {
    console.error(`compile.mjs: solc produced no bytecode for ${name}`);
    process.exit(2);
  }
  return {
    contractName: name,
    source: `contracts/${file}`,
    abi: contract.abi,
    bytecode: `0x${contract.evm.bytecode.object}`,
    deployedBytecode: `0x${contract.evm.deployedBytecode.object}`,
    compiler: solc.version(),
    settings: SETTINGS,
    source_sha256: createHash("sha256").update(sourceBytes).digest("hex"),
  };
}

function render(artifact) {
  return `${JSON.stringify(artifact, null, 2)}\n`;
}

function describeDifferences(committedText, fresh) {
  let committed;
  try {
    committed = JSON.parse(committedText);
  } catch (err) {
    return [`committed artifact is not valid JSON (${err.message})`];
  }
  const lines = [];
  const keys = new Set([...Object.keys(committed), ...Object.keys(fresh)]);
  for (const key of keys) {
    if (!(key in fresh)) lines.push(`unexpected key in committed artifact: ${key}`);
    else if (!(key in committed)) lines.push(`missing key in committed artifact: ${key}`);
    else {
      const a = JSON.stringify(committed[key]);
      const b = JSON.stringify(fresh[key]);
      if (a !== b) {
        // Show both sides from a little before the first differing character.
        let i = 0;
        while (i < a.length && i < b.length && a[i] === b[i]) i += 1;
        const from = Math.max(0, i - 10);
        const cut = (s) => `${from ? "..." : ""}${s.slice(from, from + 70)}${s.length > from + 70 ? "..." : ""}`;
        lines.push(`${key} (first difference at character ${i} of its JSON):`);
        lines.push(`  committed ${cut(a)}`);
        lines.push(`  compiled  ${cut(b)}`);
      }
    }
  }
  if (!lines.length) lines.push("formatting differs (key order, indentation or trailing newline)");
  return lines;
}

const args = process.argv.slice(2);
const check = args.includes("--check");
if (args.some((a) => a !== "--check")) {
  console.error("usage: node contracts/compile.mjs [--check]");
  process.exit(64);
}

let stale = 0;
for (const name of CONTRACTS) {
  const artifact = compile(name, readFileSync(join(HERE, `${name}.sol`)));
  const text = render(artifact);
  const path = join(OUT_DIR, `${name}.json`);
  const shown = relative(ROOT, path);
  if (check) {
    if (!existsSync(path)) {
      console.error(`compile.mjs --check: ${shown} does not exist`);
      stale += 1;
      continue;
    }
    const committed = readFileSync(path, "utf8");
    if (committed !== text) {
      console.error(`compile.mjs --check: ${shown} differs from a fresh compile:`);
      for (const line of describeDifferences(committed, artifact)) console.error(`  ${line}`);
      stale += 1;
      continue;
    }
    console.log(`${shown} is up to date (${artifact.compiler}, ${SETTINGS.evmVersion})`);
  } else {
    mkdirSync(OUT_DIR, { recursive: true });
    writeFileSync(path, text);
    console.log(`wrote ${shown} (${artifact.compiler}, ${SETTINGS.evmVersion}, ` +
      `${(artifact.deployedBytecode.length - 2) / 2} bytes deployed)`);
  }
}
if (stale) {
  console.error("run `node contracts/compile.mjs` to update them");
  process.exit(1);
}
