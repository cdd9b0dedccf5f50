"""The trainer: the pure :class:`~crl.train.loop.TrainingLoop` inside a run folder, under DDP.

``Trainer(config).fit() -> RunResult``. Around the loop it adds what a run on disk needs: the run folder
``run.out_dir/run.name`` with ``config.toml``, ``metrics.jsonl`` (one JSON row per ``log_every`` steps, and a
``heldout/`` row per ``eval_every`` steps, :mod:`crl.train.heldout_monitor`), TensorBoard events,
``checkpoints/step-*.safetensors`` + ``.json`` every ``checkpoint_every`` steps and at the end (a
:class:`~crl.train.checkpoint.TrainState`), at the end the vectors (h or z) chosen on the validation images
(``vectors.json``, :mod:`crl.train.vectors`), a progress bar, ``torch.set_num_threads`` and the torchrun
process group (DDP, gathered in-batch negatives). A new ``Trainer`` with the same config resumes from the newest
checkpoint: model, optimiser, schedule, every generator state of every rank, the queue, the data permutation and
position, and the step are restored, so the resumed run ends bitwise equal to an uninterrupted one (with the
same thread count). Which config fields may differ on resume is declared by ``TrainConfig.RESUMABLE``; the data
must be the same too (``data.json``, :mod:`crl.train.fingerprint`). A finished run is not trained again
(``RunResult.already_complete``). ``[run] init_from`` starts a fresh run from another checkpoint's encoder weights
(:mod:`crl.train.warm_start`).

Safety (:mod:`crl._lock`): rank 0 holds the run folder's lock for the whole of ``fit`` (a second process stops at
once, naming the holder); a resume skips a damaged checkpoint (its tensors or its JSON state changed) for the
newest intact one (with a warning), drops a half-written last line of ``metrics.jsonl`` (with a warning), warns
about rows missing from it, and restores the open log window, so its rows equal an uninterrupted run's;
temporaries and lone files of a killed checkpoint write are removed; a full disk is one clear error; an empty
``config.toml`` in the run folder is an error saying so.

Randomness: the named streams of :class:`~crl.train.build.Streams` ("init", "order", "views", "negatives").
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from crl._lock import FolderLock, FolderLockedError, remove_temporaries, write_atomically
from crl.data.source import PairSource
from crl.models.minilm import export_text_towers
from crl.train.build import Streams, build_sampler
from crl.train.checkpoint import (
    CheckpointError,
    LogWindow,
    StreamStates,
    TrainState,
    list_checkpoints,
    load_train_state,
    remove_orphans,
    resolve_checkpoint,
    save_train_state,
)
from crl.train.config import (
    ConfigError,
    TextPairsData,
    TrainConfig,
    config_to_toml,
    parse_saved_config,
    read_toml,
    resume_differences,
)
from crl.train.data import build_source
from crl.train.distributed import (
    all_gather_equal,
    init_distributed,
    mean_over_ranks,
    shutdown,
    wrap_model,
)
from crl.train.fingerprint import (
    DataFingerprint,
    check_same_data,
    data_file_print,
    fingerprint_source,
    write_fingerprint,
)
from crl.train.heldout_monitor import Monitor, heldout_monitor
from crl.train.loop import Shard, TrainingLoop, check_finite_loss
from crl.train.run_log import LogWindowSum, RunLog
from crl.train.vectors import VectorChoice, choose_vectors, record_choice
from crl.train.warm_start import load_encoder_weights, weight_mismatches

__all__ = ["RunResult", "Trainer"]

_log = logging.getLogger(__name__)


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
        vectors: the vectors chosen on the validation images at the end (``vectors.json``), or ``None`` (no
            validation images or backbone features, another rank, or nothing trained).
    """

    run_dir: Path
    checkpoint: Path
    step: int
    metrics: dict[str, float]
    wall_time_s: float
    resumed_from: int
    already_complete: bool = False
    vectors: VectorChoice | None = None


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
        _warn_if_bf16_is_emulated(config.run.precision, self.context.device)
        if source is None:
            _log.info("reading the training pairs ([data] source = %r)", config.data.source)
            source = build_source(config.data, seed=config.run.seed, split="train")
        self.source = source
        context = self.context
        _log.info(
            "building the %s model on %s (torch threads: %d)",
            config.model.encoder,
            context.device,
            torch.get_num_threads(),
        )
        self.loop = TrainingLoop(
            config,
            source,
            Streams.derive(config.run.seed, rank=context.rank, regime=config.loss.regime),
            device=context.device,
            shard=Shard(context.rank, context.world_size),
            sampler=build_sampler(config, source, distributed=context.distributed),
            wrap=lambda model: wrap_model(model, context),
        )
        self.window = LogWindowSum(LogWindow(), context.rank, context.device)
        self.monitor = self._heldout_monitor()

    @property
    def run_dir(self) -> Path:
        """The run folder."""
        return self.config.run_dir

    def fit(self) -> RunResult:
        """Train to ``optim.total_steps`` (resuming from the newest intact checkpoint) and return the result.

        Raises:
            FolderLockedError: if another process writes into the run folder (naming its pid and host).
        """
        started = time.perf_counter()
        succeeded = False
        try:
            with self._writer_lock():
                result = self._fit(started)
            succeeded = True
            return result
        finally:
            shutdown(self.context, wait_for_peers=succeeded)

    @contextmanager
    def _writer_lock(self) -> Iterator[None]:
        """Rank 0 holds the run folder's lock while the body runs; every rank stops if it cannot be taken."""
        lock, error = None, None
        if self.context.is_main:
            try:
                lock = FolderLock(self.run_dir, command="crl train")
            except OSError as caught:
                error = caught
        held = all_gather_equal(torch.tensor([int(error is None)], device=self.context.device))[0]
        if error is not None:
            raise error
        if not bool(held.item()):
            raise FolderLockedError(
                f"rank 0 could not lock the run folder {str(self.run_dir)!r}; see its error"
            )
        try:
            yield
        finally:
            if lock is not None:
                lock.release()

    def _fit(self, started: float) -> RunResult:
        if self.context.is_main:
            remove_temporaries(self.run_dir)
            remove_temporaries(self.run_dir / "checkpoints")
            remove_orphans(self.run_dir / "checkpoints")
        self._prepare_run_dir()
        resumed_from, final = self._resume()
        if resumed_from >= self.config.optim.total_steps and final is not None:
            seconds = time.perf_counter() - started
            return RunResult(
                self.run_dir, final, resumed_from, {}, seconds, resumed_from, already_complete=True
            )
        if resumed_from == 0 and self.config.run.init_from:
            checkpoint = self.config.run.init_from
            state = load_train_state(resolve_checkpoint(checkpoint))
            load_encoder_weights(self.loop.model, state, checkpoint=checkpoint)
        run = self.config.run
        _log.info(
            "training steps %d-%d of %d (a line every %d steps)",
            resumed_from + 1,
            self.config.optim.total_steps,
            self.config.optim.total_steps,
            run.log_every,
        )
        log = (
            RunLog(
                self.run_dir,
                resumed_step=resumed_from,
                tensorboard=run.tensorboard,
                every={"train": run.log_every, "heldout": run.eval_every},
            )
            if self.context.is_main
            else None
        )
        try:
            metrics, final = self._run(log)
        finally:
            if log is not None:
                log.close()
        vectors = self._choose_vectors()
        return RunResult(
            self.run_dir,
            final,
            self.loop.step,
            metrics,
            time.perf_counter() - started,
            resumed_from,
            vectors=vectors,
        )

    def _choose_vectors(self) -> VectorChoice | None:
        """Rank 0 measures h and z of the trained model on the validation images and records the better one in
        the run folder (:mod:`crl.train.vectors`); ``None`` elsewhere, or without validation images or h."""
        if not self.context.is_main:
            return None
        choice = choose_vectors(self.loop.model, self.config, self.context.device, self.loop.step)
        if choice is not None:
            record_choice(self.run_dir, choice)
        return choice

    def _run(self, log: RunLog | None) -> tuple[dict[str, float], Path]:
        run, total, loop, window = self.config.run, self.config.optim.total_steps, self.loop, self.window
        metrics: dict[str, float] = {}
        heldout: dict[str, float] = {}
        final = self.run_dir
        started, first = time.perf_counter(), loop.step + 1
        with self._progress() as advance:
            while not loop.done:
                window.add(loop.train_step())
                if loop.step == first:
                    _log.info("step %d of %d took %.1f s", first, total, time.perf_counter() - started)
                logged = None
                if loop.step % run.log_every == 0 or loop.step == total:
                    metrics = logged = self._log_row(window, log)
                    window.reset()
                if self.monitor is not None and loop.step % run.eval_every == 0:
                    heldout = self.monitor(loop.model)
                    if log is not None:
                        log.write({"step": loop.step, **heldout})
                if loop.step % run.checkpoint_every == 0 or loop.step == total:
                    final = self._save()
                advance(metrics.get("loss"), logged)
        if self.context.is_main:
            self._export_text_model()
        return {**metrics, **heldout}, final

    def _export_text_model(self) -> None:
        """A pretrained text encoder (MiniLM) is also written in sentence-transformers' format into the run folder."""
        max_seq_length = getattr(self.config.data, "max_seq_length", None)
        if max_seq_length is not None:
            _log.info("writing the model in sentence-transformers' format")
            export_text_towers(self.loop.model, self.run_dir, max_seq_length=max_seq_length)

    def _heldout_monitor(self) -> Monitor | None:
        """Rank 0's held-out monitor when ``run.eval_every`` > 0 (a text run's scores its validation split),
        else ``None``; built before the run folder is touched, so a run without held-out data stops first."""
        if self.config.run.eval_every == 0 or not self.context.is_main:
            return None
        return heldout_monitor(self.config, self.context.device)

    @contextmanager
    def _progress(self) -> Iterator[Callable[[float | None, dict[str, float] | None], None]]:
        """``advance(loss, logged_row)`` after each step: a rich progress bar on a terminal; elsewhere (a pipe, a
        file, a CI log, where a live bar shows nothing) one plain line per logged row (:func:`progress_line`)."""
        enabled = self.context.is_main and self.config.run.progress
        total = self.config.optim.total_steps
        console = Console()
        if enabled and not console.is_terminal:
            started = time.perf_counter()

            def log_line(loss: float | None, row: dict[str, float] | None) -> None:
                if row is not None:
                    elapsed = time.perf_counter() - started
                    console.print(
                        progress_line(self.config.run.name, row, total, elapsed),
                        markup=False,
                        highlight=False,
                        soft_wrap=True,
                    )

            yield log_line
            return
        columns = (
            TextColumn(f"[bold]{self.config.run.name}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=console, disable=not enabled) as progress:
            task = progress.add_task("train", total=total, completed=self.loop.step, loss="-")

            def advance(loss: float | None, row: dict[str, float] | None) -> None:
                progress.update(task, advance=1, loss="-" if loss is None else f"{loss:.4f}")

            yield advance

    def _log_row(self, window: LogWindowSum, log: RunLog | None) -> dict[str, float]:
        loop = self.loop
        loss = float(mean_over_ranks(window.loss_sum / window.steps))
        check_finite_loss(loss, loop.step - window.steps + 1, loop.step)
        pairs = window.timed * self.config.data.batch_size * self.context.world_size
        row = {
            "step": loop.step,
            "epoch": loop.cursor.epoch,
            "loss": loss,
            "lr": loop.last_lr(),
            "tau": float(loop.model.tau().detach()),
            "pairs_per_s": pairs / max(time.perf_counter() - window.tick, 1e-9),
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
        if config_path.exists():
            differences = resume_differences(_run_folder_config(self.run_dir), self.config)
            if differences:
                raise ConfigError(_another_config_message(self.run_dir, differences))
            check_same_data(self.run_dir, self._fingerprint())
        elif self.context.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_fingerprint(self.run_dir, self._fingerprint())
            write_atomically(config_path, config_to_toml(self.config).encode("utf-8"))

    def _fingerprint(self) -> DataFingerprint:
        """The fingerprint of this run's data (hashed only where a rank checks or writes it)."""
        data = self.config.data
        file = data_file_print(data.path) if isinstance(data, TextPairsData) else None
        return fingerprint_source(data.source, self.source, file)

    def _resume(self) -> tuple[int, Path | None]:
        """Restore the newest intact checkpoint (and this rank's log window); (its step, its path) or (0, None)."""
        found = _newest_intact_state(self.run_dir / "checkpoints")
        if found is None:
            return 0, None
        path, state = found
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
        self.window = LogWindowSum(state.log_window, self.context.rank, self.context.device)
        return state.step, path

    def _save(self) -> Path:
        local = self.loop.stream_states()
        gathered = [all_gather_equal(getattr(local, field.name)) for field in fields(StreamStates)]
        streams = tuple(StreamStates(*states) for states in zip(*gathered, strict=True))
        sums = all_gather_equal(self.window.loss_sum.reshape(1))
        window = LogWindow(self.window.steps, tuple(float(value) for value in sums))
        directory = self.run_dir / "checkpoints"
        if self.context.is_main:
            state = replace(self.loop.state(streams), log_window=window)
            return save_train_state(directory, state, keep=self.config.run.keep_checkpoints)
        return directory / f"step-{self.loop.step:08d}.safetensors"


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 GEMMs natively (AVX-512 BF16 or AMX); elsewhere oneDNN/MKL emulate them."""
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def _warn_if_bf16_is_emulated(precision: str, device: torch.device) -> None:
    """Warn that ``[run] precision = "bf16"`` slows training down on a CPU without native bf16 (about 14x for the
    symmetric loss on the AVX2 machine of docs/benchmarks.md's runs C-G)."""
    if precision == "bf16" and device.type == "cpu" and not cpu_has_native_bf16():
        warnings.warn(
            f'[run] precision = "bf16" on a CPU without native bf16 ({torch.backends.cpu.get_cpu_capability()}: '
            "no AVX-512 BF16 or AMX): its bf16 GEMMs are emulated and markedly slower than float32 (about 14x "
            'for the contrastive loss on an AVX2 CPU); set precision = "fp32" unless you need bf16 numerics.',
            stacklevel=3,
        )


def _newest_intact_state(directory: Path) -> tuple[Path, TrainState] | None:
    """The newest checkpoint in ``directory`` that loads intact, and its state (``None`` when there is none).

    A damaged newer one is skipped with a warning naming it; the next checkpoint written deletes it
    (:func:`~crl.train.checkpoint.save_checkpoint` removes those after its step).

    Raises:
        CheckpointError: if every checkpoint is damaged.
    """
    found = list_checkpoints(directory)
    for _, path in reversed(found):
        try:
            return path, load_train_state(path)
        except CheckpointError as error:
            warnings.warn(f"{error}; resuming from an older checkpoint", stacklevel=2)
    if found:
        raise CheckpointError(
            f"every checkpoint in {str(directory)!r} is damaged (see the warnings above); delete that folder "
            "to train from step 0"
        )
    return None


def _run_folder_config(run_dir: Path) -> TrainConfig:
    """The config in a run folder's ``config.toml``.

    Raises:
        ConfigError: if the file holds no section (empty), or does not parse or validate (naming the field).
    """
    path = run_dir / "config.toml"
    document = read_toml(path)
    if not document:
        raise ConfigError(
            f"the run folder's config.toml {str(path)!r} is empty, so the run in {str(run_dir)!r} cannot be "
            "checked against this config; delete that folder to train from step 0, or copy the config that "
            "run was started with into that file to resume it"
        )
    return parse_saved_config(document, source=str(path))


def _another_config_message(run_dir: Path, differences: list[str]) -> str:
    """Why a run folder cannot be resumed with this config, and the fixes (a finished run is not extended)."""
    message = (
        f"run folder {str(run_dir)!r} holds a run with another config:\n  "
        + "\n  ".join(differences)
        + "\nchoose another run.name (or run.out_dir, --out), or delete that folder"
    )
    if any(line.startswith("[data] validation: 0 in the run folder") for line in differences):
        message += (
            "; a run made before [data] validation existed trained on every image: resume it with --set "
            "data.validation=0"
        )
    if any(line.startswith("[optim] total_steps") for line in differences):
        message += (
            "; a run is not extended in place (its cosine schedule depends on total_steps): to train on "
            f"from its weights, start a new run with --init-from {str(run_dir)!r} and another run.name"
        )
    return message


def progress_line(name: str, row: dict[str, float], total: int, elapsed_s: float) -> str:
    """One plain line of a logged row, for output that is not a terminal:
    ``NAME step 300/2000 loss 3.1416 lr 0.001 tau 0.07 pairs/s 812 elapsed 12.3 s``."""
    return (
        f"{name} step {int(row['step'])}/{total} loss {row['loss']:.4f} lr {row['lr']:.3g} "
        f"tau {row['tau']:.4g} pairs/s {row['pairs_per_s']:.0f} elapsed {elapsed_s:.1f} s"
    )
