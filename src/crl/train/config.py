"""The training configuration: a TOML file validated by pydantic models.

Sections: ``[data]``, ``[model]``, ``[loss]``, ``[optim]``, ``[run]``, ``[eval]``. ``[data]`` and ``[model]`` are
kinds chosen by ``source`` and ``encoder`` (:mod:`crl.train.config_kinds`), each with only its own fields. Every
field has a default and a description; unknown fields are errors; types are strict (no string -> number) and
floats finite. :func:`load_config` turns pydantic's errors into a
:class:`ConfigError` whose message names the field, the value given and what is allowed, e.g.::

    configs/x.toml: [loss] form = 'nce' is not allowed: expected one of 'infonce', 'dcl', 'gcl'
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationError, model_validator

from crl._vocab import Form, Regime
from crl.train._config_errors import describe_error
from crl.train.config_estimator import EstimatorFields, check_estimator
from crl.train.config_kinds import (
    ArraysData,
    BagModel,
    CnnModel,
    DataConfig,
    DigitsData,
    FashionMnistData,
    FolderName,
    MlpModel,
    ModelConfig,
    Section,
    SyntheticData,
)
from crl.train.config_migration import migrate_flat_sections
from crl.train.config_temperature import TemperatureFields, check_temperature
from crl.train.config_toml import KIND_FIELDS, ConfigError, config_to_toml, read_toml
from crl.train.overrides import apply_overrides

__all__ = [
    "ArraysData",
    "BagModel",
    "CnnModel",
    "ConfigError",
    "DataConfig",
    "DigitsData",
    "EvalConfig",
    "FashionMnistData",
    "LossConfig",
    "MlpModel",
    "ModelConfig",
    "OptimConfig",
    "RunConfig",
    "SyntheticData",
    "TrainConfig",
    "config_to_toml",
    "load_config",
    "parse_config",
    "read_toml",
    "resume_differences",
]


class LossConfig(EstimatorFields, TemperatureFields):
    """``[loss]``: the contrastive objective, its negatives and its estimator (docs/theory.md sections 1-2,
    docs/estimators.md; the estimator's fields are in :class:`~crl.train.config_estimator.EstimatorFields`)."""

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
    negatives: Literal["in_batch", "shared_pool", "independent_pool", "queue", "mined"] = Field(
        default="in_batch",
        description="Negative sampler. Regime 'shared' (SSCRL): in_batch (the other positives of the global "
        "batch, m = K*n - 1), shared_pool (m pool items per step, shared by the batch), queue (the m most "
        "recent positives). Regime 'independent' (SCRL): independent_pool (m pool items per anchor), mined "
        "(m hard negatives per anchor from an index of the pool: crl.negatives.mining).",
    )
    n_negatives: int = Field(
        default=0,
        ge=0,
        description="m for shared_pool, independent_pool, queue and mined (0 with in_batch, where m = K*n - 1).",
    )
    mine_window: list[int] = Field(
        default_factory=lambda: [10, 100],
        min_length=2,
        max_length=2,
        description="negatives = 'mined': the 1-based ranks (lo, hi) of the candidates in each anchor's ranking.",
    )
    mine_margin: float = Field(
        default=0.0,
        description="negatives = 'mined': keep candidates scoring <= the positive's score - margin.",
    )
    mine_refresh_every: int = Field(
        default=100,
        ge=1,
        description="negatives = 'mined': rebuild the index of the pool every this many steps.",
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
        if self.negatives == "mined" and not 1 <= self.mine_window[0] <= self.mine_window[1]:
            raise ValueError(f"mine_window = {list(self.mine_window)}; pass [lo, hi] with 1 <= lo <= hi")
        if self.symmetric and self.negatives in ("independent_pool", "mined"):
            raise ValueError(
                f"symmetric = true is not allowed with negatives = '{self.negatives}' (SCRL is one-sided); "
                "set symmetric = false or use a shared-regime sampler"
            )
        if self.learnable_tau and 1.0 / self.tau > self.max_inverse_tau:
            raise ValueError(
                f"tau = {self.tau} gives 1/tau above max_inverse_tau = {self.max_inverse_tau}; "
                "raise max_inverse_tau or tau"
            )
        check_estimator(self)
        check_temperature(self)
        return self

    @property
    def regime(self) -> Regime:
        """'independent' (SCRL) for independent_pool, else 'shared' (SSCRL)."""
        return "independent" if self.negatives in ("independent_pool", "mined") else "shared"


class OptimConfig(Section):
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
    chunk_size: int = Field(
        default=0,
        ge=0,
        description="GradCache: embed the batch this many inputs at a time without a graph, take the exact "
        "loss, then backpropagate chunk by chunk (memory of one chunk, same gradients; 0: off, one graph).",
    )

    @model_validator(mode="after")
    def _warmup_fits(self) -> OptimConfig:
        if self.warmup_steps > self.total_steps:
            raise ValueError(
                f"warmup_steps = {self.warmup_steps} exceeds total_steps = {self.total_steps}; "
                "shorten the warm-up or train longer"
            )
        return self


class RunConfig(Section):
    """``[run]``: where the run lives and how it logs, checkpoints and uses the machine."""

    name: FolderName = Field(
        default="run", min_length=1, description="Run name, one folder name; the run folder is out_dir/name."
    )
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
    eval_every: int = Field(
        default=0,
        ge=0,
        description="Every this many steps log held-out accuracy@1 and MRR (heldout/ in metrics.jsonl and "
        "TensorBoard) on the first eval_pairs held-out pairs (0: off).",
    )
    eval_pairs: int = Field(
        default=1000, ge=2, description="Held-out pairs of the periodic held-out metric (eval_every)."
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="'auto': CUDA when available, else CPU."
    )
    num_threads: int = Field(
        default=0, ge=0, description="torch CPU threads per process (0: leave torch's default)."
    )
    init_from: str = Field(
        default="",
        description="Checkpoint whose encoder weights start this new run (crl train --init-from; '': the "
        "weights are drawn from seed).",
    )
    precision: Literal["fp32", "bf16"] = Field(
        default="fp32",
        description="bf16: the forward pass and the loss run under torch.autocast(bfloat16) (GEMMs in bf16, the "
        "loss's log-sum-exps and accumulators in float32; on a CPU without AVX-512 BF16 or AMX they are emulated "
        "and much slower, and the trainer warns); fp32: no autocast.",
    )
    progress: bool = Field(default=True, description="Show a rich progress bar on rank 0.")
    tensorboard: bool = Field(default=True, description="Write TensorBoard event files into the run folder.")


class EvalConfig(Section):
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

    @property
    def run_dir(self) -> Path:
        """The run folder out_dir/name."""
        return Path(self.run.out_dir) / self.run.name


"""The field of each union section that picks its kind."""


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
    kinds is migrated first (:func:`crl.train.config_migration.migrate_flat_sections`).

    Raises:
        ConfigError: listing every bad field with its value and what is allowed.
    """
    try:
        return TrainConfig.model_validate(migrate_flat_sections(document))
    except ValidationError as exc:
        lines = [describe_error(error, TrainConfig) for error in exc.errors()]
        raise ConfigError(f"{source}: " + "\n  ".join(lines)) from None


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read and validate a TOML config file: TOML -> dict -> overrides -> (flat layout migrated) -> validation.

    Args:
        path: the TOML file.
        overrides: ``section.field=value`` strings (``crl train --set``), applied in order to the parsed
            document before validation (:mod:`crl.train.overrides`), so strict types still apply.

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
