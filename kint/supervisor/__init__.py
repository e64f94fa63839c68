"""The supervisor: one daemon per KINT_HOME that routes requests by space and keeps one
worker process per space alive (README, "How it runs"). It exists so that a hung RPC, a
held push or a crashing worker stays inside its own space: the supervisor does no chain
or store work of its own, only routing, deadlines and the workers' lifecycle, so it keeps
answering whatever one space is doing.

- `settings`: the tunables, read once from the environment.
- `spawner`: the forkserver that makes workers cheap to start.
- `workers`: one `WorkerHandle` per space and the rules of its lifecycle.
- `daemon`: the event loop over the two sockets, and the state its parts share.
- `sockets`: the two sockets bound, and bound again when their files are removed.
- `routing`: clients' requests to their space's worker, and exactly one answer each.
- `worker_messages`: the workers' hellos, beats and replies, believed only from them.
- `lifecycle`: a worker's spawn, stop, idle stop, recycle and hang.
- `worker_exit`: a worker's exit: its requests answered, the restart or quarantine.
- `last_words`: a worker's reason read after its exit, and its route's memory.
- `exit_hold`: a worker's exit held, briefly, for the reason it sent just before it.
- `room`: room for a worker when the open files run short (an idle worker stopped for it,
  or BUSY naming the limit; the count itself is `kint.open_files`).
- `front_door`: the front socket closed to new clients before they take the last open
  files (libzmq aborts on EMFILE), open again as they leave (the note: `kint.front_closed`).
- `front_door_stop`: the same door closed for the supervisor's stop, its moved socket and
  note removed at the end while they are its own.
- `front_listeners`: the front socket bound again beside its old listener, whose clients
  stay connected (an unbind ended them all at once, and they came back in a burst).
- `timed`: deadlines, refused forwards and the per-space sweep, between messages.
- `housekeeping`: the supervisor's checks on itself (home, config, log, upgrade).
- `commands`: the supervisor's own ops (ping, status, spaces, stop, reload, restart).
- `status`: the rows of `kint supervisor status`, from what the supervisor already holds.
- `autostart`: how a client starts a supervisor on demand, exactly once.
- `start_signals`: what a stop signal does to a supervisor in its start, before it serves.
- `start_refusals`: what a client is told of a supervisor that holds the home and does not
  answer (stopped, stuck, or not ending its stop).
- `pidlock`: the pid lock a running supervisor holds, and who holds it.
- `ownership`: the pid lock and socket files a supervisor owns, so it never breaks another.
- `outbox`: replies a client's pipe cannot take yet, kept instead of dropped.
- `pause`: the supervisor's own pauses, told apart from its workers' silence.
- `peer`: who is on the other end of an ipc connection, in the kernel's words.
- `exits`: the workers' exit sentinels behind one descriptor for the poller.
- `bindings`: which store each space is bound to, kept across restarts.
- `code_watch`: kint upgraded or edited in place under a running supervisor.
- `succession`: what a supervisor exiting for an upgrade leaves the next one.
- `tighten`: kint's own files under KINT_HOME made private again at start.
- `forkserver_start`: the forkserver's first preload module: kint's own process, its
  collector paused while the preload imports.
- `forkserver_heap`: the forkserver's heap, imported and frozen to be shared.
- `__main__`: the daemon process (`python -m kint.supervisor --home PATH`).
"""
