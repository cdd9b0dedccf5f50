"""C3's and C4's parts and controls for the one power method (:mod:`crl.claims.power`): the two claims whose
statistics are rates of Monte Carlo means over sampled negatives, each judged by equivalence to a target rate.

**Equivalence bands have two failing sides.** C3's rate and each of C4's three rates PASS when the CI lies inside
[target - delta, target + delta] (delta = 0.1, :func:`crl.claims.verdict.verdict_rate`). A band is two bounds, so
each rate gives two :class:`~crl.claims.power.PartSpec`: its *upper edge* (bound target + delta, FAIL truth target
+ 3 delta: a slower rate) and its *lower edge* (bound target - delta, FAIL truth target - 3 delta: a faster one).
Each edge's P(decide) is at the end of the set's CI nearest that edge, and both must pass their gates. Neither
claim has a part that holds by construction (no identity); C3's bound check carries no weight and is no part.

**Truth transform (every part).** A rate in x: each unit's value at grid point x_j is multiplied by
``(x_j / x_1)^shift``, which adds ``shift`` to the power law's exponent exactly. Fitted rates are centred at the
power law ``A x^r`` fitted to the set's means (:attr:`~crl.claims.power.PartSpec.model`, as C10's rate in k).

**Units.**

- C3: a cell is one (arm, m, chunk) with its own seed; its draws are split into fixed batches of
  :data:`C3_BATCH` consecutive draws, and a unit is one batch (p = the 9 m of the grid: batch j of every m, from
  independent cells). 4 chunks per half (full) are too few rows for a normal law of 9 values; 80 batches of 500
  draws are not. The rule's own code (:func:`crl.claims.c03_scrl_inner.judge_rate`) then resamples batch means
  within each m instead of draws: the rate is the same (the batches' mean is the draws' mean), its CI agrees with
  the draw bootstrap to within a few percent (checked on the store: docs/power_v4/c3_standard.md). The halves are
  the chunks' halves (``unit = "chunk"``), each arm's own: different cells, different seeds.
- C4: a unit is one block (a fresh set of n pairs with its R negative draws, the replicate the rule resamples);
  the halves are the chunks' halves (10 blocks a chunk), each (arm, series, x, chunk) a cell of its own seed.

The judges draw their bootstrap from the claim's own stream ``derive_seed(run_seed, claim, "rate", arm[, series])``
(``ctx.rng`` of the claim's ``run``): on all of a run's units at shift 0, C4's judges reproduce its statistics
exactly, C3's to the batch tolerance.
"""

from collections.abc import Callable, Sequence

import numpy as np

from crl.claims import c03_scrl_inner as c3
from crl.claims import c04_sscrl_fluctuation as c4
from crl.claims.budget import part_level
from crl.claims.context import Fidelity
from crl.claims.power import (
    ControlSpec,
    EngineEntry,
    FloatArray,
    Judge,
    PartSpec,
    SeedSetSpecs,
    power_law_curve,
)
from crl.claims.verdict import Statistic, Verdict, combine_verdicts
from crl.stats import RateFit
from crl.sweep import CellRecord, derive_seed

C3_BATCH = 500
"""Draws per unit of C3 (module docstring): every arm's draws per chunk at every fidelity are a multiple of it."""

Rule = Callable[[list[FloatArray], np.random.Generator], tuple[RateFit, Verdict, str]]
"""(per grid point, the units' values; the bootstrap's generator) -> the claim's fit, verdict and reason."""


def band_edges(
    name: str, x: Sequence[int], values: FloatArray, rule: Rule, seed: int, target: float, delta: float
) -> list[PartSpec]:
    """The two edges of one equivalence-judged rate (module docstring): each a :class:`PartSpec` whose judge runs
    ``rule`` on a design's columns with every value at x_j multiplied by ``(x_j / x_1)^shift``, its bootstrap from
    ``numpy.random.default_rng(seed)``.
    """
    factors = np.asarray(x, dtype=np.float64) / x[0]

    def judge(design: FloatArray, shift: float) -> tuple[Verdict, Statistic | None]:
        moved = design * factors[None, :] ** shift
        fit, verdict, _ = rule(list(moved.T), np.random.default_rng(seed))
        return verdict, Statistic.from_rate(name, fit)

    model = power_law_curve(x, values)
    return [
        PartSpec(f"{name}, upper edge", target + delta, delta, True, values, judge, model),
        PartSpec(f"{name}, lower edge", target - delta, delta, False, values, judge, model),
    ]


