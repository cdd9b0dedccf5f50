"""The whole training configuration, :class:`TrainConfig` (every section), and how a TOML file becomes one:
:func:`load_config` (file, ``--set`` overrides, old flat sections migrated, validation), :func:`parse_config`,
:func:`parse_saved_config`, and :func:`resume_differences` between a saved run and a new config."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import (
    Field,
    ValidationError,
    model_validator,
)

from crl.train.config.base import Section
from crl.train.config.data import (
    FLAT_DATA_KINDS,
    LOCKED_TWO_MODALITIES,
    DataConfig,
    FashionMnistData,
    LockedData,
)
from crl.train.config.files import (
    KIND_FIELDS,
    ConfigError,
    apply_overrides,
    describe_error,
    migrate_flat_sections,
    read_toml,
)
from crl.train.config.loss import LossConfig
from crl.train.config.model import FLAT_MODEL_KINDS, CnnModel, MlpModel, ModelConfig
from crl.train.config.sections import EvalConfig, OptimConfig, RunConfig


class TrainConfig(Section):
    """A whole training run: one TOML file with the sections below (all optional).

    ``RESUMABLE`` declares, as dotted field paths (a section name stands for all its fields), what may differ
    between a run folder's config and the config that resumes it: where the folder is, how the run reports,
    the machine, and the held-out evaluation; none changes what is trained (threads and device may change
    floating-point rounding). :func:`resume_differences` checks every other field.
    """

    RESUMABLE: ClassVar[frozenset[str]] = frozenset(
        {
            "run.name",
            "run.out_dir",
            "run.progress",
            "run.tensorboard",
            "run.device",
            "run.num_threads",
            "run.log_every",
            "run.checkpoint_every",
            "run.keep_checkpoints",
            "run.eval_every",
            "run.eval_pairs",
            "eval",
        }
    )

    data: DataConfig = Field(default=FashionMnistData(), description="The paired data set.")
    model: ModelConfig = Field(default=CnnModel(), description="The encoders.")
    loss: LossConfig = Field(default=LossConfig(), description="The objective and negatives.")
    optim: OptimConfig = Field(default=OptimConfig(), description="Optimiser and schedule.")
    run: RunConfig = Field(default=RunConfig(), description="Run folder, logging, checkpoints.")
    eval: EvalConfig = Field(default=EvalConfig(), description="Held-out evaluation.")

    @model_validator(mode="before")
    @classmethod
    def _default_kinds(cls, document: Any) -> Any:
        """A ``[data]`` without ``source`` or a ``[model]`` without ``encoder`` is of the default kind."""
        if not isinstance(document, dict):
            return document
        filled = dict(document)
        for section, tag in KIND_FIELDS.items():
            values = filled.get(section)
            if isinstance(values, dict) and tag not in values:
                filled[section] = {tag: getattr(cls.model_fields[section].default, tag), **values}
        return filled

    @model_validator(mode="after")
    def _a_head_on_locked_features(self) -> TrainConfig:
        """``[data] source = "locked"`` trains a head per tower: an MLP with at most one hidden layer, onto S^{d-1};
        two towers where x and y come from two backbones (:data:`LOCKED_TWO_MODALITIES`)."""
        model = self.model
        if isinstance(self.data, LockedData) and not (
            isinstance(model, MlpModel) and len(model.hidden) <= 1 and model.normalize
        ):
            got = f"encoder = '{model.encoder}'" + (
                f", hidden = {model.hidden}, normalize = {str(model.normalize).lower()}"
                if isinstance(model, MlpModel)
                else ""
            )
            raise ValueError(
                f"[data] source = 'locked' trains a head on the features: set [model] encoder = 'mlp' with "
                f"hidden = [] (linear) or [width] (one hidden layer) and normalize = true; got {got}"
            )
        data = self.data
        if isinstance(data, LockedData) and data.dataset in LOCKED_TWO_MODALITIES and model.towers != "two":
            raise ValueError(
                f"[data] dataset = '{data.dataset}' pairs features of two backbones (an image's and a text's, "
                "of two widths), which one shared tower cannot read; set [model] towers = 'two'"
            )
        return self

    @property
    def run_dir(self) -> Path:
        """The run folder out_dir/name."""
        return Path(self.run.out_dir) / self.run.name


def _flatten(document: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"optim": {"lr": 0.1}}`` -> ``{"optim.lr": 0.1}`` (lists stay values)."""
    flat: dict[str, Any] = {}
    for key, value in document.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{path}."))
        else:
            flat[path] = value
    return flat


