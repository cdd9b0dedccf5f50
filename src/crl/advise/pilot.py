"""The cells of ``crl advise``: the local doubling pilot at the user's (N, M), their recipe, cost and runs.

A cell (n, m) trains the user's config on the first n pairs of the data with m negatives (``[loss] n_negatives``;
``in_batch`` becomes ``shared_pool``, the same SSCRL regime with m set free) by the recipe map
(:func:`crl.train.locked.train_shape`: E epochs of its n pairs at b(n) = the largest power of two <= min(b, n / 8),
E floor(n / b(n)) steps; b is the config's ``batch_size``), and scores the held-out error of
:mod:`crl.advise.heldout`. The pilot's cells are :func:`crl.advise.local.pilot_points` (N, M), each with S seed
runs (seeds ``first_seed`` .. ``first_seed + S - 1``, every cell of a replicate with the same seed); the check
cells (``--check``) are :func:`crl.advise.local.truth_points` with the same seeds. Cells run through the sweep
engine (:func:`crl.sweep.run_cells`): resumable and parallel.

Cost is counted in processed samples, inputs through an encoder: per step ``2b`` (anchors and positives) plus
the negatives embedded that step, ``m`` (shared_pool, fixed_pool; twice when symmetric), ``b m`` (independent_pool,
mined), ``min(b m, C)`` (fixed_sets: the union of the batch's sets, at most the C candidates: n, or the disjoint
pool) or 0 (queue: stored embeddings).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crl.advise.heldout import EvalSizes, Metric, heldout_error
from crl.advise.local import Cell as Point
from crl.models import DualEncoder
from crl.sweep import Cell, CellRecord, Executor, ProgressHook, SweepStore, new_run_id, run_cells
from crl.train.build import Streams
from crl.train.config import TrainConfig, parse_config
from crl.train.data import build_source
from crl.train.locked import TrainShape, train_shape
from crl.train.loop import TrainingLoop, train
from crl.train.negative_kinds import NEGATIVES_FACTS

__all__ = [
    "PILOT_CLAIM",
    "TimingProbe",
    "cell_document",
    "cell_samples",
    "full_n",
    "missing_runs",
    "pilot_cell",
    "pilot_cells",
    "pilot_config",
    "probe_timing",
    "run_in_folder",
    "run_pilot",
    "shape_of",
    "start_model",
]

PILOT_CLAIM = "advise"
"""The sweep store's claim name of pilot and check cells."""


def full_n(config: TrainConfig) -> int:
    """The user's n: the training pairs of the config's data (``n_train``, or the whole training split)."""
    return build_source(config.data, seed=config.run.seed).n_pairs


def shape_of(config: TrainConfig, n: int, epochs: int) -> TrainShape:
    """The recipe map at n with the config's batch as the cap (:func:`crl.train.locked.train_shape`)."""
    return train_shape(n, epochs, config.data.batch_size)


def cell_samples(config: TrainConfig, n: int, m: int, epochs: int) -> int:
    """Processed samples of one cell (n, m): ``steps (2b + R S)`` with (b, steps) the recipe map's, R negatives
    embedded per step (module docstring) and S = 2 for a symmetric loss."""
    shape = shape_of(config, n, epochs)
    sides = 2 if config.loss.symmetric else 1
    return shape.steps * (2 * shape.batch + _negative_rows(config, m, shape.batch, n) * sides)


def _negative_rows(config: TrainConfig, m: int, batch: int, n: int) -> int:
    """R, the negatives a step embeds: none when they are stored embeddings, at most the C candidates when fixed
    per-anchor sets overlap, b m when each of the b anchors has its own m, else m."""
    facts = NEGATIVES_FACTS[config.loss.negatives]
    if not facts.holds_inputs:
        return 0
    if facts.fixed and facts.per_anchor:
        pool = getattr(config.data, "disjoint_size", 0)
        return min(batch * m, pool or n)
    return batch * m if facts.per_anchor else m


def pilot_config(config: TrainConfig, n: int, m: int, epochs: int, seed: int = 0) -> TrainConfig:
    """The user's config on the first n pairs with m negatives, trained by the recipe map (warm-up scaled)."""
    shape = shape_of(config, n, epochs)
    document = config.model_dump()
    document["data"]["n_train"] = n
    document["data"]["batch_size"] = shape.batch
    loss = document["loss"]
    loss["negatives"] = loss["negatives"] if NEGATIVES_FACTS[loss["negatives"]].sized else "shared_pool"
    loss["n_negatives"] = m
    optim = document["optim"]
    optim["warmup_steps"] = optim["warmup_steps"] * shape.steps // optim["total_steps"]
    optim["total_steps"] = shape.steps
    document["run"].update(seed=seed, progress=False, tensorboard=False, init_from="")
    return parse_config(document, source=f"advise cell n = {n}, m = {m}")


