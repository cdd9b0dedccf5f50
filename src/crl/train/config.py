"""The training configuration: a TOML file validated by pydantic models.

Sections: ``[data]``, ``[model]``, ``[loss]``, ``[optim]``, ``[run]``, ``[eval]``. Every field has a default and
a description; unknown fields are errors. :func:`load_config` turns pydantic's errors into a
:class:`ConfigError` whose message names the field, the value given and what is allowed, e.g.::

    configs/x.toml: [loss] form = 'nce' is not allowed: expected one of 'infonce', 'dcl', 'gcl'
"""

from __future__ import annotations

import tomllib
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from crl._vocab import Form, Regime

__all__ = [
    "ConfigError",
    "DataConfig",
    "EvalConfig",
    "LossConfig",
    "ModelConfig",
    "OptimConfig",
    "RunConfig",
    "TrainConfig",
    "config_to_toml",
    "load_config",
    "parse_config",
]


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names each bad field, its value and the fix."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DataConfig(_Section):
    """``[data]``: the paired data set (x_i, y_i), i = 1..n."""

    source: Literal["fashion_mnist", "digits", "synthetic"] = Field(
        default="fashion_mnist",
        description="Data set: Fashion-MNIST (60k train / 10k test images), scikit-learn digits (1,797 8x8 "
        "images, a quick sanity set), or a synthetic ground truth.",
    )
    pairs: Literal["augment", "halves"] = Field(
        default="augment",
        description="How an image becomes a pair: two random augmentations (two views, SimCLR) or its "
        "left and right halves (two 'modalities').",
    )
    root: str = Field(
        default="/usr/share/datasets/fashion-mnist",
        description="Folder with the Fashion-MNIST idx files (Debian package dataset-fashion-mnist).",
    )
    n_train: int = Field(
        default=0,
        ge=0,
        description="n: number of training pairs, the first n of the training split (0: all of it).",
    )
    batch_size: int = Field(
        default=256, ge=2, description="Pairs per step on each process (the global batch is K times this)."
    )
    crop_scale_min: float = Field(
        default=0.6,
        gt=0,
        le=1,
        description="Augment: random resized crop keeps an area fraction in [this, 1].",
    )
    max_shift: int = Field(
        default=0, ge=0, description="Augment: random integer shift of up to this many pixels."
    )
    flip_p: float = Field(default=0.5, ge=0, le=1, description="Augment: probability of a horizontal flip.")
    erase_p: float = Field(default=0.25, ge=0, le=1, description="Augment: probability of random erasing.")
    noise_std: float = Field(default=0.05, ge=0, description="Augment: std of added Gaussian pixel noise.")
    truth: Literal["vmf", "gaussian"] = Field(
        default="vmf",
        description="Synthetic ground truth (source = 'synthetic'): vMF kernel with uniform anchors on the sphere "
        "S^{dim-1}, or the Gaussian two-tower model (THEORY.md section 6).",
    )
    dim: int = Field(default=8, ge=2, description="Synthetic: dimension d of x and y.")
    kappa: float = Field(default=10.0, gt=0, description="Synthetic vMF: concentration kappa of M(z, .).")
    rho: float = Field(
        default=0.8, gt=-1, lt=1, description="Synthetic Gaussian: correlation rho of y with x."
    )
    n_heldout: int = Field(default=10000, ge=2, description="Synthetic: held-out pairs drawn for evaluation.")

    @model_validator(mode="after")
    def _synthetic_needs_n(self) -> DataConfig:
        if self.source == "synthetic" and self.n_train == 0:
            raise ValueError("source = 'synthetic' needs n_train >= 1 (the number of training pairs to draw)")
        return self


class ModelConfig(_Section):
    """``[model]``: the encoders f (anchors) and g (positives) of s(x, y) = <f(x), g(y)>."""

    encoder: Literal["mlp", "cnn"] = Field(
        default="cnn", description="Backbone: an MLP on flattened inputs or a small CNN."
    )
    embedding_dim: int = Field(default=64, ge=1, description="d, the embedding dimension.")
    hidden: list[int] = Field(
        default_factory=lambda: [256], description="MLP hidden layer widths (empty: a linear map)."
    )
    channels: list[int] = Field(
        default_factory=lambda: [32, 64],
        min_length=1,
        description="CNN convolution widths, one 2x pooling each.",
    )
    cnn_hidden: int = Field(default=128, ge=1, description="Width of the CNN's fully connected layer.")
    towers: Literal["shared", "two"] = Field(
        default="shared",
        description="'shared': f = g (Siamese); 'two': separate weights for anchors and positives.",
    )
    normalize: bool = Field(
        default=True, description="Project embeddings onto the unit sphere (cosine scores, [B])."
    )