def _grid_judge(rule: Rule, seed: int) -> Judge:
    """A :data:`Judge` of ``rule`` without a truth transform (for a control)."""

    def judge(design: FloatArray, shift: float) -> tuple[Verdict, Statistic | None]:
        fit, verdict, _ = rule(list(design.T), np.random.default_rng(seed))
        return verdict, Statistic.from_rate("control", fit)

    return judge


class C3Parts:
    """C3's one rate (as its two band edges) and its heavy-tailed control on one seed set
    (:func:`crl.claims.c03_scrl_inner.judge_rate`); units are batches of :data:`C3_BATCH` draws."""

    def __init__(self, records: list[CellRecord], fidelity: Fidelity, run_seed: int = 0) -> None:
        self.grid = c3.M_GRIDS[fidelity]
        self.level = part_level(c3.CLAIM.parts)
        self.run_seed = run_seed
        self.units = {arm: batch_means(records, arm, self.grid) for arm in ("claim", "control")}
        self.control_units = c3_units("control", fidelity)

    def rule(self, design: list[FloatArray], rng: np.random.Generator) -> tuple[RateFit, Verdict, str]:
        """The claim's rule on per-m unit values."""
        return c3.judge_rate(self.grid, design, rng, self.level)

    def seed(self, arm: str) -> int:
        """The claim's bootstrap seed of ``arm`` (``ctx.rng("rate", arm)``)."""
        return derive_seed(self.run_seed, "C3", "rate", arm)

    def rate(self) -> list[PartSpec]:
        """The rate r of L(s) - E L_hat_m(s) in m, band [-1.1, -0.9]; the truth multiplies every batch mean at m by
        ``(m / m_1)^shift``."""
        return band_edges(
            "C3 rate in m",
            self.grid,
            self.units["claim"],
            self.rule,
            self.seed("claim"),
            c3.TARGET_RATE,
            c3.DELTA,
        )

    def control(self) -> ControlSpec:
        """The heavy-tailed control (the same rule on its arm, at its own design's units), as measured."""
        judge = _grid_judge(self.rule, self.seed("control"))
        return ControlSpec(
            "C3 heavy-tailed scores (rate in m)",
            self.level,
            self.units["control"],
            lambda design: judge(design, 0.0)[0],
            self.control_units,
        )

    def specs(self, name: str) -> SeedSetSpecs:
        """Both edges of the rate and the control on this seed set."""
        return SeedSetSpecs(name, self.rate(), [self.control()])


def batch_means(records: Sequence[CellRecord], arm: str, grid: Sequence[int]) -> FloatArray:
    """(units, len(grid)) of one C3 arm: per m, the means of consecutive batches of :data:`C3_BATCH` draws of each
    cell, cells in chunk order.

    Raises:
        ValueError: when a cell's draws are not a multiple of C3_BATCH, or the m hold different numbers of units.
    """
    columns = []
    for m in grid:
        cells = sorted(
            (r for r in records if r.cell.params["arm"] == arm and int(r.cell.params["m"]) == m),
            key=lambda r: int(r.cell.params["chunk"]),
        )
        batches = []
        for record in cells:
            draws = np.asarray(record.result["gap"], dtype=np.float64)
            if draws.size % C3_BATCH:
                raise ValueError(
                    f"C3 cell {record.cell.params} holds {draws.size} draws, not a multiple of {C3_BATCH}."
                )
            batches.append(draws.reshape(-1, C3_BATCH).mean(axis=1))
        columns.append(np.concatenate(batches) if batches else np.empty(0))
    sizes = {column.size for column in columns}
    if len(sizes) != 1:
        raise ValueError(
            f"C3 arm {arm}: the m of the grid hold different numbers of units ({sorted(sizes)})."
        )
    return np.column_stack(columns)