def _resumable(path: str) -> bool:
    section = path.split(".", 1)[0]
    return path in TrainConfig.RESUMABLE or section in TrainConfig.RESUMABLE


def resume_differences(saved: TrainConfig, current: TrainConfig) -> list[str]:
    """The fields outside :attr:`TrainConfig.RESUMABLE` whose values differ, one line each.

    A line reads ``[optim] lr: 0.003 in the run folder, 0.01 now``; a field that only one side has (another
    ``source`` or ``encoder``) reads as ``None`` on the other.
    """
    old, new = _flatten(saved.model_dump()), _flatten(current.model_dump())
    lines = []
    for path in [*new, *(path for path in old if path not in new)]:
        if _resumable(path) or old.get(path) == new.get(path):
            continue
        section, key = path.rsplit(".", 1)
        lines.append(f"[{section}] {key}: {old.get(path)!r} in the run folder, {new.get(path)!r} now")
    return lines


def parse_config(document: dict[str, Any], *, source: str = "config") -> TrainConfig:
    """Validate a parsed TOML document into a :class:`TrainConfig`.

    A ``[data]`` or ``[model]`` section in the flat layout of run folders written before the sections became
    kinds is migrated first (:func:`crl.train.config.files.migrate_flat_sections`).

    Raises:
        ConfigError: listing every bad field with its value and what is allowed.
    """
    try:
        return TrainConfig.model_validate(migrate_flat_sections(document, FLAT_DATA_KINDS, FLAT_MODEL_KINDS))
    except ValidationError as exc:
        lines = [describe_error(error, TrainConfig) for error in exc.errors()]
        raise ConfigError(f"{source}: " + "\n  ".join(lines)) from None


IMAGE_SOURCES = ("fashion_mnist", "digits")
"""The ``[data]`` sources of images, whose configs have ``validation``."""


def parse_saved_config(document: dict[str, Any], *, source: str = "saved config") -> TrainConfig:
    """A config saved by a run (its ``config.toml`` or a checkpoint's JSON), validated by :func:`parse_config`.

    Runs write every field, so an image ``[data]`` saved without ``validation`` comes from a run made before the
    field existed, which trained on every training image: it reads as ``validation = 0`` (none held out), not
    as today's default.
    """
    data = document.get("data")
    if isinstance(data, dict) and data.get("source") in IMAGE_SOURCES and "validation" not in data:
        document = {**document, "data": {**data, "validation": 0}}
    return parse_config(document, source=source)


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read and validate a TOML config file: TOML -> dict -> overrides -> (flat layout migrated) -> validation.

    Args:
        path: the TOML file.
        overrides: ``section.field=value`` strings (``crl train --set``), applied in order to the parsed
            document before validation (:func:`crl.train.config.files.apply_overrides`), so strict types still apply.

    Raises:
        ConfigError: if the file is missing, is not valid TOML, an override is malformed, or a field is bad
            (each named with its value).
    """
    data = read_toml(path)
    try:
        data = apply_overrides(data, overrides)
    except ValueError as error:
        raise ConfigError(f"{path}: {error}") from None
    source = str(path) + (f" with --set {' --set '.join(overrides)}" if overrides else "")
    return parse_config(data, source=source)
