"""Everything one tenant space owns, run in a process of its own (README, "How it runs").

Why a process per space: a space's verify, push, pull and their chain calls run here, so a
hung RPC, a held push, a slow pull or a crash stays inside that space while the supervisor
and the other spaces' workers keep answering.

- The process: `worker_start` (from the fork to the loop, and a start that failed),
  `process` (its loop: the socket, the stop, the hand-over), `stop_grace`
  (how long it outlives a stop or its supervisor), `worker_lock` (one live worker per
  space of a home, an old one included; its holder as the kernel names it is
  kint/lock_table.py's, shared with the supervisor's pid lock), `wake_pipe` (what wakes
  its loop, safe to write after it is closed), `heartbeat` (its beats' cadence and
  content), `op_replies` (an op run and answered), `config` (what the spawn tells it),
  `space` (what every op shares; the settings it runs with in `space_settings`),
  `handlers` (op name to function; the `status` op in `status`), `op_pool`, `own_memory`
  (for the recycle), `sessions` and `session_handoff` (the agent
  sessions, and what a successor takes over), `watcher`, `watcher_count`, `watcher_look`,
  `watcher_timings`, `watcher_push`, `drift`, `push_backoff` and `push_settings` (the store
  watcher, its count and whether it could be made, its owed look at a signature that had
  not told every commit, the timings it reads at each tick, its push and its stop, its
  hold, its wait after a failure, and the session's push settings it runs with, as status
  and config show say them).
- Reading: `store` (what a failed read of it says: `store_errors`), `store_readers` (the
  worker's read-only connections), `shared_client` (its Sibyl client, never closed under an
  op reading through it), `verify` (why it found none of the tenant's rows: `verify_empty`),
  `history`, `cache_check`, `provenance`, `changes`, `unanchored`, `chain_head`,
  `behind_head`, `doctor`, `doctor_chain`, `disk_space`, `file_presence`, `session_facts`,
  `store_holders`, `store_sharers` (another KINT_HOME's worker on the same store),
  `rpc_hint`, `chain_refusal` (a chain call's failure as a refusal: a view with no data
  is no endpoint that did not answer).
- Keys and connect: `connect` (its steps and files; the data key from the caller's
  secrets in `connect_key`, the owner and chain in `connect_owner`, whether the space is
  bound to its owner in `owner_bound`), `connected`, `dev_owner`, `data_key`, `head_header`,
  `header_wraps`, `recovery_binding`, `enrolment`, `enrolled_chain`, `custody_errors`,
  `rekey`, `rekey_settle`, `join_chain` (what `kint join` reads of the chain),
  `space_chain` (the chain settings `session-key show` and `authorize` read through).
- Push: `push`, `push_refusals`, `push_result` (what a push answers, a cut one's too),
  `pending` (settling the journal written before a send),
  `pending_journal` (that journal's file), `former_key` (a
  journal signed by a session key rotated away since; `former_key_wait`, the bound on its
  wait for a nonce held at another endpoint), `overtaken`, `unauthorized_journal`
  (one whose key may no longer write), `settled_notice` (what a settlement found, kept
  until a command says it), `dropped_nonce` (a dropped journal's nonce),
  `reanchor` (epochs a reorganisation dropped, sent again), `landed_block` (an epoch put
  back in a later block), `epoch_send` (an epoch's send, and what each says when it goes
  wrong), `session_sender`, `head_lock`, `exit_bound` (the exit push's bound, the
  supervisor's deadline for its request, carried with its wait and its push),
  `request_deadline` (the deadline of the request an op runs for, as the supervisor sent it).
- Pull: `pull`, `pull_plan`, `epoch_walk`, `walk_history`, `cold_start`, `local_state`,
  `replay`, `apply_journal`, `lost_restore`, `discard`.
- State files: `statefiles`, `mirror_file`, `epoch_cache`, `state_format`, `state_health`,
  `state_upgrade`.
"""
