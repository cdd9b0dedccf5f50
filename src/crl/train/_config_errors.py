"""One line per pydantic validation error of a config: the field, the value given and what is allowed.

Error locations of a section whose kind is chosen by a tag carry the tag, e.g. ``("data", "digits", "root")``;
the line drops it (``[data] root``) and says which kind the field was looked up in.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Union

from pydantic import BaseModel

__all__ = ["describe_error"]


@dataclass(frozen=True)
class _Where:
    """Where an error sits: the location without tags, the model holding its last name, the model it names."""

    names: tuple[int | str, ...]
    holder: type[BaseModel] | None
    section: type[BaseModel] | None


def _tag(model: type[BaseModel]) -> tuple[str, str] | None:
    """(name, value) of the field that names a model's kind (a one-value Literal), or ``None``."""
    for name, field in model.model_fields.items():
        choices = typing.get_args(field.annotation) if typing.get_origin(field.annotation) is Literal else ()
        if len(choices) == 1:
            return name, str(choices[0])
    return None


def _kinds(annotation: Any) -> dict[str, type[BaseModel]]:
    """The members of a tagged union annotation by their tag value; empty for any other annotation."""
    if typing.get_origin(annotation) not in (Union, types.UnionType):
        return {}
    members = [m for m in typing.get_args(annotation) if isinstance(m, type) and issubclass(m, BaseModel)]
    return {tag[1]: member for member in members if (tag := _tag(member)) is not None}


def _where(model: type[BaseModel], loc: tuple[int | str, ...]) -> _Where:
    current: type[BaseModel] | None = model
    holder: type[BaseModel] | None = None
    names: list[int | str] = []
    parts = list(loc)
    while parts:
        key = parts.pop(0)
        holder = current
        names.append(key)
        field = current.model_fields.get(str(key)) if current is not None else None
        annotation = field.annotation if field is not None else None
        kinds = _kinds(annotation)
        if kinds:
            current = kinds.get(str(parts.pop(0))) if parts else None
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            current = annotation
        else:
            current = None
    return _Where(tuple(names), holder, current)


def _format_location(names: tuple[int | str, ...]) -> str:
    """``[section] field``; list items as ``field[i]``, e.g. ``[eval] ks[1]``."""
    keys = [index for index, part in enumerate(names) if isinstance(part, str)]
    if not keys:
        return "".join(f"[{part}]" for part in names) or "(top level)"
    last = keys[-1]
    section = [str(part) for part in names[:last] if isinstance(part, str)]
    head = f"[{'.'.join(section)}] " if section else ""
    return head + str(names[last]) + "".join(f"[{part}]" for part in names[last + 1 :])


def _kind_note(holder: type[BaseModel] | None) -> str:
    """`` (source = 'digits')`` for a field looked up in one kind of a tagged section, else ``""``."""
    tag = _tag(holder) if holder is not None else None
    return f" ({tag[0]} = {tag[1]!r})" if tag is not None else ""


def _expected(holder: type[BaseModel] | None, name: int | str) -> str:
    field = holder.model_fields.get(str(name)) if holder is not None else None
    if field is None:
        return ""
    choices = typing.get_args(field.annotation) if typing.get_origin(field.annotation) is Literal else ()
    if choices:
        return "expected one of " + ", ".join(repr(c) for c in choices)
    return f"{field.description}"


def describe_error(error: Any, model: type[BaseModel]) -> str:
    """The line of one pydantic error (``ValidationError.errors()`` item) of a document validated by ``model``."""
    where = _where(model, tuple(error["loc"]))
    location = _format_location(where.names)
    kind = error["type"]
    if kind == "extra_forbidden":
        names = ", ".join(where.holder.model_fields) if where.holder is not None else ""
        note = _kind_note(where.holder)
        return f"{location} = {error['input']!r} is not a known field{note}; allowed fields here: {names}"
    if kind == "union_tag_invalid":
        tag, context = error["ctx"]["discriminator"].strip("'"), error["ctx"]
        return (
            f"{_format_location((*where.names, tag))} = {context['tag']!r} is not allowed: expected one of "
            f"{context['expected_tags']}"
        )
    if kind == "missing":
        return f"{location} is required"
    if not where.names or (kind == "value_error" and where.section is not None):
        section = f"[{'.'.join(str(part) for part in where.names)}]" if where.names else "(top level)"
        return f"{section} {error['msg'].removeprefix('Value error, ')}"
    expected = _expected(where.holder, where.names[-1])
    detail = error["msg"]
    if kind == "literal_error" and expected:
        detail = expected
    elif expected:
        detail = f"{detail} ({expected})"
    return f"{location} = {error['input']!r} is not allowed: {detail}"
