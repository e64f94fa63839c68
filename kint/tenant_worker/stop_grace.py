"""How long a worker outlives its supervisor, in a module of its own so kint-server can
read it without importing the worker's loop (kint.tenant_worker.process and what it
imports cost ~0.8 s at a server's start).

A worker whose supervisor dies learns it two ways: the SIGTERM its parent's death sends
(PR_SET_PDEATHSIG, set at its start: kint.tenant_worker.worker_start), after which it gives
the op in flight its stop grace; or the look at the supervisor's pid its loop takes before
each beat (at most IDLE_BEAT_MAX_SECONDS apart: kint.tenant_worker.process), after which it
exits at once. kint-server, which waits for the worker that ran a restore whose supervisor
died (kint.agent_server.restore_wait), takes a worker still there after both as stopped
(SIGSTOP, a debugger) or stuck.
"""

from __future__ import annotations

from kint.protocol.worker_wire import IDLE_BEAT_MAX_SECONDS

# How long a commanded stop waits for ops in flight, and a push or pull the store watcher
# runs, before the worker exits anyway.
STOP_GRACE_SECONDS = 10.0
# The longest a worker that is neither stopped nor stuck runs after its supervisor died:
# its stop grace for the op in flight once the SIGTERM came, and a beat's interval as the
# slack of the look at the supervisor's pid that ends it when none came.
ORPHAN_EXIT_S = STOP_GRACE_SECONDS + IDLE_BEAT_MAX_SECONDS
