"""The training loop: ``Trainer(config).fit() -> RunResult``.

One step: take the next global batch of K*b pair indices (:class:`~crl.train.cursor.DataCursor`), make this
rank's b pairs (fresh augmented views from the "views" generator), embed them, draw negatives with the sampler
of ``[loss] negatives`` (:mod:`crl.negatives`; pool items are embedded by the positive tower), compute the loss
(:func:`crl.train.loss.batch_loss`, i.e. :func:`crl.objectives.contrastive_loss`), and take an AdamW step
with gradient-norm clipping and the warm-up + cosine schedule.

Run folder ``run.out_dir/run.name``: ``config.toml``, ``metrics.jsonl`` (one JSON row per ``log_every``
steps), TensorBoard events, ``checkpoints/step-*.safetensors`` + ``.json`` every ``checkpoint_every`` steps and
at the end. A new ``Trainer`` with the same config resumes from the newest checkpoint: model, optimiser,
schedule, every generator state of every rank, the queue, the data permutation and position, and the step are
restored, so the resumed run ends bitwise equal to an uninterrupted one (with the same thread count).

Randomness: four named streams from :func:`~crl.train.build.derive_generator`: "init" (weights), "order"
(data permutation, same on all ranks), "views" (augmentations, per rank), "negatives" (pool draws and their
views; the same on all ranks in the shared regime, so shared negatives are shared by the global batch, and per
rank in the independent regime).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from torch import Tensor

from crl.negatives import (
    EmbeddedBatch,
    Gathered,
    Independent,
    Negatives,
    Queue,
    Sampler,
    Shared,
    embed_negatives,
)
from crl.train.build import build_model, build_optimizer, build_schedule, derive_generator
from crl.train.checkpoint import (
    load_checkpoint,
    load_optimizer_state,
    newest_checkpoint,
    optimizer_state_tensors,
    save_checkpoint,
)
from crl.train.config import ConfigError, TrainConfig, config_to_toml, load_config
from crl.train.cursor import DataCursor
from crl.train.distributed import (
    DistContext,
    all_gather_equal,
    init_distributed,
    mean_over_ranks,
    shutdown,
    wrap_model,
)
from crl.train.loss import batch_loss
from crl.train.source import PairSource

__all__ = ["RunResult", "Trainer", "build_sampler"]

_RESUMABLE_CHANGES = {
    "run": {
        "name",
        "out_dir",
        "progress",
        "tensorboard",
        "device",
        "num_threads",
        "log_every",
        "checkpoint_every",
        "keep_checkpoints",
    }
}
"""Fields that may differ between a run folder's config and the config that resumes it ([eval] may too):
where the folder is, how the run reports, and the machine; none changes what is trained (threads and device may
change floating-point rounding)."""


@dataclass(frozen=True)
class RunResult:
    """The outcome of :meth:`Trainer.fit`.

    Attributes:
        run_dir: the run folder.
        checkpoint: the final checkpoint (safetensors path).
        step: the last optimiser step.
        metrics: the last logged row (loss, lr, tau, pairs_per_s, ...).
        wall_time_s: seconds spent in this call of ``fit`` (not counting earlier, interrupted calls).
        resumed_from: the step this call started from (0 for a fresh run).
    """

    run_dir: Path
    checkpoint: Path
    step: int
    metrics: dict[str, float]
    wall_time_s: float
    resumed_from: int


def build_sampler(config: TrainConfig, source: PairSource, context: DistContext) -> Sampler:
    """The negative sampler of ``[loss] negatives`` (in-batch becomes :class:`Gathered` with K > 1 ranks)."""
    loss = config.loss
    m = loss.n_negatives
    if loss.negatives == "in_batch":
        return Gathered() if context.distributed else Shared.in_batch()
    if loss.negatives == "queue":
        return Queue(m, config.model.embedding_dim, two_sided=loss.symmetric, distributed=context.distributed)
    generate = source.generate_negatives
    if loss.negatives == "shared_pool":
        return (
            Shared.from_generator(generate, m)
            if generate is not None
            else Shared.from_pool(source.n_pairs, m)
        )
    return (
        Independent.from_generator(generate, m)
        if generate is not None
        else Independent.from_pool(source.n_pairs, m)
    )


def _config_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    differences = []
    for section, values in current.items():
        for key, value in values.items():
            if key in _RESUMABLE_CHANGES.get(section, set()) or section == "eval":
                continue
            old = saved.get(section, {}).get(key)
            if old != value:
                differences.append(f"[{section}] {key}: {old!r} in the run folder, {value!r} now")
    return differences


class _RunLog:
    """metrics.jsonl and TensorBoard events of rank 0; rows after the resumed step are dropped on resume."""

    def __init__(self, run_dir: Path, *, resumed_step: int, tensorboard: bool) -> None:
        self.path = run_dir / "metrics.jsonl"
        if self.path.exists():
            kept = [
                line
                for line in self.path.read_text(encoding="utf-8").splitlines()
                if line.strip() and json.loads(line)["step"] <= resumed_step
            ]
            self.path.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")
        self.handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        self.writer: Any = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(run_dir / "tensorboard"), purge_step=resumed_step + 1)

    def write(self, row: dict[str, float]) -> None:
        """Append one row to metrics.jsonl (flushed) and its scalars to TensorBoard."""
        self.handle.write(json.dumps(row) + "\n")
        self.handle.flush()
        if self.writer is not None:
            step = int(row["step"])
            for key, value in row.items():
                if key != "step":
                    self.writer.add_scalar(f"train/{key}", value, step)

    def close(self) -> None:
        """Close metrics.jsonl and the TensorBoard writer."""
        self.handle.close()
        if self.writer is not None:
            self.writer.close()


class Trainer:
    """Trains the dual encoder of a :class:`~crl.train.config.TrainConfig`; see the module docstring.

    Args:
        config: the validated config (``load_config(path)``).
        source: the training pairs; by default built from ``[data]`` (:func:`crl.train.data.build_source`).

    Examples:
        >>> result = Trainer(load_config("configs/fashion_sscrl.toml")).fit()  # doctest: +SKIP
        >>> result.checkpoint  # doctest: +SKIP
        PosixPath('runs/fashion_sscrl/checkpoints/step-00001500.safetensors')
    """

    def __init__(self, config: TrainConfig, *, source: PairSource | None = None) -> None:
        self.config = config
        if config.run.num_threads > 0:
            torch.set_num_threads(config.run.num_threads)
        self.context = init_distributed(config.run.device)
        if source is None:
            from crl.train.data import build_source

            source = build_source(config.data, seed=config.run.seed, split="train")
        self.source = source
        rank, seed = self.context.rank, config.run.seed
        self.model = build_model(
            config.model,
            config.loss,
            source.anchor_shape,
            source.positive_shape,
            derive_generator(seed, "init"),
        ).to(self.context.device)
        self.optimizer = build_optimizer(self.model, config.optim)
        self.schedule = build_schedule(self.optimizer, config.optim)
        negatives_rank = rank if config.loss.regime == "independent" else 0
        self.generators = {
            "order": derive_generator(seed, "order"),
            "views": derive_generator(seed, "views", rank),
            "negatives": derive_generator(seed, "negatives", negatives_rank),
        }
        global_batch = config.data.batch_size * self.context.world_size
        self.cursor = DataCursor(source.n_pairs, global_batch, self.generators["order"])
        self.sampler = build_sampler(config, source, self.context)
        self.step = 0

    @property
    def run_dir(self) -> Path:
        """The run folder."""
        return self.config.run_dir

    def fit(self) -> RunResult:
        """Train to ``optim.total_steps`` (resuming from the newest checkpoint) and return the result."""
        started = time.perf_counter()
        self._prepare_run_dir()
        resumed_from = self._resume()
        final = newest_checkpoint(self.run_dir / "checkpoints")
        if resumed_from >= self.config.optim.total_steps and final is not None:
            shutdown(self.context)
            return RunResult(
                self.run_dir, final, resumed_from, {}, time.perf_counter() - started, resumed_from
            )
        network = wrap_model(self.model, self.context)
        log = (
            _RunLog(self.run_dir, resumed_step=resumed_from, tensorboard=self.config.run.tensorboard)
            if self.context.is_main
            else None
        )
        try:
            metrics, final = self._loop(network, log)
        finally:
            if log is not None:
                log.close()
            shutdown(self.context)
        return RunResult(self.run_dir, final, self.step, metrics, time.perf_counter() - started, resumed_from)

    def _loop(self, network: torch.nn.Module, log: _RunLog | None) -> tuple[dict[str, float], Path]:
        run, total = self.config.run, self.config.optim.total_steps
        loss_sum = torch.zeros((), device=self.context.device)
        since, tick, metrics = 0, time.perf_counter(), {}
        final = self.run_dir
        with self._progress() as advance:
            while self.step < total:
                loss_sum += self._train_step(network)
                self.step += 1
                since += 1
                if self.step % run.log_every == 0 or self.step == total:
                    metrics = self._log_row(loss_sum / since, since, time.perf_counter() - tick, log)
                    loss_sum.zero_()
                    since, tick = 0, time.perf_counter()
                if self.step % run.checkpoint_every == 0 or self.step == total:
                    final = self._save()
                advance(metrics.get("loss"))
        return metrics, final

    @contextmanager
    def _progress(self) -> Iterator[Callable[[float | None], None]]:
        enabled = self.context.is_main and self.config.run.progress
        columns = (
            TextColumn(f"[bold]{self.config.run.name}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, disable=not enabled) as progress:
            task = progress.add_task(
                "train", total=self.config.optim.total_steps, completed=self.step, loss="-"
            )

            def advance(loss: float | None) -> None:
                progress.update(task, advance=1, loss="-" if loss is None else f"{loss:.4f}")

            yield advance

    def _train_step(self, network: torch.nn.Module) -> Tensor:
        """One optimiser step on this rank's slice of the next global batch; returns the detached loss."""
        device, b, rank = self.context.device, self.config.data.batch_size, self.context.rank
        indices = self.cursor.next_batch()[rank * b : (rank + 1) * b]
        x, y = self.source.pairs(indices, self.generators["views"])
        anchors, positives = network(x.to(device, non_blocking=True), y.to(device, non_blocking=True))
        batch = EmbeddedBatch(anchors, positives)
        negatives = self._embedded_negatives(self.sampler.draw(batch, self.generators["negatives"]))
        loss = batch_loss(
            batch,
            negatives,
            tau=self.model.tau(),
            form=self.config.loss.form,
            symmetric=self.config.loss.symmetric,
        )
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.config.optim.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.optim.grad_clip)
        self.optimizer.step()
        self.schedule.step()
        self.sampler.update(batch)
        return loss.detach()

    def _embedded_negatives(self, drawn: Negatives) -> Negatives:
        device, generator = self.context.device, self.generators["negatives"]
        if drawn.kind == "indices":

            def embed_y(indices: Tensor) -> Tensor:
                return self.model.encode_positives(self.source.positives(indices, generator).to(device))

            def embed_x(indices: Tensor) -> Tensor:
                return self.model.encode_anchors(self.source.anchors(indices, generator).to(device))

            return embed_negatives(drawn, embed_y, embed_x if self.config.loss.symmetric else None)
        return embed_negatives(drawn, lambda samples: self.model.encode_positives(samples.to(device)))

    def _log_row(
        self, mean_loss: Tensor, steps: int, seconds: float, log: _RunLog | None
    ) -> dict[str, float]:
        loss = float(mean_over_ranks(mean_loss))
        if not math.isfinite(loss):
            raise FloatingPointError(
                f"the training loss is {loss} in steps {self.step - steps + 1}..{self.step}; lower optim.lr, "
                "raise loss.tau or set optim.grad_clip"
            )
        pairs = steps * self.config.data.batch_size * self.context.world_size
        row = {
            "step": self.step,
            "epoch": self.cursor.epoch,
            "loss": loss,
            "lr": float(self.schedule.get_last_lr()[0]),
            "tau": float(self.model.tau().detach()),
            "pairs_per_s": pairs / max(seconds, 1e-9),
        }
        if log is not None:
            log.write(row)
        return row

    def _prepare_run_dir(self) -> None:
        config_path = self.run_dir / "config.toml"
        if config_path.exists():
            saved = load_config(config_path)
            differences = _config_differences(saved.model_dump(), self.config.model_dump())
            if differences:
                raise ConfigError(
                    f"run folder {str(self.run_dir)!r} holds a run with another config:\n  "
                    + "\n  ".join(differences)
                    + "\nchoose another run.name (or run.out_dir), or delete that folder"
                )
        elif self.context.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            config_path.write_text(config_to_toml(self.config), encoding="utf-8")

    def _resume(self) -> int:
        path = newest_checkpoint(self.run_dir / "checkpoints")
        if path is None:
            return 0
        checkpoint = load_checkpoint(path)
        saved_world = int(checkpoint.state["world_size"])
        if saved_world != self.context.world_size:
            raise ValueError(
                f"checkpoint {str(path)!r} was written by {saved_world} processes, this run has "
                f"{self.context.world_size}; resume with the same number of processes"
            )
        tensors, rank = checkpoint.tensors, self.context.rank
        self.model.load_state_dict(_strip(tensors, "model."))
        load_optimizer_state(self.optimizer, self.model, tensors, checkpoint.state["optimizer"])
        self.schedule.load_state_dict(checkpoint.state["schedule"])
        for name, generator in self.generators.items():
            generator.set_state(tensors[f"rng.{name}.rank{rank}"])
        self.sampler.load_state_dict(_strip(tensors, "sampler."))
        data = checkpoint.state["data"]
        self.cursor.restore(tensors["data.permutation"], data["position"], data["epoch"])
        self.step = checkpoint.step
        return checkpoint.step

    def _save(self) -> Path:
        tensors = {f"model.{key}": value for key, value in self.model.state_dict().items()}
        optimizer_tensors, groups = optimizer_state_tensors(self.optimizer, self.model)
        tensors.update(optimizer_tensors)
        for name, generator in self.generators.items():
            for rank, generator_state in enumerate(all_gather_equal(generator.get_state())):
                tensors[f"rng.{name}.rank{rank}"] = generator_state
        tensors.update({f"sampler.{key}": value for key, value in self.sampler.state_dict().items()})
        permutation, position = self.cursor.state()
        tensors["data.permutation"] = permutation
        state = {
            "data": position,
            "optimizer": groups,
            "schedule": self.schedule.state_dict(),
            "config": self.config.model_dump(),
            "world_size": self.context.world_size,
            "anchor_shape": list(self.source.anchor_shape),
            "positive_shape": list(self.source.positive_shape),
        }
        directory = self.run_dir / "checkpoints"
        if self.context.is_main:
            return save_checkpoint(
                directory, self.step, tensors, state, keep=self.config.run.keep_checkpoints
            )
        return directory / f"step-{self.step:08d}.safetensors"


def _strip(tensors: dict[str, Tensor], prefix: str) -> dict[str, Tensor]:
    return {key.removeprefix(prefix): value for key, value in tensors.items() if key.startswith(prefix)}
