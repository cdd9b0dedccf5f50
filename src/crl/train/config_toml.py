"""Config files as TOML: read one (:func:`read_toml`), write a validated config back (:func:`config_to_toml`, the
``config.toml`` of a run folder and ``crl config --check``), and the error both raise (:class:`ConfigError`)."""

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel

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
        raise ConfigError(f"config file {str(path)!r} does not exist; pass the path of a .toml file")
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
