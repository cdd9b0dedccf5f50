"""The pilot of ``crl advise``: a small design of training runs over (n, m), its cost, and its cells.

A pilot cell trains the user's config on the first n pairs of the data with m negatives per step (``[loss]
n_negatives``; ``in_batch`` becomes ``shared_pool``, the same SSCRL regime with m set free), for the config's
``optim.total_steps`` (or the pilot's own step count), or for E epochs of its n pairs (``epochs``: batch b_n =
the largest power of two <= min(b, n / 8), E floor(n / b_n) steps, the anchors processed proportional to n, as the
m*(n) experiment trains its cells), and scores the held-out error of :mod:`crl.advise.heldout`.
The grid: ``levels`` values of n halving down from the largest that fits the budget, times [A]'s m/n fractions
(1%, 10%, 40%, 70%, 100%), times ``seeds`` replicates (every cell of a replicate shares its seed). Cells run
through the sweep engine (:func:`crl.sweep.run_cells`): resumable and parallel.

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
from crl.sweep import Cell, CellRecord, ProgressHook, SweepStore, new_run_id, run_cells
from crl.train.build import Streams
from crl.train.config import TrainConfig, parse_config
from crl.train.data import build_source
from crl.train.locked import batch_for
from crl.train.loop import train
from crl.train.negative_kinds import NEGATIVES_FACTS

__all__ = [
    "FRACTIONS",
    "PILOT_CLAIM",
    "CellShape",
    "PilotDesign",
    "PilotPoint",
    "TimingProbe",
    "cell_document",
    "cell_samples",
    "cell_shape",
    "design_pilot",
    "full_n",
    "pilot_cell",
    "pilot_cells",
    "pilot_config",
    "probe_timing",
    "run_pilot",
]

FRACTIONS: tuple[float, ...] = (0.01, 0.1, 0.4, 0.7, 1.0)
"""[A]'s grid of m/n."""

_SMALLEST_EPOCH_N = 64
"""With ``epochs``, the smallest pilot n: b_n = 8, 8 steps per epoch."""

PILOT_CLAIM = "advise"
"""The sweep store's claim name of pilot and check cells."""


@dataclass(frozen=True, order=True)
class PilotPoint:
    """One (n, m) cell of the pilot: n training pairs, m negatives per step."""

    n: int
    m: int


@dataclass(frozen=True)
class PilotDesign:
    """The pilot's cells, seeds and steps, and what they cost.

    Attributes:
        points: the (n, m) cells.
        seeds: one replicate per seed (every cell of a replicate shares its seed).
        steps: optimiser steps of every cell (when ``epochs`` is None).
        samples_per_seed: processed samples of one replicate (:func:`cell_samples` summed over the points).
        epochs: E, when each cell trains E epochs of its n pairs instead of ``steps`` steps.
    """

    points: tuple[PilotPoint, ...]
    seeds: tuple[int, ...]
    steps: int
    samples_per_seed: int
    epochs: int | None = None

    def shape_at(self, n: int, batch: int) -> CellShape:
        """Batch and steps of a cell with n pairs under the config's batch b (:func:`cell_shape`)."""
        return cell_shape(self.steps, self.epochs, n, batch)

    @property
    def total_samples(self) -> int:
        """Processed samples of the whole pilot."""
        return self.samples_per_seed * len(self.seeds)

    @property
    def n_values(self) -> tuple[int, ...]:
        """The distinct n, increasing."""
        return tuple(sorted({p.n for p in self.points}))


def full_n(config: TrainConfig) -> int:
    """The user's n: the training pairs of the config's data (``n_train``, or the whole training split)."""
    return build_source(config.data, seed=config.run.seed).n_pairs


@dataclass(frozen=True)
class CellShape:
    """A pilot cell's batch b and optimiser steps."""

    batch: int
    steps: int


