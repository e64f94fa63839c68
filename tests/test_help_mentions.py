"""cli_run.help_mentions, how `kint setup` asks a harness's CLI whether it takes a form it
added later (Claude Code's `mcp add-json -` on stdin, OpenClaw's `config patch --stdin`),
run on real tiny scripts on PATH: a help naming the word (on stdout, or on stderr with a
non-zero exit), one that does not, one that hangs past the timeout and one that cannot be
started."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kint.harnesses.cli_run import help_mentions
from kint.harnesses.failures import HarnessFailure
from kint.protocol.errors import ErrorCode


def _on_path(folder: Path, name: str, body: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A /bin/sh script `name` in `folder`, put first on PATH; its path as `which` finds it."""
    folder.mkdir(exist_ok=True)
    script = folder / name
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    found = shutil.which(name)
    assert found == str(script)
    return found


def test_a_help_naming_the_word_says_so(tmp_path, monkeypatch) -> None:
    cli = _on_path(tmp_path / "bin", "harness-cli", 'echo "Usage: harness-cli config patch '
                   '[--stdin] [--replace-path PATH]"\n', monkeypatch)
    assert help_mentions([cli, "config", "patch", "--help"], "--stdin", timeout=30)
    assert not help_mentions([cli, "config", "patch", "--help"], "--json", timeout=30)


def test_a_help_on_stderr_with_a_non_zero_exit_is_read_all_the_same(tmp_path,
                                                                     monkeypatch) -> None:
    """Some CLIs print their help on stderr and exit 1 (or 2) after it: what it says still
    counts. One that knows no such option says nothing of the word, and is False."""
    cli = _on_path(tmp_path / "bin", "harness-cli",
                   'echo "Usage: harness-cli mcp add-json NAME JSON (- reads it from stdin)" >&2\n'
                   "exit 1\n", monkeypatch)
    assert help_mentions([cli, "mcp", "add-json", "--help"], "stdin", timeout=30)
    older = _on_path(tmp_path / "old", "older-cli",
                     'echo "error: unknown option \'--help\'" >&2\nexit 2\n', monkeypatch)
    assert not help_mentions([older, "mcp", "add-json", "--help"], "stdin", timeout=30)


def test_a_help_that_hangs_past_the_timeout_fails_the_harness_by_name(tmp_path,
                                                                      monkeypatch) -> None:
    """A CLI stuck (or waiting on a question) fails the harness with a line naming the
    command, as any run of a harness's CLI does, rather than counting as "no"."""
    cli = _on_path(tmp_path / "bin", "stuck-cli", "exec sleep 600\n", monkeypatch)
    with pytest.raises(HarnessFailure) as caught:
        help_mentions([cli, "config", "patch", "--help"], "--stdin", timeout=0.5)
    assert caught.value.code == ErrorCode.TIMEOUT.value
    assert "`stuck-cli config patch --help` did not finish within 0.5 s" in str(caught.value)


def test_a_help_that_cannot_be_started_fails_the_harness(tmp_path, monkeypatch) -> None:
    cli = _on_path(tmp_path / "bin", "broken-cli", "exit 0\n", monkeypatch)
    Path(cli).write_text("#!/no/such/interpreter\n")
    with pytest.raises(HarnessFailure) as caught:
        help_mentions([cli, "--help"], "stdin", timeout=30)
    assert caught.value.code == ErrorCode.HARNESS_ERROR.value
    assert "cannot run" in str(caught.value)
