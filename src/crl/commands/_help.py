"""``--help`` without a ``<bool>`` placeholder on flags.

typer prints each option's type beside it (``--k <int>``); for a flag, which takes no value, that is a
``<bool>`` that reads as if ``--json true`` were expected, on every command's ``--help`` line too. The command
and group classes here give every flag an empty metavar, so a flag shows as ``--json`` or
``--exclude-self --include-self`` and options with a value keep their type.
"""

from typing import Any

from typer.core import TyperCommand, TyperGroup

__all__ = ["FlagsCommand", "FlagsGroup"]


def _without_flag_types(params: list[Any]) -> list[Any]:
    """``params`` with an empty metavar on each flag (typer then shows no type for it)."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class FlagsCommand(TyperCommand):
    """A typer command whose ``--help`` shows flags without a type."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _without_flag_types(super().get_params(ctx))


class FlagsGroup(TyperGroup):
    """A typer group whose ``--help`` shows flags without a type."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _without_flag_types(super().get_params(ctx))
