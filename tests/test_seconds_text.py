"""A limit a refusal names, in seconds, worded for a bound under a second too
(kint/seconds_text.py): "did not answer within 0s" told the user nothing."""

from __future__ import annotations

import pytest

from kint.seconds_text import seconds_text
from kint.supervisor import autostart


@pytest.mark.parametrize("seconds, said", [
    (0.0, "0s"), (0.001, "0.001s"), (0.25, "0.25s"), (0.5, "0.5s"), (0.4004, "0.4s"),
    (1.0, "1s"), (1.5, "1.5s"), (2.96, "3s"), (10.0, "10s"), (29.7, "30s"), (119.4, "119s"),
    (119.6, "2 min"), (120.0, "2 min"), (150.0, "2 min 30s"), (125.2, "2 min 5s"),
    (900.0, "15 min"), (1800.0, "30 min"),
])
def test_a_span_is_said_with_the_precision_a_reader_needs(seconds, said):
    assert seconds_text(seconds) == said


class _Started:
    """A supervisor this call started, still starting: it never answers and never exits."""

    returncode = None

    def poll(self) -> None:
        return None


def test_a_start_given_under_a_second_names_that_bound(tmp_path, monkeypatch):
    """A call with half a second left starts a supervisor that does not answer in time:
    the refusal names the half second, not "0s"."""
    monkeypatch.setattr(autostart, "spawn_daemon", lambda home, on_demand=True: _Started())
    monkeypatch.setattr(autostart, "holder", lambda home: None)
    home = tmp_path / "kint"
    with pytest.raises(autostart.SupervisorNotReachable) as refused:
        autostart.ensure_running(home, lambda timeout_s: False, wait_s=0.5)
    assert str(refused.value) == "the supervisor did not answer within 0.5s"
