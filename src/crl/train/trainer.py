"""The trainer: the pure :class:`~crl.train.loop.TrainingLoop` inside a run folder, under DDP.

``Trainer(config).fit() -> RunResult``. Around the loop it adds what a run on disk needs: the run folder
``run.out_dir/run.name`` with ``config.toml``, ``metrics.jsonl`` (one JSON row per ``log_every`` steps, and a
``heldout/`` row per ``eval_every`` steps, :mod:`crl.train.heldout_monitor`), TensorBoard events,
``checkpoints/step-*.safetensors`` + ``.json`` every ``checkpoint_every`` steps and at the end (a
:class:`~crl.train.checkpoint.TrainState`), a progress bar, ``torch.set_num_threads`` and the torchrun
process group (DDP, gathered in-batch negatives). A new ``Trainer`` with the same config resumes from the newest
checkpoint: model, optimiser, schedule, every generator state of every rank, the queue, the data permutation and
position, and the step are restored, so the resumed run ends bitwise equal to an uninterrupted one (with the
same thread count). Which config fields may differ on resume is declared by ``TrainConfig.RESUMABLE``; the data
must be the same too (``data.json``, :mod:`crl.train.fingerprint`). A finished run is not trained again
(``RunResult.already_complete``). ``[run] init_from`` starts a fresh run from another checkpoint's encoder weights
(:mod:`crl.train.warm_start`).

Randomness: the named streams of :class:`~crl.train.build.Streams` ("init", "order", "views", "negatives").
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
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

from crl.data.source import PairSource
from crl.train.build import Streams, build_sampler
from crl.train.checkpoint import (
    StreamStates,
    load_train_state,
    newest_checkpoint,
    resolve_checkpoint,
    save_train_state,
)
from crl.train.config import ConfigError, TrainConfig, config_to_toml, load_config, resume_differences
from crl.train.distributed import (
    all_gather_equal,
    init_distributed,
    mean_over_ranks,
    shutdown,
    wrap_model,
)
from crl.train.fingerprint import check_same_data, fingerprint_source, write_fingerprint
from crl.train.heldout_monitor import HeldoutMonitor
from crl.train.loop import Shard, TrainingLoop, check_finite_loss
from crl.train.warm_start import load_encoder_weights, weight_mismatches

__all__ = ["RunResult", "Trainer"]


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
        already_complete: the run folder held a finished run, so nothing was trained.
    """

    run_dir: Path
    checkpoint: Path
    step: int
    metrics: dict[str, float]
    wall_time_s: float
    resumed_from: int
    already_complete: bool = False


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

    def write(self, row: dict[str, float], *, prefix: str = "train/") -> None:
        """Append one row to metrics.jsonl (flushed) and its scalars to TensorBoard, under ``prefix`` unless a
        name already has a section (``heldout/recall@1``)."""
        self.handle.write(json.dumps(row) + "\n")
        self.handle.flush()
        if self.writer is not None:
            step = int(row["step"])
            for key, value in row.items():
                if key != "step":
                    self.writer.add_scalar(key if "/" in key else f"{prefix}{key}", value, step)

    def close(self) -> None:
        """Close metrics.jsonl and the TensorBoard writer."""
        self.handle.close()
        if self.writer is not None:
            self.writer.close()


