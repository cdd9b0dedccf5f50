"""Config files: TOML read (:func:`read_toml`) and written back (:func:`config_to_toml`), ``--set`` overrides applied
to the parsed document (:func:`apply_overrides`), the flat sections of old run folders migrated
(:func:`migrate_flat_sections`), and one line per validation error (:func:`describe_error`).

Overrides: ``--set section.field=value`` replaces one field before validation, so the config models check it
exactly as if it had been written in the file: ``--set loss.n_negatives=1024`` sets ``[loss] n_negatives = 1024``.
The value is read as a TOML literal (``1024`` an integer, ``1e-3`` a float, ``true`` a boolean, ``"x"`` or
``[1, 2]`` as written); a bare word that is not a TOML literal (``--set run.name=sweep3``) is taken as a string,
and a string where the field wants a number is still refused by the strict config.

Migration: before ``[data]`` and ``[model]`` became kinds they were one flat bag each, and a run folder's
``config.toml`` and every checkpoint's JSON carried *every* flat field (``root`` and ``kappa`` alike). A section
that holds all the flat fields is such a file: it becomes the section of its kind (``source``, ``encoder``) with
that kind's fields only; the fields of other kinds are dropped (they never acted on the run), and the CNN's
``cnn_hidden`` is now ``hidden``. A section written by hand with a few fields is never migrated, so a stray field
there is still an error that names it.

Error lines: locations of a section whose kind is chosen by a tag carry the tag, e.g. ``("data", "digits",
"root")``; the line drops it (``[data] root``) and says which kind the field was looked up in. A field's own
validator (a ``ValueError`` of one field) says what it expects, so its line carries that message alone.
"""

from __future__ import annotations

import copy
import tomllib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import BaseModel

from crl._validate import missing_file

__all__ = [
    "FLAT_DATA_FIELDS",
    "FLAT_MODEL_FIELDS",
    "KIND_FIELDS",
    "ConfigError",
    "Override",
    "apply_overrides",
    "config_to_toml",
    "describe_error",
    "migrate_flat_sections",
    "parse_override",
    "read_toml",
]

KIND_FIELDS = {"data": "source", "model": "encoder"}
"""The field that names the kind of each tagged section (written first)."""


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names each bad field, its value and the fix."""


def read_toml(path: str | Path) -> dict[str, Any]:
    """The TOML document of a config file as a dict.

    Raises:
        ConfigError: if the file is missing or is not valid TOML.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} {missing_file(path)}; pass the path of a .toml file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} value {value!r} to TOML")


def config_to_toml(config: BaseModel) -> str:
    """The config as TOML text (every field written, the kind of a section first, so the file documents the run)."""
    lines: list[str] = []
    for section, values in config.model_dump().items():
        tag = KIND_FIELDS.get(section)
        ordered = sorted(values.items(), key=lambda item: item[0] != tag)
        lines.append(f"[{section}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in ordered]
        lines.append("")
    return "\n".join(lines)


@dataclass(frozen=True)
class Override:
    """One ``path=value`` override.

    Attributes:
        path: the field's path, e.g. ``("loss", "n_negatives")``.
        value: the parsed TOML literal.
        text: the override as given, for messages.
    """

    path: tuple[str, ...]
    value: Any
    text: str


def parse_override(text: str) -> Override:
    """Parse ``section.field=value`` (the value a TOML literal, or a bare word taken as a string).

    Raises:
        ValueError: if there is no ``=``, the path is empty or has an empty part; the message shows the form.
    """
    key, sep, raw = text.partition("=")
    path = tuple(part.strip() for part in key.split("."))
    if not sep or not all(path):
        raise ValueError(
            f"--set {text!r} is not of the form section.field=value, e.g. --set loss.n_negatives=1024"
        )
    return Override(path, _toml_literal(raw.strip()), text)


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """A copy of the parsed TOML document ``data`` with each override applied in order (later ones win).

    Missing tables on the way are created (the config's validation then names any unknown field).

    Raises:
        ValueError: on a malformed override, or when a path runs through a field that is not a table.
    """
    result = copy.deepcopy(dict(data))
    for text in overrides:
        override = parse_override(text)
        table = result
        for depth, part in enumerate(override.path[:-1]):
            nested = table.setdefault(part, {})
            if not isinstance(nested, dict):
                where = ".".join(override.path[: depth + 1])
                raise ValueError(
                    f"--set {text!r}: {where} is a value, not a section; set {where}=... instead"
                )
            table = nested
        table[override.path[-1]] = override.value
    return result


def _toml_literal(raw: str) -> Any:
    """``raw`` read as the right-hand side of a TOML assignment, or ``raw`` itself when it is not one."""
    try:
        return tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        return raw


FLAT_DATA_FIELDS = frozenset(
    {
        "source",
        "pairs",
        "root",
        "n_train",
        "batch_size",
        "crop_scale_min",
        "max_shift",
        "flip_p",
        "erase_p",
        "noise_std",
        "truth",
        "dim",
        "kappa",
        "rho",
        "n_heldout",
    }
)
"""The fields of the flat ``[data]`` section, all written to every run folder before the change."""

FLAT_MODEL_FIELDS = frozenset(
    {"encoder", "embedding_dim", "hidden", "channels", "cnn_hidden", "towers", "normalize"}
)
"""The fields of the flat ``[model]`` section."""


def _kind(kinds: tuple[type[BaseModel], ...], tag: str, value: Any) -> type[BaseModel] | None:
    return next((kind for kind in kinds if kind.model_fields[tag].default == value), None)


def _migrate_data(flat: dict[str, Any], kinds: tuple[type[BaseModel], ...]) -> dict[str, Any]:
    kind = _kind(kinds, "source", flat["source"])
    if kind is None:
        return flat
    return {key: value for key, value in flat.items() if key in kind.model_fields}


def _migrate_model(flat: dict[str, Any], kinds: tuple[type[BaseModel], ...]) -> dict[str, Any]:
    if flat["encoder"] == "cnn":
        flat = {**flat, "hidden": flat["cnn_hidden"]}
    kind = _kind(kinds, "encoder", flat["encoder"])
    if kind is None:
        return flat
    return {key: value for key, value in flat.items() if key in kind.model_fields}


def migrate_flat_sections(
    document: dict[str, Any],
    data_kinds: tuple[type[BaseModel], ...],
    model_kinds: tuple[type[BaseModel], ...],
) -> dict[str, Any]:
    """``document`` with a flat ``[data]`` / ``[model]`` (one holding every flat field) turned into its kind.

    ``data_kinds`` and ``model_kinds`` are the kinds a flat section can name (by ``source``, ``encoder``). Any
    other document, and a section with an unknown ``source`` or ``encoder``, is returned unchanged, so validation
    reports it as usual.
    """
    migrated = dict(document)
    data, model = document.get("data"), document.get("model")
    if isinstance(data, dict) and set(data) >= FLAT_DATA_FIELDS:
        migrated["data"] = _migrate_data(data, data_kinds)
    if isinstance(model, dict) and set(model) >= FLAT_MODEL_FIELDS:
        migrated["model"] = _migrate_model(model, model_kinds)
    return migrated


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
    if kind == "value_error":
        detail = detail.removeprefix("Value error, ")
    elif kind == "literal_error" and expected:
        detail = expected
    elif expected:
        detail = f"{detail} ({expected})"
    return f"{location} = {error['input']!r} is not allowed: {detail}"