def start_model(config: TrainConfig, n: int, m: int, epochs: int, seed: int) -> DualEncoder:
    """The model a pilot run of the cell (n, m) at ``seed`` starts from, before its first step: the config's
    ``[model]`` drawn from the run's ``init`` stream, as ``crl train`` of the config starts (``[run] init_from`` is
    not read: every pilot run starts fresh)."""
    cell = pilot_config(config, n, m, epochs, seed)
    streams = Streams.derive(seed, regime=cell.loss.regime)
    return TrainingLoop(cell, build_source(cell.data, seed=seed), streams).model


def cell_document(config: TrainConfig) -> dict[str, Any]:
    """The config as the fields that differ from their defaults, plus the kinds (``[data] source``, ``[model]
    encoder``): it reads back as the same config, and a field added to crl later (at its default) does not change
    it, so a stored cell stays valid."""
    document = config.model_dump(exclude_defaults=True)
    document.setdefault("data", {})["source"] = config.data.source
    document.setdefault("model", {})["encoder"] = config.model.encoder
    return document


def pilot_cells(
    config: TrainConfig,
    points: Sequence[Point],
    seeds: Sequence[int],
    epochs: int,
    metric: Metric,
    sizes: EvalSizes,
) -> list[Cell]:
    """One sweep cell per (point, seed); the params hold the cell's config (:func:`cell_document`), so the store
    never confuses cells of two configs, and a cell shared by two sessions (the same config, n, m, seed) is run
    once."""
    cells = []
    for n, m in points:
        document = cell_document(pilot_config(config, n, m, epochs))
        params = {"config": document, "metric": metric, "eval": vars(sizes), "n": n, "m": m}
        cells += [Cell(params, seed) for seed in seeds]
    return cells


def pilot_cell(cell: Cell) -> dict[str, Any]:
    """Train one cell and score it: ``{"error", "final_loss"}`` (module-level, for spawned workers)."""
    document = cell.params["config"]
    document = {**document, "run": {**document.get("run", {}), "seed": cell.seed}}
    config = parse_config(document, source="advise cell")
    source = build_source(config.data, seed=cell.seed)
    outcome = train(config, source, Streams.derive(cell.seed, regime=config.loss.regime))
    error = heldout_error(outcome.model, config, cell.params["metric"], EvalSizes(**cell.params["eval"]))
    return {"error": error, "final_loss": outcome.metrics[-1].loss}


def run_pilot(
    store: SweepStore,
    cells: Sequence[Cell],
    *,
    workers: int = 1,
    run_id: str | None = None,
    executor: Executor | None = None,
    progress: ProgressHook | None = None,
) -> list[CellRecord]:
    """Run the cells the store lacks (resumable; ``workers`` processes, or ``executor``'s, e.g. a Ray cluster's)
    and return every cell's record."""
    return run_cells(
        store,
        PILOT_CLAIM,
        cells,
        pilot_cell,
        run_id=run_id or new_run_id(),
        workers=workers,
        executor=executor,
        progress=progress,
    )


