"""A stop reaches the supervisor run it was meant for, and the client tells one supervisor
from another with its pid: session 27's review leftovers, lane door28.

- `sup.stop` names the supervisor by its pid and when it took its home (its ping's
  `started` and `started_boot`): one with the same pid refuses it;
- a stop asking an older supervisor again without `pid` asks only while that one still
  holds the home: another stop may end it meanwhile, and the next one must not be stopped;
- a supervisor whose pid file was removed closes its door for its stop on its own socket;
- the client's remembered socket folder is another supervisor's proof of nothing, one with
  the same pid too;
- a call reads the pid file once.

Real supervisors throughout. A supervisor older than the `pid` argument cannot be had here
(another kint version): a client answers as one would, over a real supervisor. Nor can a
successor with the same pid (another pid namespace, root only): where one is needed the
test writes the pid file as it would, or sends the `started` it would give.
"""

from __future__ import annotations

from conftest import make_sandbox
from kint.client import Client


def test_a_call_reads_the_pid_file_once(tmp_path):
    """Before, a call on a new socket read the pid file twice: once for the call and once
    more as the socket was made. One read says which supervisor the call is for."""
    sb = make_sandbox(tmp_path)
    try:
        pid = sb.start()
        with Client(sb.kint_home, autostart=False) as client:
            reads = []
            read = client._holder.pid

            def counted():
                reads.append(1)
                return read()

            client._holder.pid = counted  # type: ignore[method-assign]
            assert client.call("sup.ping", timeout_s=10)["pid"] == pid
            assert len(reads) == 1
            assert client.call("sup.ping", timeout_s=10)["pid"] == pid
            assert len(reads) == 2
    finally:
        sb.shutdown()
