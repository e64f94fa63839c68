#!/usr/bin/env node
// Compile contracts/EpochAnchor.sol with the pinned npm `solc` (standard-JSON API) and
// write contracts/EpochAnchor.json. Deterministic: the same source and compiler give the
// same bytes.
//
//   node contracts/compile.mjs           write the artifact
//   node contracts/compile.mjs --check   compile, compare with the committed artifact;
//                                        exit 1 (and say what differs) if not identical
//
// Exit codes: 0 ok, 1 artifact differs/missing (--check), 2 compilation failed, 64 usage.

import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(HERE);
const require = createRequire(join(ROOT, "package.json"));
const solc = require("solc");

const NAME = "EpochAnchor";
const SOURCE = join(HERE, `${NAME}.sol`);
const ARTIFACT = join(HERE, `${NAME}.json`);
const EVM_VERSION = "cancun";
const OPTIMIZER = { enabled: true, runs: 200 };

function compile(sourceBytes) {
  const input = {
    language: "Solidity",
    sources: { [`${NAME}.sol`]: { content: sourceBytes.toString("utf8") } },
    settings: {
      optimizer: OPTIMIZER,
      evmVersion: EVM_VERSION,
      outputSelection: {
        [`${NAME}.sol`]: { [NAME]: ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] },
      },
    },
  };
  let output;
  try {
    output = JSON.parse(solc.compile(JSON.stringify(input)));
  } catch (err) {
    console.error(`compile.mjs: solc failed: ${err && err.stack ? err.stack : err}`);
    process.exit(2);
  }
  const problems = output.errors || [];
  const errors = problems.filter((e) => e.severity === "error");
  for (const p of problems) {
    const text = (p.formattedMessage || p.message || JSON.stringify(p)).trimEnd();
    console.error(text);
  }
  if (errors.length) {
    console.error(`compile.mjs: ${errors.length} error(s) compiling ${relative(ROOT, SOURCE)}`);
    process.exit(2);
  }
  const contract = output.contracts?.[`${NAME}.sol`]?.[NAME];
  if (!contract || !contract.evm?.bytecode?.object) {
    console.error(`compile.mjs: solc produced no bytecode for ${NAME}`);
    process.exit(2);
  }
  return {
    abi: contract.abi,
    bytecode: `0x${contract.evm.bytecode.object}`,
    deployedBytecode: `0x${contract.evm.deployedBytecode.object}`,
    compiler: solc.version(),
    evmVersion: EVM_VERSION,
    optimizer: { enabled: OPTIMIZER.enabled, runs: OPTIMIZER.runs },
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

const artifact = compile(readFileSync(SOURCE));
const text = render(artifact);

if (check) {
  if (!existsSync(ARTIFACT)) {
    console.error(`compile.mjs --check: ${relative(ROOT, ARTIFACT)} does not exist`);
    process.exit(1);
  }
  const committed = readFileSync(ARTIFACT, "utf8");
  if (committed !== text) {
    console.error(`compile.mjs --check: ${relative(ROOT, ARTIFACT)} differs from a fresh compile:`);
    for (const line of describeDifferences(committed, artifact)) console.error(`  ${line}`);
    console.error("run `node contracts/compile.mjs` to update it");
    process.exit(1);
  }
  console.log(`${relative(ROOT, ARTIFACT)} is up to date (${artifact.compiler}, ${EVM_VERSION})`);
  process.exit(0);
}

writeFileSync(ARTIFACT, text);
console.log(`wrote ${relative(ROOT, ARTIFACT)} (${artifact.compiler}, ${EVM_VERSION}, ` +
  `${(artifact.deployedBytecode.length - 2) / 2} bytes deployed)`);