def cell_shape(steps: int, epochs: int | None, n: int, batch: int) -> CellShape:
    """(b, steps) of a cell with n pairs: the config's b and ``steps``; or with ``epochs`` E, b_n =
    :func:`crl.train.locked.batch_for` (n, b) and E floor(n / b_n) steps."""
    if epochs is None:
        return CellShape(batch, steps)
    b_n = batch_for(n, batch)
    return CellShape(b_n, epochs * max(1, n // b_n))


def cell_samples(
    config: TrainConfig, m: int, steps: int, batch: int | None = None, n: int | None = None
) -> int:
    """Processed samples of one cell with n pairs (default the config's ``n_train``): ``steps (2b + R S)`` with R
    negatives embedded per step (module docstring) and S = 2 for a symmetric loss; b = ``batch``, or the
    config's."""
    b = batch if batch is not None else config.data.batch_size
    sides = 2 if config.loss.symmetric else 1
    return steps * (2 * b + _negative_rows(config, m, b, n if n is not None else config.data.n_train) * sides)


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


def _points(n_values: Sequence[int], fractions: Sequence[float], max_m: int | None) -> tuple[PilotPoint, ...]:
    points = set()
    for n in n_values:
        for fraction in fractions:
            m = max(1, round(fraction * n))
            points.add(PilotPoint(n, min(m, max_m) if max_m is not None else m))
    return tuple(sorted(points))


def design_pilot(
    config: TrainConfig,
    budget: int,
    *,
    n_full: int,
    fractions: Sequence[float] = FRACTIONS,
    levels: int = 4,
    seeds: int = 3,
    steps: int | None = None,
    max_m: int | None = None,
    base_seed: int = 0,
    epochs: int | None = None,
) -> PilotDesign:
    """The largest pilot that fits ``budget`` processed samples (each cell ``steps`` steps, or ``epochs`` epochs of
    its n pairs).

    n takes ``levels`` values ``n_max / 2^k`` (k = levels-1..0) with n_max = n_full / 2^j for the smallest j >= 1
    that fits the budget, the smallest n at least 2 batches (with ``epochs``: at least 64, where b_n = 8); m =
    round(fraction n) for each fraction (at least 1, at most ``max_m``).

    Raises:
        ValueError: naming ``--budget`` and the smallest budget that works, or a bad grid argument.
    """
    steps = steps if steps is not None else config.optim.total_steps
    _check_design_args(budget, fractions, levels, seeds, steps)
    if epochs is not None and epochs < 1:
        raise ValueError(f"--epochs {epochs} must be >= 1")
    smallest_n = 2 * config.data.batch_size if epochs is None else _SMALLEST_EPOCH_N
    cheapest: PilotDesign | None = None
    n_max = n_full // 2
    while n_max >> (levels - 1) >= smallest_n:
        n_values = [n_max >> k for k in range(levels - 1, -1, -1)]
        points = _points(n_values, fractions, max_m)
        per_seed = sum(_point_samples(config, p, steps, epochs) for p in points)
        design = PilotDesign(points, tuple(range(base_seed, base_seed + seeds)), steps, per_seed, epochs)
        if design.total_samples <= budget:
            return design
        cheapest, n_max = design, n_max // 2
    if cheapest is None:
        raise ValueError(
            f"the data has n = {n_full} pairs, too few for {levels} pilot sizes halving down to 2 batches of "
            f"{config.data.batch_size}; lower [data] batch_size or --levels"
        )
    length = f"{steps} steps" if epochs is None else f"{epochs} epochs"
    raise ValueError(
        f"--budget {budget} processed samples is too small: the smallest pilot ({levels} n up to "
        f"{cheapest.n_values[-1]}, {len(cheapest.seeds)} seeds, {length}) needs {cheapest.total_samples}; "
        "raise --budget or lower --steps (--epochs), --seeds or --levels"
    )


def _point_samples(config: TrainConfig, point: PilotPoint, steps: int, epochs: int | None) -> int:
    shape = cell_shape(steps, epochs, point.n, config.data.batch_size)
    return cell_samples(config, point.m, shape.steps, shape.batch, point.n)


def _check_design_args(budget: int, fractions: Sequence[float], levels: int, seeds: int, steps: int) -> None:
    if budget < 1:
        raise ValueError(f"--budget {budget} must be >= 1 processed sample")
    if levels < 3:
        raise ValueError(f"--levels {levels} must be >= 3 (the plateau F(n) has three parameters)")
    if seeds < 2:
        raise ValueError(f"--seeds {seeds} must be >= 2 (intervals over seeds)")
    if steps < 1:
        raise ValueError(f"--steps {steps} must be >= 1")
    if len(set(fractions)) < 3 or not all(f > 0 for f in fractions):
        raise ValueError(f"the m/n fractions {list(fractions)} must be at least 3 distinct values > 0")


def pilot_config(
    config: TrainConfig, n: int, m: int, steps: int, seed: int = 0, batch: int | None = None
) -> TrainConfig:
    """The user's config trained on the first n pairs with m negatives for ``steps`` steps (warm-up scaled), at
    batch ``batch`` (default: the config's)."""
    document = config.model_dump()
    document["data"]["n_train"] = n
    if batch is not None:
        document["data"]["batch_size"] = batch
    loss = document["loss"]
    loss["negatives"] = loss["negatives"] if NEGATIVES_FACTS[loss["negatives"]].sized else "shared_pool"
    loss["n_negatives"] = m
    optim = document["optim"]
    optim["warmup_steps"] = optim["warmup_steps"] * steps // optim["total_steps"]
    optim["total_steps"] = steps
    document["run"].update(seed=seed, progress=False, tensorboard=False, init_from="")
    return parse_config(document, source=f"advise pilot cell n = {n}, m = {m}")


def cell_document(config: TrainConfig) -> dict[str, Any]:
    """The config as the fields that differ from their defaults, plus the kinds (``[data] source``, ``[model]
    encoder``): it reads back as the same config, and a field added to crl later (at its default) does not change
    it, so a stored pilot stays valid."""
    document = config.model_dump(exclude_defaults=True)
    document.setdefault("data", {})["source"] = config.data.source
    document.setdefault("model", {})["encoder"] = config.model.encoder
    return document


def pilot_cells(
    config: TrainConfig,
    points: Sequence[PilotPoint],
    seeds: Sequence[int],
    steps: int,
    metric: Metric,
    sizes: EvalSizes,
    epochs: int | None = None,
) -> list[Cell]:
    """One sweep cell per (point, seed), each ``steps`` steps or ``epochs`` epochs of its n; the params hold the
    cell's config (:func:`cell_document`), so the store never confuses cells of two configs."""
    cells = []
    for point in points:
        shape = cell_shape(steps, epochs, point.n, config.data.batch_size)
        document = cell_document(pilot_config(config, point.n, point.m, shape.steps, batch=shape.batch))
        params = {"config": document, "metric": metric, "eval": vars(sizes), "n": point.n, "m": point.m}
        cells += [Cell(params, seed) for seed in seeds]
    return cells


def pilot_cell(cell: Cell) -> dict[str, Any]:
    """Train one pilot cell and score it: ``{"error", "final_loss"}`` (module-level, for spawned workers)."""
    document = cell.params["config"]
    document = {**document, "run": {**document.get("run", {}), "seed": cell.seed}}
    config = parse_config(document, source="advise pilot cell")
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

    def cell_seconds(
        self, config: TrainConfig, m: int, steps: int, batch: int | None = None, n: int | None = None
    ) -> float:
        """Predicted seconds of one cell (n pairs): ``steps x step cost + one evaluation``."""
        return (
            steps * self.seconds_per_step
            + self.seconds_per_sample * cell_samples(config, m, steps, batch, n)
            + self.eval_seconds
        )

    def wall_seconds(
        self,
        points: Sequence[PilotPoint],
        seeds: int,
        steps: int,
        config: TrainConfig,
        workers: int,
        epochs: int | None = None,
    ) -> float:
        """Implied wall time of ``points`` x ``seeds`` cells (``steps`` steps or ``epochs`` epochs each) on
        ``workers`` processes."""
        shapes = [(p, cell_shape(steps, epochs, p.n, config.data.batch_size)) for p in points]
        total = sum(self.cell_seconds(config, p.m, shape.steps, shape.batch, p.n) for p, shape in shapes)
        return seeds * total / workers


def _time_steps(config: TrainConfig, n: int, m: int, steps: int) -> float:
    """Seconds per step of ``steps`` training steps at (n, m)."""
    probe = pilot_config(config, n, m, steps)
    source = build_source(probe.data, seed=0)
    start = time.perf_counter()
    train(probe, source, Streams.derive(0, regime=probe.loss.regime))
    return (time.perf_counter() - start) / steps


def probe_timing(
    config: TrainConfig, design: PilotDesign, metric: Metric, sizes: EvalSizes, *, steps: int = 5
) -> TimingProbe:
    """Time ``steps`` training steps at the design's cheapest cell (its smallest n and that n's smallest m) and its
    dearest (its largest n and that n's largest m; m <= n, as fixed in-sample negatives need), after one untimed
    step that pays the process's one-off imports, and one evaluation; solve for the step's fixed and per-sample
    cost (all per-step cost is fixed when the two cells process the same samples per step)."""
    n, n_high = design.n_values[0], design.n_values[-1]
    m_low = min(p.m for p in design.points if p.n == n)
    m_high = max(p.m for p in design.points if p.n == n_high)
    _time_steps(config, n, m_low, 1)
    low, high = _time_steps(config, n, m_low, steps), _time_steps(config, n_high, m_high, steps)
    samples_low = cell_samples(config, m_low, 1, n=n)
    samples_high = cell_samples(config, m_high, 1, n=n_high)
    spread = samples_high - samples_low
    per_sample = max(0.0, (high - low) / spread) if spread > 0 else 0.0
    per_step = max(0.0, low - per_sample * samples_low) if spread > 0 else max(low, high)
    model_config = pilot_config(config, n, m_low, 1)
    outcome = train(model_config, build_source(model_config.data, seed=0), Streams.derive(0))
    start = time.perf_counter()
    heldout_error(outcome.model, model_config, metric, sizes)
    return TimingProbe(per_step, per_sample, time.perf_counter() - start)
