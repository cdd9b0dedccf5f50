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
    config_file: Annotated[
        Path | None,
        typer.Argument(
            metavar="CONFIG",
            help="A TOML config to validate and print with every default filled in.",
            show_default=False,
        ),
    ] = None,
    defaults: Annotated[
        bool, typer.Option("--defaults", help="Print every field with its default and description, as TOML.")
    ] = False,
    check: Annotated[
        bool, typer.Option("--check", help="Validate CONFIG (the default when CONFIG is given).")
    ] = False,
) -> None:
    """Show the training config: CONFIG validated with every default filled in, or every field (--defaults).

    crl config CONFIG, crl config CONFIG --check and crl config --check CONFIG are the same.
    """
    raise typer.Exit(config_command(config_file, defaults=defaults, check=check))


def config_command(config_file: Path | None, *, defaults: bool, check: bool = False) -> int:
    """Print the defaults listing, or CONFIG validated; 2 with one line for a wrong combination."""
    usage = _usage_error(config_file, defaults=defaults, check=check)
    if usage:
        print_error(usage)
        return EXIT_USAGE

    def body() -> int:
        # Deferred: the config schema builds its pydantic models on import, which `crl --help` does not need.
        from crl.train.config import TrainConfig, config_to_toml, load_config

        text = defaults_toml(TrainConfig) if defaults else config_to_toml(load_config(config_file or Path()))
        typer.echo(text, nl=False)
        return EXIT_OK

    return run_reporting_errors(body)


def _usage_error(config_file: Path | None, *, defaults: bool, check: bool) -> str:
    """Why the arguments of ``crl config`` do not make one request ('' when they do)."""
    if defaults and (config_file is not None or check):
        return "--defaults lists every field and takes no CONFIG; run crl config --defaults, or crl config CONFIG"
    if config_file is None and not defaults:
        if check:
            return "--check needs a CONFIG to validate: crl config CONFIG --check"
        return "pass a CONFIG to validate (crl config CONFIG) or --defaults to list every field"
    return ""


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