class Trainer:
    """Trains the dual encoder of a :class:`~crl.train.config.TrainConfig` in its run folder; see the module docstring.

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
        context = self.context
        self.loop = TrainingLoop(
            config,
            source,
            Streams.derive(config.run.seed, rank=context.rank, regime=config.loss.regime),
            device=context.device,
            shard=Shard(context.rank, context.world_size),
            sampler=build_sampler(config, source, distributed=context.distributed),
            wrap=lambda model: wrap_model(model, context),
        )

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
            seconds = time.perf_counter() - started
            return RunResult(
                self.run_dir, final, resumed_from, {}, seconds, resumed_from, already_complete=True
            )
        if resumed_from == 0 and self.config.run.init_from:
            checkpoint = self.config.run.init_from
            state = load_train_state(resolve_checkpoint(checkpoint))
            load_encoder_weights(self.loop.model, state, checkpoint=checkpoint)
        log = (
            _RunLog(self.run_dir, resumed_step=resumed_from, tensorboard=self.config.run.tensorboard)
            if self.context.is_main
            else None
        )
        try:
            metrics, final = self._run(log)
        finally:
            if log is not None:
                log.close()
            shutdown(self.context)
        return RunResult(
            self.run_dir, final, self.loop.step, metrics, time.perf_counter() - started, resumed_from
        )

    def _run(self, log: _RunLog | None) -> tuple[dict[str, float], Path]:
        run, total, loop = self.config.run, self.config.optim.total_steps, self.loop
        monitor = self._heldout_monitor()
        loss_sum = torch.zeros((), device=self.context.device)
        since, tick, metrics, heldout = 0, time.perf_counter(), {}, {}
        final = self.run_dir
        with self._progress() as advance:
            while not loop.done:
                loss_sum += loop.train_step()
                since += 1
                if loop.step % run.log_every == 0 or loop.step == total:
                    metrics = self._log_row(loss_sum / since, since, time.perf_counter() - tick, log)
                    loss_sum.zero_()
                    since, tick = 0, time.perf_counter()
                if monitor is not None and loop.step % run.eval_every == 0:
                    heldout = monitor(loop.model)
                    if log is not None:
                        log.write({"step": loop.step, **heldout})
                if loop.step % run.checkpoint_every == 0 or loop.step == total:
                    final = self._save()
                advance(metrics.get("loss"))
        return {**metrics, **heldout}, final

    def _heldout_monitor(self) -> HeldoutMonitor | None:
        """Rank 0's held-out monitor when ``run.eval_every`` > 0, else ``None``."""
        if self.config.run.eval_every == 0 or not self.context.is_main:
            return None
        return HeldoutMonitor.from_config(self.config, self.context.device)

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
                "train", total=self.config.optim.total_steps, completed=self.loop.step, loss="-"
            )

            def advance(loss: float | None) -> None:
                progress.update(task, advance=1, loss="-" if loss is None else f"{loss:.4f}")

            yield advance

    def _log_row(
        self, mean_loss: Tensor, steps: int, seconds: float, log: _RunLog | None
    ) -> dict[str, float]:
        loop = self.loop
        loss = float(mean_over_ranks(mean_loss))
        check_finite_loss(loss, loop.step - steps + 1, loop.step)
        pairs = steps * self.config.data.batch_size * self.context.world_size
        row = {
            "step": loop.step,
            "epoch": loop.cursor.epoch,
            "loss": loss,
            "lr": loop.last_lr(),
            "tau": float(loop.model.tau().detach()),
            "pairs_per_s": pairs / max(seconds, 1e-9),
        }
        if log is not None:
            log.write(row)
        return row

    def _prepare_run_dir(self) -> None:
        """Check a run folder's config and data against this run's, or create the folder with both.

        ``data.json`` is written before ``config.toml``, so a folder with a config always has its data's
        fingerprint (folders written before fingerprints have none and are not checked).
        """
        config_path = self.run_dir / "config.toml"
        fingerprint = fingerprint_source(self.config.data.source, self.source)
        if config_path.exists():
            differences = resume_differences(load_config(config_path), self.config)
            if differences:
                raise ConfigError(_another_config_message(self.run_dir, differences))
            check_same_data(self.run_dir, fingerprint)
        elif self.context.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_fingerprint(self.run_dir, fingerprint)
            config_path.write_text(config_to_toml(self.config), encoding="utf-8")

    def _resume(self) -> int:
        path = newest_checkpoint(self.run_dir / "checkpoints")
        if path is None:
            return 0
        state = load_train_state(path)
        if state.world_size != self.context.world_size:
            raise ValueError(
                f"checkpoint {str(path)!r} was written by {state.world_size} processes, this run has "
                f"{self.context.world_size}; resume with the same number of processes"
            )
        mismatches = weight_mismatches(self.loop.model.state_dict(), state.model)
        if mismatches:
            raise ValueError(
                f"checkpoint {str(path)!r} does not fit this run's model ({'; '.join(mismatches)}): the run "
                "folder was trained on data of other shapes; use a new run.name or --out"
            )
        self.loop.restore(state)
        return state.step

    def _save(self) -> Path:
        local = self.loop.stream_states()
        gathered = [all_gather_equal(getattr(local, field.name)) for field in fields(StreamStates)]
        streams = tuple(StreamStates(*states) for states in zip(*gathered, strict=True))
        directory = self.run_dir / "checkpoints"
        if self.context.is_main:
            return save_train_state(
                directory, self.loop.state(streams), keep=self.config.run.keep_checkpoints
            )
        return directory / f"step-{self.loop.step:08d}.safetensors"


def _another_config_message(run_dir: Path, differences: list[str]) -> str:
    """Why a run folder cannot be resumed with this config, and the fixes (a finished run is not extended)."""
    message = (
        f"run folder {str(run_dir)!r} holds a run with another config:\n  "
        + "\n  ".join(differences)
        + "\nchoose another run.name (or run.out_dir, --out), or delete that folder"
    )
    if any(line.startswith("[optim] total_steps") for line in differences):
        message += (
            "; a run is not extended in place (its cosine schedule depends on total_steps): to train on "
            f"from its weights, start a new run with --init-from {str(run_dir)!r} and another run.name"
        )
    return message