class LossConfig(_Section):
    """``[loss]``: the contrastive objective and its negatives (THEORY.md sections 1-2)."""

    form: Form = Field(
        default="infonce",
        description="infonce = log(1 + sum_j exp(Delta_ij/tau)); dcl = log sum_j exp(Delta_ij/tau); "
        "gcl = tau log((1/m) sum_j exp(Delta_ij/tau)) ([A]'s L_hat).",
    )
    symmetric: bool = Field(
        default=False, description="Average the x->y and y->x directions (CLIP); shared regime only."
    )
    tau: float = Field(default=0.1, gt=0, description="Temperature tau (its initial value when learnable).")
    learnable_tau: bool = Field(
        default=False, description="Learn tau (stored as log(1/tau), clamped at max_inverse_tau)."
    )
    max_inverse_tau: float = Field(
        default=100.0, gt=0, description="Upper bound on 1/tau for a learnable tau."
    )
    negatives: Literal["in_batch", "shared_pool", "independent_pool", "queue"] = Field(
        default="in_batch",
        description="Negative sampler. Regime 'shared' (SSCRL): in_batch (the other positives of the global "
        "batch, m = K*n - 1), shared_pool (m pool items per step, shared by the batch), queue (the m most "
        "recent positives). Regime 'independent' (SCRL): independent_pool (m pool items per anchor).",
    )
    n_negatives: int = Field(
        default=0,
        ge=0,
        description="m for shared_pool, independent_pool and queue (0 with in_batch, where m = K*n - 1).",
    )

    @model_validator(mode="after")
    def _negatives_are_consistent(self) -> LossConfig:
        if self.negatives == "in_batch" and self.n_negatives != 0:
            raise ValueError(
                f"n_negatives = {self.n_negatives} is not allowed with negatives = 'in_batch' (m = K*n - 1 "
                "there); set n_negatives = 0 or choose shared_pool, independent_pool or queue"
            )
        if self.negatives != "in_batch" and self.n_negatives < 1:
            raise ValueError(
                f"negatives = '{self.negatives}' needs n_negatives (m) >= 1, got {self.n_negatives}"
            )
        if self.symmetric and self.negatives == "independent_pool":
            raise ValueError(
                "symmetric = true is not allowed with negatives = 'independent_pool' (SCRL is one-sided); "
                "set symmetric = false or use a shared-regime sampler"
            )
        if self.learnable_tau and 1.0 / self.tau > self.max_inverse_tau:
            raise ValueError(
                f"tau = {self.tau} gives 1/tau above max_inverse_tau = {self.max_inverse_tau}; "
                "raise max_inverse_tau or tau"
            )
        return self

    @property
    def regime(self) -> Regime:
        """'independent' (SCRL) for independent_pool, else 'shared' (SSCRL)."""
        return "independent" if self.negatives == "independent_pool" else "shared"


class OptimConfig(_Section):
    """``[optim]``: AdamW with linear warm-up then cosine decay, and gradient-norm clipping."""

    lr: float = Field(default=1e-3, gt=0, description="Peak learning rate, reached at the end of warm-up.")
    weight_decay: float = Field(
        default=1e-4, ge=0, description="AdamW decoupled weight decay (weights only, not biases/tau)."
    )
    beta1: float = Field(default=0.9, ge=0, lt=1, description="AdamW first-moment decay.")
    beta2: float = Field(default=0.999, ge=0, lt=1, description="AdamW second-moment decay.")
    warmup_steps: int = Field(
        default=100, ge=0, description="Steps of linear warm-up from lr/warmup_steps to lr."
    )
    total_steps: int = Field(
        default=1000, ge=1, description="Total optimiser steps; the cosine reaches min_lr_ratio*lr here."
    )
    min_lr_ratio: float = Field(
        default=0.0, ge=0, le=1, description="Final learning rate as a fraction of lr."
    )
    grad_clip: float = Field(
        default=1.0, ge=0, description="Clip the global gradient L2 norm to this value (0: off)."
    )

    @model_validator(mode="after")
    def _warmup_fits(self) -> OptimConfig:
        if self.warmup_steps > self.total_steps:
            raise ValueError(
                f"warmup_steps = {self.warmup_steps} exceeds total_steps = {self.total_steps}; "
                "shorten the warm-up or train longer"
            )
        return self


class RunConfig(_Section):
    """``[run]``: where the run lives and how it logs, checkpoints and uses the machine."""

    name: str = Field(default="run", min_length=1, description="Run name; the run folder is out_dir/name.")
    out_dir: str = Field(default="runs", description="Parent folder of run folders.")
    seed: int = Field(
        default=0,
        ge=0,
        description="Seed of every generator (initial weights, data order, views, negatives).",
    )
    checkpoint_every: int = Field(
        default=500, ge=1, description="Write a checkpoint every this many steps (and at the end)."
    )
    keep_checkpoints: int = Field(
        default=3, ge=1, description="Keep this many newest checkpoints; older ones are deleted."
    )
    log_every: int = Field(
        default=50,
        ge=1,
        description="Log loss, lr and tau to metrics.jsonl/TensorBoard every this many steps.",
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="'auto': CUDA when available, else CPU."
    )
    num_threads: int = Field(
        default=0, ge=0, description="torch CPU threads per process (0: leave torch's default)."
    )
    progress: bool = Field(default=True, description="Show a rich progress bar on rank 0.")
    tensorboard: bool = Field(default=True, description="Write TensorBoard event files into the run folder.")


