"""What a kint call refuses with: the errors every client raises, and the hints named for
kint-server, kept apart from the client itself so that the parts of it that read a closed
front door (kint/client_closed_door.py) or a supervisor gone (kint/client_liveness.py)
raise them without importing the call path. `kint.client` names the errors too, as every
caller imports them."""

from __future__ import annotations

# The hint of a call no supervisor was there to take: named, so that kint-server can say
# it in an agent's words.
NO_SUPERVISOR_HINT = "run `kint supervisor start`, or any command that starts one"
# The hints of the two ways a supervisor fails a call it was sent: it never answered, or
# it exited first. Named, so that kint-server can say them in an agent's words.
NO_ANSWER_HINT = "see `kint supervisor status` and the supervisor log"
EXITED_HINT = ("run the command again (it starts a new supervisor); the supervisor log "
               "says why it exited")
# The hint of a call whose supervisor no longer holds KINT_HOME (its pid file removed or
# another's) and may never have got the call: the next call reaches (or starts) the one
# that holds it.
UNREACHED_HINT = ("run the command again: it reaches the supervisor that holds KINT_HOME "
                  "now, or starts one")
# The hint of a start that gave way to a supervisor a signal stopped as it started (a
# service manager's stop, a Ctrl-C): none runs, and none was started in its place, which
# would undo that stop (start_refusals.start_ended).
STOPPED_STARTING_HINT = "run the command again to start one"
# The hint of a start that gave way to a supervisor that served and has ended since (a
# `kint supervisor stop`, which ends only one that answers, or a crash), or whose own did
# so: none runs, and none was started in its place, which would undo that stop. The log
# "may" say how: a SIGKILL or the OOM killer leaves no line there.
SERVED_ENDED_HINT = ("run the command again to start one; the supervisor log may say how "
                     "that one ended")


class KintError(Exception):
    """What a kint call refused with: a code, one line, and what to do."""

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint


class SupervisorUnavailable(KintError):
    """No supervisor answers. `CODE` is also what the commands that check for one
    themselves (`supervisor status`, `supervisor reload`) refuse with."""

    CODE = "SUPERVISOR_UNAVAILABLE"

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(self.CODE, message, hint)
