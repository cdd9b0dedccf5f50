"""Every ``--help`` of crl shows flags without a ``<bool>`` placeholder (typer printed one on each flag, --help
included, as if the flag took a value), and options that take a value keep their type."""

from typing import Any

import pytest
import typer
from typer.core import TyperGroup
from typer.testing import CliRunner

from crl.commands import app


def _command_paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The argument paths of ``command`` and of every command under it (typer's groups hold ``commands``)."""
    paths = [path]
    if isinstance(command, TyperGroup):
        for name, sub in command.commands.items():
            paths += _command_paths(sub, (*path, name))
    return paths


PATHS = _command_paths(typer.main.get_command(app))


def test_every_command_is_covered() -> None:
    assert {("search",), ("index", "build"), ("train",), ("config",), ()} <= set(PATHS)


@pytest.mark.parametrize("path", PATHS, ids=lambda path: " ".join(path) or "crl")
def test_help_shows_no_bool_placeholder(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output
    assert "--help" in result.output


def test_flags_show_both_spellings_and_valued_options_keep_their_type() -> None:
    output = CliRunner().invoke(app, ["search", "--help"], terminal_width=200).output
    assert "--exclude-self" in output and "--include-self" in output and "--text" in output
    assert "<int>" in output  # -k takes a value