def run_in_folder(
    out_dir: str | Path,
    cells: Sequence[Cell],
    *,
    workers: int = 1,
    executor: Executor | None = None,
    progress: ProgressHook | None = None,
) -> list[CellRecord]:
    """:func:`run_pilot` on the store ``advise.sqlite`` of the output folder (created when missing)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with SweepStore(out / "advise.sqlite") as store:
        return run_pilot(store, cells, workers=workers, executor=executor, progress=progress)


def missing_runs(out_dir: str | Path, cells: Sequence[Cell]) -> list[Point]:
    """The (n, m) of each of ``cells`` (one entry per seed run) that the output folder's store lacks: what a run
    into that folder still trains (all of them when the folder has no store, or none that reads as one).

    The store is opened read-only and left as it is (an estimate must not write to a folder it only prices); a row
    counts as stored by its cell and seed, its checksum unread (the run itself checks it)."""
    path = Path(out_dir) / "advise.sqlite"
    runs = [(int(cell.params["n"]), int(cell.params["m"])) for cell in cells]
    if not path.is_file():
        return runs
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as connection:
            rows = connection.execute(
                "SELECT cell, seed FROM cells WHERE claim = ?", (PILOT_CLAIM,)
            ).fetchall()
    except sqlite3.DatabaseError:
        return runs
    stored = {(str(key), int(seed)) for key, seed in rows}
    return [run for run, cell in zip(runs, cells, strict=True) if (cell.key, cell.seed) not in stored]


@dataclass(frozen=True)
class TimingProbe:
    """Measured cost on this machine: a cell costs ``setup_seconds`` once (its model, sampler and data cursor), each
    training step ``seconds_per_step + seconds_per_sample x samples`` (its processed samples), its evaluation
    ``eval_seconds``; ``feature_seconds`` is what the probe spent making the data every cell reads ready
    (:func:`probe_timing`), spent once, before the cells."""

    setup_seconds: float
    seconds_per_step: float
    seconds_per_sample: float
    eval_seconds: float
    feature_seconds: float

    def cell_seconds(self, config: TrainConfig, n: int, m: int, epochs: int) -> float:
        """Predicted seconds of one cell (n, m): ``setup + steps x step cost + samples x sample cost + one
        evaluation``."""
        steps = shape_of(config, n, epochs).steps
        samples = cell_samples(config, n, m, epochs)
        return (
            self.setup_seconds
            + steps * self.seconds_per_step
            + self.seconds_per_sample * samples
            + self.eval_seconds
        )

    def wall_seconds(
        self, config: TrainConfig, points: Sequence[Point], seeds: int, epochs: int, workers: int
    ) -> float:
        """Implied wall time of ``points`` x ``seeds`` cells on ``workers`` processes (the features are ready)."""
        total = sum(self.cell_seconds(config, n, m, epochs) for n, m in points)
        return seeds * total / workers


def _time_training(config: TrainConfig, n: int, m: int, steps: int) -> float:
    """Seconds of one training run of ``steps`` steps at (n, m) with the recipe map's batch, its setup included as
    a cell pays it (:func:`pilot_cell` builds its pairs, reading cached features): the median of three runs, so
    that one slow stretch on a busy machine does not set the estimate."""
    probe = pilot_config(config, n, m, 1)
    document = probe.model_dump()
    document["optim"].update(total_steps=steps, warmup_steps=0)
    probe = parse_config(document, source="advise timing probe")
    timings = []
    for _ in range(3):
        start = time.perf_counter()
        train(probe, build_source(probe.data, seed=0), Streams.derive(0, regime=probe.loss.regime))
        timings.append(time.perf_counter() - start)
    return sorted(timings)[1]


def _step_and_setup(config: TrainConfig, point: Point, steps: int) -> tuple[float, float]:
    """(seconds per step, setup seconds) at ``point``: runs of ``steps`` and ``4 steps`` steps differ by ``3 steps``
    steps, and the shorter run less its steps is the setup."""
    short, long = _time_training(config, *point, steps), _time_training(config, *point, 4 * steps)
    per_step = max(0.0, (long - short) / (3 * steps))
    return per_step, max(0.0, short - steps * per_step)


def probe_timing(
    config: TrainConfig,
    points: Sequence[Point],
    metric: Metric,
    sizes: EvalSizes,
    *,
    largest_n: int,
    steps: int = 10,
) -> TimingProbe:
    """Measure the pilot's costs on this machine, in this order:

    1. the features: build the training pairs of the largest cell n (``largest_n``) and score one untrained model,
       which loads the held-out data; on locked features this computes and caches whatever features the cells
       will read (the training pairs up to ``largest_n`` and the test split), and reads them when cached.
       ``feature_seconds`` is that time less one evaluation;
    2. one evaluation (the held-out data now loaded): ``eval_seconds``;
    3. after one untimed run that pays the process's one-off imports, runs of ``steps`` and ``4 steps`` steps at
       the cheapest and the dearest of ``points`` (by processed samples per step): their difference is the step
       cost at each, solved for its fixed and per-sample parts, so that a cell's step cost is the line through the
       two measured ones (the fixed part may come out below 0 on a line that is steep by noise; the pilot's
       points all lie between the two, so their costs stay between the measured ones; all fixed when the line
       falls); the rest of the shorter runs is the cell's setup.
    """

    def per_step(point: Point) -> int:
        return cell_samples(config, point[0], point[1], 1) // max(1, shape_of(config, point[0], 1).steps)

    low_point, high_point = min(points, key=per_step), max(points, key=per_step)
    model_config = pilot_config(config, *low_point, 1)
    started = time.perf_counter()
    build_source(pilot_config(config, largest_n, low_point[1], 1).data, seed=0)
    model = start_model(config, *low_point, 1, 0)
    heldout_error(model, model_config, metric, sizes)
    ready = time.perf_counter() - started
    start = time.perf_counter()
    heldout_error(model, model_config, metric, sizes)
    eval_seconds = time.perf_counter() - start
    _time_training(config, *low_point, 1)
    (low, setup_low), (high, setup_high) = (
        _step_and_setup(config, point, steps) for point in (low_point, high_point)
    )
    samples_low, samples_high = per_step(low_point), per_step(high_point)
    spread = samples_high - samples_low
    per_sample = max(0.0, (high - low) / spread) if spread > 0 else 0.0
    fixed = low - per_sample * samples_low if per_sample > 0 else (low + high) / 2
    return TimingProbe(
        (setup_low + setup_high) / 2, fixed, per_sample, eval_seconds, max(0.0, ready - eval_seconds)
    )
