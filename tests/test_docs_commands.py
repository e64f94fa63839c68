"""The command list of `kint --help` (and of each group's `--help`) is the one README.md's
Commands block and docs/commands.md give, and every flag `--help` shows is documented in
that command's section of docs/commands.md (and no flag there is one `--help` lacks)."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from kint.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
COMMANDS_MD = ROOT / "docs" / "commands.md"
GLOBAL_FLAGS = {"--tenant", "--db", "--debug", "--version"}


def _help(*args: str) -> str:
    out = CliRunner().invoke(main, [*args, "--help"], prog_name="kint")
    assert out.exit_code == 0, out.output
    return out.output


def _listed(help_text: str) -> list[str]:
    """The names in the `Commands:` section of a --help page."""
    if "\nCommands:\n" not in help_text:
        return []
    section = help_text.split("\nCommands:\n", 1)[1]
    names = []
    for line in section.splitlines():
        if not line.strip():
            break
        if line.startswith("  ") and not line.startswith("   "):
            names.append(line.split()[0])
    return names


def help_tree() -> set[tuple[str, ...]]:
    """Every command as `kint --help` lists it: ("push",), ("session-key", "create"), ..."""
    tree: set[tuple[str, ...]] = set()
    for name in _listed(_help()):
        subs = _listed(_help(name))
        tree.update((name, sub) for sub in subs) if subs else tree.add((name,))
    return tree


def readme_tree() -> set[tuple[str, ...]]:
    """The commands README.md's Commands block lists (kint-server is its own binary)."""
    text = README.read_text()
    block = text.split("## Commands", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    groups = {name for name, *rest in help_tree() if rest}
    tree: set[tuple[str, ...]] = set()
    for line in block.splitlines():
        words = line.split()
        if len(words) < 2 or words[0] != "kint" or words[1].startswith(("[", "-")):
            continue
        name = words[1]
        if name in groups:
            subs = words[2].split("|") if len(words) > 2 else []
            tree.update((name, sub) for sub in subs)
        else:
            tree.add((name,))
    return tree


def _sections() -> dict[tuple[str, ...], str]:
    """docs/commands.md's `## kint X` and `### kint X Y` sections, by command."""
    sections: dict[tuple[str, ...], str] = {}
    current: tuple[str, ...] | None = None
    for line in COMMANDS_MD.read_text().splitlines():
        heading = re.fullmatch(r"#{2,3} (kint(?: [a-z-]+)*)", line)
        if heading is not None or line.startswith("#"):
            current = tuple(heading.group(1).split()[1:]) if heading else None
            if current is not None:
                sections[current] = ""
            continue
        if current is not None:
            sections[current] += line + "\n"
    return sections


def _command(path: tuple[str, ...]) -> click.Command:
    cmd: click.Command = main
    for name in path:
        assert isinstance(cmd, click.Group)
        found = cmd.get_command(click.Context(cmd), name)  # `kint`'s own load on demand
        assert found is not None, path
        cmd = found
    return cmd


def _flags(cmd: click.Command) -> set[str]:
    return {opt for p in cmd.params if isinstance(p, click.Option) and not p.hidden
            for opt in p.opts if opt.startswith("--") and opt != "--help"}


def test_readme_lists_every_command_of_help():
    assert readme_tree() == help_tree()


def test_docs_commands_has_a_section_for_every_command_of_help():
    sections = _sections()
    leaves = help_tree()
    groups = {(name,) for name, *rest in leaves if rest}
    assert set(sections) - {()} == leaves | groups


@pytest.mark.parametrize("path", sorted(help_tree()), ids=" ".join)
def test_docs_commands_documents_every_flag_of_help(path):
    section = _sections()[path]
    flags = _flags(_command(path))
    for flag in flags:
        assert re.search(rf"`{re.escape(flag)}[ `\\]", section), f"kint {' '.join(path)}: {flag}"
    tabled = set(re.findall(r"^\| `(--[a-z-]+)", section, re.M))
    assert tabled <= flags | GLOBAL_FLAGS, tabled - flags


def test_docs_commands_documents_the_global_options():
    section = _sections()[()]
    for flag in _flags(main):
        assert f"`{flag}" in section, flag


def test_readme_links_every_page_in_docs():
    text = README.read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in text, page.name


def _exit_codes_said(help_text: str) -> set[int]:
    """The exit codes a --help page names besides 0 and 2 (done, and any error): `Exit code
    N`, `exit N`, or `N when ...`/`N on ...` in a sentence about the exit."""
    text = " ".join(help_text.split())
    said: set[str] = set()
    for sentence in re.split(r"(?<=\.) ", text):
        if "xit" in sentence:
            said |= set(re.findall(r"[Ee]xit(?: code)? ([1-6])\b", sentence))
            said |= set(re.findall(r"(?<![\w.<-])([1-6]) (?:when|on)\b", sentence))
    return {int(code) for code in said} - {0, 2}


def _exit_status_says(code: int) -> str:
    """What docs/commands.md's "Exit status" section says of `code`: its row of the table
    and every sentence after the table that names `exit N`."""
    section = COMMANDS_MD.read_text().split("\n## Exit status\n", 1)[1]
    row = re.search(rf"^\| {code} \|(.*)$", section, re.M)
    prose = " ".join(s for s in re.split(r"(?<=\.)\s", " ".join(section.split()))
                     if f"exit {code}" in s)
    return (row.group(1) if row else "") + " " + prose


@pytest.mark.parametrize("path", sorted(help_tree()), ids=" ".join)
def test_the_exit_status_table_lists_every_code_help_names(path):
    """A code a command's --help names (setup's 1, devchain status's 3) is in the table a
    script reads, with the command named, so the table's "1 means only ..." stays true."""
    for code in _exit_codes_said(_help(*path)):
        says = _exit_status_says(code)
        assert f"`{path[-1]}`" in says or f"`kint {' '.join(path)}`" in says, (path, code, says)


def _doctor_check_names() -> set[str]:
    """Every check name `kint doctor` can print: the `check(...)` calls of its two halves
    (the command's own, kint/commands/doctor*.py, and the worker's, tenant_worker/doctor*.py)."""
    names: set[str] = set()
    for path in [*ROOT.glob("kint/commands/doctor*.py"),
                 *ROOT.glob("kint/tenant_worker/doctor*.py")]:
        text = path.read_text()
        names |= set(re.findall(r"\b(?:_?check|not_checked)\(\s*\"([^\"]+)\"", text))
        names |= set(re.findall(r"^\s+name = \"([^\"]+)\"$", text, re.M))
    return names


def test_doctor_help_and_docs_name_every_check_it_makes():
    """A check added to doctor is named in its --help and in docs/commands.md, where a
    reader looks up what a `[FAIL] name:` line is about."""
    names = _doctor_check_names()
    assert {"Sibyl packages", "interrupted push", "rpc secondary", "contract"} <= names, names
    help_text = " ".join(_help("doctor").split()).lower()
    section = " ".join(_sections()[("doctor",)].split())
    for name in sorted(names):
        assert re.search(rf"\b{re.escape(name.lower())}\b", help_text), f"--help: {name}"
        assert f"`{name}`" in section, f"docs/commands.md: {name}"
