"""What every section of the training configuration shares: :class:`Section` (frozen, unknown fields are errors,
strict and finite types) and the field types read in several sections (a folder name, a validation count)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    PlainValidator,
)


def _one_folder_name(name: str) -> str:
    """A folder name inside a parent folder: no path separator, not '.' or '..' (nothing written outside)."""
    if name in (".", "..") or any(sep in name for sep in ("/", "\\", "\0")):
        raise ValueError("must be one folder name inside out_dir (no '/', '\\', '.' or '..')")
    return name


FolderName = Annotated[str, AfterValidator(_one_folder_name)]
"""A string field that names one folder (``[run] name``: the run folder is out_dir/name)."""


def _validation_count(value: object) -> int | Literal["auto"]:
    """``[data] validation``: "auto" or an integer >= 0 (not a bool).

    Raises:
        ValueError: for anything else, naming the two forms.
    """
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise ValueError("expected 'auto' or a count of images >= 0 (0: no validation images)")


ValidationCount = Annotated[int | Literal["auto"], PlainValidator(_validation_count)]
"""``[data] validation``: how many training images are held out to choose the vectors, or "auto"."""


class Section(BaseModel):
    """A config section: frozen, unknown fields are errors, and types are strict and finite.

    Strict: a value must already have its field's type (TOML ``tau = "0.1"`` or ``batch_size = "32"`` is an
    error, not a number; an integer is fine where a float is wanted, and ``true`` is not 1). Finite: inf and NaN
    are refused in every float field.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def choice_in_words(values: Sequence[object]) -> str:
    """The values as a choice in words: ``'a'``, ``'a' or 'b'``, ``'a', 'b' or 'c'``."""
    shown = [repr(value) for value in values]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