class EvalConfig(_Section):
    """``[eval]``: held-out evaluation by ``crl eval``."""

    seed: int = Field(
        default=1234, ge=0, description="Seed of the fixed generator that makes the held-out views."
    )
    ks: list[int] = Field(
        default_factory=lambda: [1, 5, 10], min_length=1, description="Cut-offs k of recall@k/nDCG@k."
    )
    knn_k: int = Field(default=20, ge=1, description="Neighbours of the weighted kNN classifier (cosine).")
    knn_temperature: float = Field(
        default=0.07, gt=0, description="Vote weight exp(s/T) of the kNN classifier (InstDisc)."
    )
    linear_probe: bool = Field(
        default=True, description="Fit a logistic-regression probe on frozen train embeddings."
    )
    probe_max_iter: int = Field(default=200, ge=1, description="Iterations of the logistic-regression probe.")
    batch_size: int = Field(default=1024, ge=1, description="Images per forward pass when embedding.")


class TrainConfig(_Section):
    """A whole training run: one TOML file with the sections below (all optional)."""

    data: DataConfig = Field(default=DataConfig(), description="The paired data set.")
    model: ModelConfig = Field(default=ModelConfig(), description="The encoders.")
    loss: LossConfig = Field(default=LossConfig(), description="The objective and negatives.")
    optim: OptimConfig = Field(default=OptimConfig(), description="Optimiser and schedule.")
    run: RunConfig = Field(default=RunConfig(), description="Run folder, logging, checkpoints.")
    eval: EvalConfig = Field(default=EvalConfig(), description="Held-out evaluation.")

    @property
    def run_dir(self) -> Path:
        """The run folder out_dir/name."""
        return Path(self.run.out_dir) / self.run.name


def _allowed(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The pydantic model that holds the field at ``loc[:-1]``, for listing its allowed field names."""
    current: type[BaseModel] = model
    for key in loc[:-1]:
        field = current.model_fields.get(str(key))
        annotation = field.annotation if field is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        current = annotation
    return current


def _format_location(loc: tuple[int | str, ...]) -> str:
    if not loc:
        return "(top level)"
    section = [str(part) for part in loc[:-1] if isinstance(part, str)]
    head = f"[{'.'.join(section)}] " if section else ""
    return f"{head}{loc[-1]}"


def _expected(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    holder = _allowed(model, loc)
    if holder is None or not loc:
        return ""
    field = holder.model_fields.get(str(loc[-1]))
    if field is None:
        return ""
    choices = typing.get_args(field.annotation) if typing.get_origin(field.annotation) is Literal else ()
    if choices:
        return "expected one of " + ", ".join(repr(c) for c in choices)
    return f"{field.description}"


def _describe(error: Any, model: type[BaseModel]) -> str:
    loc = tuple(error["loc"])
    where = _format_location(loc)
    kind = error["type"]
    if kind == "extra_forbidden":
        holder = _allowed(model, loc)
        names = ", ".join(holder.model_fields) if holder is not None else ""
        return f"{where} = {error['input']!r} is not a known field; allowed fields here: {names}"
    if kind == "missing":
        return f"{where} is required"
    if not loc or (kind == "value_error" and _allowed(model, (*loc, "_")) is not None):
        section = f"[{'.'.join(str(part) for part in loc)}]" if loc else "(top level)"
        return f"{section} {error['msg'].removeprefix('Value error, ')}"
    expected = _expected(model, loc)
    detail = error["msg"]
    if kind == "literal_error" and expected:
        detail = expected
    elif expected:
        detail = f"{detail} ({expected})"
    return f"{where} = {error['input']!r} is not allowed: {detail}"


def parse_config(data: dict[str, Any], *, source: str = "config") -> TrainConfig:
    """Validate a parsed TOML document into a :class:`TrainConfig`.

    Raises:
        ConfigError: listing every bad field with its value and what is allowed.
    """
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as exc:
        lines = [_describe(error, TrainConfig) for error in exc.errors()]
        raise ConfigError(f"{source}: " + "\n  ".join(lines)) from None


def load_config(path: str | Path) -> TrainConfig:
    """Read and validate a TOML config file.

    Raises:
        ConfigError: if the file is missing, is not valid TOML, or has bad fields (each named with its value).
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist; pass the path of a .toml file")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    return parse_config(data, source=str(path))


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


def config_to_toml(config: TrainConfig) -> str:
    """The config as TOML text (every field written, so the file documents the whole run)."""
    lines: list[str] = []
    for section, values in config.model_dump().items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in values.items()]
        lines.append("")
    return "\n".join(lines)
