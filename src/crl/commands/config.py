"""``crl config``: every config field with its default and description, as TOML a user can start from.

The listing is read off the pydantic models of :mod:`crl.train.config`, so it can never drift from what
``crl train`` accepts. A section whose kind is chosen by a tag (``[data] source``, ``[model] encoder``) lists
the default kind's fields, then each other kind's own fields, commented out.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Union

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from crl.commands._errors import EXIT_OK, EXIT_USAGE, print_error, run_reporting_errors


@dataclass(frozen=True)
class FieldDoc:
    """One config field: its name, default (as TOML text) and description."""

    name: str
    default: str
    description: str


def config(
    defaults: Annotated[
        bool, typer.Option("--defaults", help="Print every field with its default and description, as TOML.")
    ] = False,
    check: Annotated[
        Path | None, typer.Option(help="Validate this TOML config and print it with every default filled in.")
    ] = None,
) -> None:
    """Show the training config: every field and its default (--defaults), or a checked config (--check)."""
    raise typer.Exit(config_command(defaults=defaults, check=check))


def config_command(*, defaults: bool, check: Path | None) -> int:
    """Print the defaults listing or a validated config; 2 when neither or both are asked for."""
    if defaults == (check is not None):
        print_error("pass exactly one of --defaults or --check CONFIG")
        return EXIT_USAGE

    def body() -> int:
        # Deferred: the config schema builds its pydantic models on import, which `crl --help` does not need.
        from crl.train.config import TrainConfig, config_to_toml, load_config

        text = defaults_toml(TrainConfig) if defaults else config_to_toml(load_config(check or Path()))
        typer.echo(text, nl=False)
        return EXIT_OK

    return run_reporting_errors(body)


def defaults_toml(model: type[BaseModel]) -> str:
    """Every section of ``model`` as TOML: ``key = default  # description`` lines, variants commented."""
    lines: list[str] = []
    for name, info in model.model_fields.items():
        variants = section_variants(info)
        if not variants:
            continue
        lines.append(f"[{name}]  # {info.description or ''}".rstrip(" #"))
        default_variant = type(info.get_default(call_default_factory=True))
        lines += [_line(doc) for doc in field_docs(default_variant)]
        for variant in variants:
            if variant is default_variant:
                continue
            tag = _tag_line(variant)
            lines.append(f"# or, {tag}:" if tag else f"# or {variant.__name__}:")
            shared = set(default_variant.model_fields)
            lines += ["# " + _line(doc) for doc in field_docs(variant) if doc.name not in shared]
        lines.append("")
    return "\n".join(lines)


def section_variants(info: FieldInfo) -> list[type[BaseModel]]:
    """The model classes a section field may hold: one, or each member of a (discriminated) union."""
    annotation = info.annotation
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    members = typing.get_args(annotation) if typing.get_origin(annotation) in (Union, types.UnionType) else ()
    candidates = members or (annotation,)
    return [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]


def field_docs(model: type[BaseModel]) -> list[FieldDoc]:
    """Each field of a section model with its default as TOML text (``(required)`` when it has none)."""
    docs = []
    for name, info in model.model_fields.items():
        default = info.get_default(call_default_factory=True)
        text = "(required)" if default is PydanticUndefined else _toml(default)
        docs.append(FieldDoc(name, text, " ".join((info.description or "").split())))
    return docs


def _tag_line(variant: type[BaseModel]) -> str:
    """``source = "digits"`` for a variant whose tag field is a one-value Literal, else ``""``."""
    for name, info in variant.model_fields.items():
        choices = (
            typing.get_args(info.annotation) if typing.get_origin(info.annotation) is typing.Literal else ()
        )
        if len(choices) == 1:
            return f"{name} = {_toml(choices[0])}"
    return ""


def _line(doc: FieldDoc) -> str:
    return (
        f"{doc.name} = {doc.default}  # {doc.description}"
        if doc.description
        else f"{doc.name} = {doc.default}"
    )


def _toml(value: Any) -> str:
    """A default as a TOML literal (strings quoted, booleans lower case, lists bracketed)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float | list):
        return json.dumps(value)
    return repr(value)
