"""Command-line overrides of a config: ``--set section.field=value`` applied to the parsed TOML document.

An override replaces one field before validation, so the config models check it exactly as if it had been
written in the file: ``--set loss.n_negatives=1024`` sets ``[loss] n_negatives = 1024``. The value is read as
a TOML literal (``1024`` an integer, ``1e-3`` a float, ``true`` a boolean, ``"x"`` or ``[1, 2]`` as written);
a bare word that is not a TOML literal (``--set run.name=sweep3``) is taken as a string, and a string where
the field wants a number is still refused by the strict config.
"""

import copy
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Override", "apply_overrides", "parse_override"]


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
