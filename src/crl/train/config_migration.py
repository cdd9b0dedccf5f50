"""Run folders written before ``[data]`` and ``[model]`` became kinds: their flat sections, migrated.

Before, ``[data]`` and ``[model]`` were one flat bag each, and a run folder's ``config.toml`` and every
checkpoint's JSON carried *every* flat field (``root`` and ``kappa`` alike). A section that holds all the flat
fields is such a file: it becomes the section of its kind (``source``, ``encoder``) with that kind's fields
only; the fields of other kinds are dropped (they never acted on the run), and the CNN's ``cnn_hidden`` is now
``hidden``. A section written by hand with a few fields is never migrated, so a stray field there is still an
error that names it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from crl.train.config_kinds import (
    BagModel,
    CnnModel,
    DigitsData,
    FashionMnistData,
    MlpModel,
    SyntheticData,
)

__all__ = ["FLAT_DATA_FIELDS", "FLAT_MODEL_FIELDS", "migrate_flat_sections"]

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

_DATA_KINDS: tuple[type[BaseModel], ...] = (FashionMnistData, DigitsData, SyntheticData)
_MODEL_KINDS: tuple[type[BaseModel], ...] = (MlpModel, CnnModel, BagModel)


def _kind(kinds: tuple[type[BaseModel], ...], tag: str, value: Any) -> type[BaseModel] | None:
    return next((kind for kind in kinds if kind.model_fields[tag].default == value), None)


def _migrate_data(flat: dict[str, Any]) -> dict[str, Any]:
    kind = _kind(_DATA_KINDS, "source", flat["source"])
    if kind is None:
        return flat
    return {key: value for key, value in flat.items() if key in kind.model_fields}


def _migrate_model(flat: dict[str, Any]) -> dict[str, Any]:
    if flat["encoder"] == "cnn":
        flat = {**flat, "hidden": flat["cnn_hidden"]}
    kind = _kind(_MODEL_KINDS, "encoder", flat["encoder"])
    if kind is None:
        return flat
    return {key: value for key, value in flat.items() if key in kind.model_fields}


def migrate_flat_sections(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with a flat ``[data]`` / ``[model]`` (one holding every flat field) turned into its kind.

    Any other document, and a section with an unknown ``source`` or ``encoder``, is returned unchanged, so
    validation reports it as usual.
    """
    migrated = dict(document)
    data, model = document.get("data"), document.get("model")
    if isinstance(data, dict) and set(data) >= FLAT_DATA_FIELDS:
        migrated["data"] = _migrate_data(data)
    if isinstance(model, dict) and set(model) >= FLAT_MODEL_FIELDS:
        migrated["model"] = _migrate_model(model)
    return migrated
