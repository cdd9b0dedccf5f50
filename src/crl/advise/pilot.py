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

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from crl.advise.heldout import EvalSizes, Metric, heldout_error
from crl.advise.local import Cell as Point
from crl.sweep import Cell, CellRecord, ProgressHook, SweepStore, new_run_id, run_cells
from crl.train.build import Streams
from crl.train.config import TrainConfig, parse_config
from crl.train.data import build_source
from crl.train.locked import TrainShape, train_shape
from crl.train.loop import train
from crl.train.negative_kinds import NEGATIVES_FACTS

__all__ = [
    "PILOT_CLAIM",
    "TimingProbe",
    "cell_document",
    "cell_samples",
    "full_n",
    "pilot_cell",
    "pilot_cells",
    "pilot_config",
    "probe_timing",
    "run_pilot",
    "shape_of",
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
    progress: ProgressHook | None = None,
) -> list[CellRecord]:
    """Run the cells the store lacks (resumable, ``workers`` processes) and return every cell's record."""
    return run_cells(
        store,
        PILOT_CLAIM,
        cells,
        pilot_cell,
        run_id=run_id or new_run_id(),
        workers=workers,
        progress=progress,
    )


@dataclass(frozen=True)
class TimingProbe:
    """Measured cost on this machine: a training step costs ``seconds_per_step + seconds_per_sample x samples``
    (its processed samples), an evaluation ``eval_seconds``."""

    seconds_per_step: float
    seconds_per_sample: float
    eval_seconds: float

    def cell_seconds(self, config: TrainConfig, n: int, m: int, epochs: int) -> float:
        """Predicted seconds of one cell (n, m): ``steps x step cost + samples x sample cost + one evaluation``."""
        steps = shape_of(config, n, epochs).steps
        samples = cell_samples(config, n, m, epochs)
        return steps * self.seconds_per_step + self.seconds_per_sample * samples + self.eval_seconds

    def wall_seconds(
        self, config: TrainConfig, points: Sequence[Point], seeds: int, epochs: int, workers: int
    ) -> float:
        """Implied wall time of ``points`` x ``seeds`` cells on ``workers`` processes."""
        total = sum(self.cell_seconds(config, n, m, epochs) for n, m in points)
        return seeds * total / workers


def _time_steps(config: TrainConfig, n: int, m: int, steps: int) -> float:
    """Seconds per step of ``steps`` training steps at (n, m) with the recipe map's batch."""
    probe = pilot_config(config, n, m, 1)
    document = probe.model_dump()
    document["optim"].update(total_steps=steps, warmup_steps=0)
    probe = parse_config(document, source="advise timing probe")
    source = build_source(probe.data, seed=0)
    start = time.perf_counter()
    train(probe, source, Streams.derive(0, regime=probe.loss.regime))
    return (time.perf_counter() - start) / steps


def probe_timing(
    config: TrainConfig, points: Sequence[Point], metric: Metric, sizes: EvalSizes, *, steps: int = 5
) -> TimingProbe:
    """Time ``steps`` training steps at the cheapest and the dearest of ``points`` (by processed samples per step)
    after one untimed step that pays the process's one-off imports, and one evaluation; solve for the step's fixed
    and per-sample cost (all per-step cost is fixed when the two process the same samples per step)."""

    def per_step(point: Point) -> int:
        return cell_samples(config, point[0], point[1], 1) // max(1, shape_of(config, point[0], 1).steps)

    low_point, high_point = min(points, key=per_step), max(points, key=per_step)
    _time_steps(config, *low_point, 1)
    low, high = _time_steps(config, *low_point, steps), _time_steps(config, *high_point, steps)
    samples_low, samples_high = per_step(low_point), per_step(high_point)
    spread = samples_high - samples_low
    per_sample = max(0.0, (high - low) / spread) if spread > 0 else 0.0
    fixed = max(0.0, low - per_sample * samples_low) if spread > 0 else max(low, high)
    model_config = pilot_config(config, *low_point, 1)
    outcome = train(model_config, build_source(model_config.data, seed=0), Streams.derive(0))
    start = time.perf_counter()
    heldout_error(outcome.model, model_config, metric, sizes)
    return TimingProbe(fixed, per_sample, time.perf_counter() - start)
