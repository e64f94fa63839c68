"""The supervisor: one daemon per KINT_HOME that routes requests by space and keeps one
worker process per space alive (DESIGN §3).

- `settings`: the tunables, read once from the environment.
- `spawner`: the forkserver that makes workers cheap to start.
- `workers`: one `WorkerHandle` per space and the rules of its lifecycle.
- `daemon`: the event loop over the two sockets, and the state its parts share.
- `routing`: clients' requests to their space's worker, and exactly one answer each.
- `worker_messages`: the workers' hellos, beats and replies, believed only from them.
- `lifecycle`: a worker's spawn, stop, exit, restart, quarantine and hang.
- `room`: room for a worker when the open files run short (an idle worker stopped for it,
  or BUSY naming the limit; the count itself is `kint.open_files`).
- `timed`: deadlines, refused forwards and the per-space sweep, between messages.
- `housekeeping`: the supervisor's checks on itself (home, config, log, upgrade).
- `commands`: the supervisor's own ops (ping, status, spaces, stop, restart).
- `autostart`: how a client starts a supervisor on demand, exactly once.
- `pidlock`: the pid lock a running supervisor holds, and who holds it.
- `ownership`: the pid lock and socket files a supervisor owns, so it never breaks another.
- `outbox`: replies a client's pipe cannot take yet, kept instead of dropped.
- `pause`: the supervisor's own pauses, told apart from its workers' silence.
- `peer`: who is on the other end of an ipc connection, in the kernel's words.
"""