def c3_units(arm: str, fidelity: Fidelity) -> int:
    """The units of one C3 arm's design: its chunks x draws per chunk / C3_BATCH."""
    return c3.CHUNKS[arm][fidelity] * c3.DRAWS_PER_CHUNK[arm][fidelity] // C3_BATCH


class C4Parts:
    """C4's three rates (each as its two band edges) and its uniform-anchor control on one seed set
    (:func:`crl.claims.c04_sscrl_fluctuation.judge_series`); units are blocks."""

    def __init__(self, records: list[CellRecord], fidelity: Fidelity, run_seed: int = 0) -> None:
        self.level = part_level(c4.CLAIM.parts)
        self.run_seed = run_seed
        self.units = {
            (arm, series): block_sds(records, arm, series)
            for arm in ("claim", "control")
            for series in c4.SERIES
        }

    def rule(self, series: str) -> Rule:
        """The claim's rule of one series on per-grid-point block sds."""

        def rule(design: list[FloatArray], rng: np.random.Generator) -> tuple[RateFit, Verdict, str]:
            return c4.judge_series(series, design, rng, self.level)

        return rule

    def seed(self, arm: str, series: str) -> int:
        """The claim's bootstrap seed (``ctx.rng("rate", arm, series)``)."""
        return derive_seed(self.run_seed, "C4", "rate", arm, series)

    def rate(self, series: str) -> list[PartSpec]:
        """One part: the rate of the mean block sd over the series' grid (SSCRL vs m, SSCRL vs n, SCRL vs n), band
        target +- 0.1; the truth multiplies every block sd at x by ``(x / x_1)^shift``."""
        return band_edges(
            f"C4 {c4.LABELS[series]}",
            c4.grid_of(series),
            self.units[("claim", series)],
            self.rule(series),
            self.seed("claim", series),
            c4.SERIES[series][2],
            c4.DELTA,
        )

    def control(self) -> ControlSpec:
        """The uniform-anchor control: the three parts on its arm, combined (it PASSes only if all three PASS), as
        measured; its values are the three series' block sds side by side."""
        widths = [len(c4.grid_of(series)) for series in c4.SERIES]
        edges = np.cumsum([0, *widths])

        def judge(design: FloatArray) -> Verdict:
            verdicts = []
            for index, series in enumerate(c4.SERIES):
                block = design[:, edges[index] : edges[index + 1]]
                rng = np.random.default_rng(self.seed("control", series))
                verdicts.append(self.rule(series)(list(block.T), rng)[1])
            return combine_verdicts(*verdicts)

        values = np.column_stack([self.units[("control", series)] for series in c4.SERIES])
        return ControlSpec("C4 uniform anchors (three parts)", self.level, values, judge)

    def specs(self, name: str) -> SeedSetSpecs:
        """Every part's two edges and the control on this seed set."""
        parts = [spec for series in c4.SERIES for spec in self.rate(series)]
        return SeedSetSpecs(name, parts, [self.control()])


def block_sds(records: Sequence[CellRecord], arm: str, series: str) -> FloatArray:
    """(blocks, grid points) of one C4 arm and series: per grid point its block sds, cells in chunk order (the
    claim's pooling order).

    Raises:
        ValueError: when the grid points hold different numbers of blocks.
    """
    columns = []
    for x in c4.grid_of(series):
        cells = sorted(
            (
                r
                for r in records
                if r.cell.params["arm"] == arm
                and r.cell.params["series"] == series
                and int(r.cell.params["x"]) == x
            ),
            key=lambda r: int(r.cell.params["chunk"]),
        )
        columns.append(np.array([sd for r in cells for sd in r.result["sd"]], dtype=np.float64))
    sizes = {column.size for column in columns}
    if len(sizes) != 1:
        raise ValueError(
            f"C4 {arm} {series}: the grid points hold different numbers of blocks ({sorted(sizes)})."
        )
    return np.column_stack(columns)


ENGINES: dict[str, EngineEntry] = {
    "C3": EngineEntry(C3Parts, "chunk", lambda fidelity: c3_units("claim", fidelity)),
    "C4": EngineEntry(C4Parts, "chunk", lambda fidelity: c4.BLOCKS[fidelity]),
}
"""C3 (units: batches of C3_BATCH draws; halves: each arm's chunks) and C4 (units: blocks; halves: chunks)."""
