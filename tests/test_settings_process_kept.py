"""A Supervisor built in the test process leaves kint.settings' process state as it found
it for the next test (tests/conftest.py's `settings_process_kept`).

`Supervisor.__init__` says the process is the daemon's (`kint.settings.configure(home=...,
daemon=True)`), as it must in kint-server's supervisor. In the test process that stayed for
every later test of the same xdist worker: an environment value read as "the supervisor's
environment", not "this call", and tests/test_command_timeout_named.py failed or passed by
the order its worker ran files in. The two tests run in this order, in one process (one
file: `--dist loadfile`); the second fails without the fixture.

Real parts: the real Supervisor, built as tests/test_upgrade_sessions.py builds one (its
sockets not bound), on a temporary KINT_HOME.
"""

from __future__ import annotations

from kint.settings import complaints, loader


def test_a_supervisor_built_in_process_marks_the_process_the_daemons(tmp_path):
    """The premise: building one configures this process as the daemon, on its home."""
    from kint.supervisor.daemon import Supervisor
    from kint.supervisor.settings import Settings

    home = tmp_path / "kint"
    home.mkdir(mode=0o700)
    sup = Supervisor(home, Settings.load())
    try:
        assert loader.env_source() == loader.DAEMON_ENV
        assert complaints.in_daemon and loader.home() == home
    finally:
        sup.close()


def test_the_next_test_reads_the_process_as_a_commands_again():
    """After it, this process is a command's again: its environment is "this call", its
    complaints are a command's (not the daemon's), and KINT_HOME is the environment's, not
    the supervisor's."""
    assert loader.env_source() == loader.THIS_CALL
    assert not loader._process.daemon and not complaints.in_daemon
    assert loader._process.home is None and loader._process.space == ()
