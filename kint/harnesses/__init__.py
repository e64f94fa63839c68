"""`kint setup`: register kint-server in each harness's own configuration.

One plan for every harness (`Plan`): the absolute `kint-server` (next to the `kint` binary,
else on PATH) and the environment it must be started with. Harnesses start MCP servers
with very different environments: Claude Code passes its own whole environment, Codex only
a short whitelist (HOME, PATH, ...) plus what the entry names in `env_vars`, Hermes a bare
one (PATH, HOME, USER, LANG, ...). So the variables that decide *which* supervisor, store
and tenant the server serves are written into every registration as values:

- KINT_HOME, always (resolved, absolute): without it a server started under Codex or
  Hermes falls back to `~/.kint` of whatever HOME it got and starts a second supervisor;
- SIBYL_MEMORY_DB, always (absolute): Sibyl's store (a Hermes profile's store for Hermes);
- KINT_TENANT and SIBYL_CREDENTIALS when set (in the environment, by `kint --tenant/--db`
  or `--env`), and every `--env KEY=VALUE`, which wins.

PYTHONPATH never reaches the server: a polluting one shadows the packages of kint's own
environment. Each harness module says how it keeps it out.

Each harness module has `setup(plan) -> list[Report]`. A file is copied to
`<file>.bak-<unix time>` before setup changes it, and setup changes nothing when the
registration already is what it would write, so a second run is a no-op. A value of the
user's in kint's entry under a name setup writes itself, replaced or left out by a rewrite,
is named, never shown (env_checks.replaced_lines). No value a
registration carries is put on a harness CLI's command line, which every user of the
machine can read: each module says how its entry travels instead.

A harness that cannot be registered is reported as a `HarnessFailure`
(kint.harnesses.failures): a code of kint.protocol's closed set, a one-line message naming
the file or the command, and a hint, printed as `<target>: failed: MESSAGE [CODE]` and
`  <target>: hint: HINT`. A config file that is a folder, unreadable or in a folder this
user cannot write, a harness command that hangs or cannot be started, all end there rather
than as an exception's repr.

The package's modules: `plan` (the plan and the reports), `env_checks` (what `--env` may
write), `run` (the run over the targets), `cli_run` (a harness's CLI, bounded),
`config_files` (backups and atomic writes of a harness's file), `failures` (the two
errors), `setup_lock`, and one module per harness (`claude`, `codex`, `hermes` with
`hermes_provider` and `hermes_run`, `openclaw` with `openclaw_env`).
"""
