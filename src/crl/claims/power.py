"""Power of the trained claims' rules before a confirmatory run (docs/theory.md section 7, "Confirmatory seeds").

From one exploratory run's stored cells (a ``crl verify`` output folder), for each judged part of C5 and C10 and for
their negative controls: draw R resamples of whole seeds (seed i's cells at every grid point together, so the
common random numbers stay common), S seeds each, and judge every resample with the claim's own rule code:

- **P(decide)**: the part's effect moved to the end of its exploratory CI nearest the bound (the least favourable
  truth the data do not rule out); the share of resamples that PASS or FAIL (and, separately, that PASS);
- **P(FAIL) at bound + 2 delta**: the effect moved to ``bound + 2 delta`` on the failing side; the share that FAIL;
- **P(control PASS)**: the control's cells as measured; it must stay at or below ``1 - level``.

An effect is moved by transforming each seed's values with one factor per grid point (the same for every seed):

- a rate in x (C10's power law, the secant slopes): ``y_ij -> y_ij (x_j/x_1)^shift``, exact for a power law and a
  secant; C5's offset law ``a + b x^r`` scales only its ``b x^r`` part: ``y -> a + (y - a)(x/x_1)^shift``;
- C5's log ratio log(|G| SSCRL/|G| SCRL): SSCRL's gap times ``exp(shift)`` at every m;
- C10's tau difference: ``shift`` added to the gap at the smallest tau.

The two one-sided parts without a margin (C5's ratio, C10's tau difference, threshold 0) take as their failing
truth the mirror image of the shrunk effect, ``-|shrunk|`` (delta = |shrunk|/2). Resampling with replacement
repeats seeds, which narrows a delete-one-seed jackknife a little: P(decide) errs on the optimistic side by that
much, stated beside the figures.

C6's gate, its tolerance choice and its re-judging from per-seed tables live in
:mod:`crl.claims.saturation_gate` (its statistic is continuous, so its truth is moved by a shift of DD);
:func:`saturation_table` reaches them; re-judging any claim from a committed table of its cells is
:mod:`crl.claims.replay`.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crl.claims import c05_trained_gap as c5
from crl.claims import c10_generalisation as c10
from crl.claims import saturation_gate
from crl.claims.budget import part_level
from crl.claims.context import Fidelity
from crl.claims.replay import read_cells, stored_records
from crl.claims.verdict import Statistic, Verdict, combine_verdicts
from crl.sweep import CellRecord

RESAMPLES = 200
"""The contract's minimum number of resamples."""
DECIDE_TARGET = 0.8
"""P(decide) and P(FAIL at bound + 2 delta) must reach this."""


@dataclass(frozen=True)
class PartPower:
    """One part's power at S seeds (module docstring).

    Attributes:
        part: the part's name.
        bound: the rule's bound (PASS side below it for rates, above it for the one-sided parts).
        estimate, ci_low, ci_high: the exploratory statistic and its interval.
        shrunk: the effect the decide-resamples are moved to.
        failing: the effect the FAIL-resamples are moved to (bound + 2 delta).
        p_pass, p_decide: shares of the decide-resamples that PASS, and that PASS or FAIL.
        p_pass_as_measured: the share that PASS with the effect left at its estimate (for comparison only).
        p_fail: share of the FAIL-resamples that FAIL.
        seeds, resamples: S and R.
    """

    part: str
    bound: float
    estimate: float
    ci_low: float
    ci_high: float
    shrunk: float
    failing: float
    p_pass: float
    p_decide: float
    p_fail: float
    p_pass_as_measured: float
    seeds: int
    resamples: int


@dataclass(frozen=True)
class ControlPower:
    """The control's P(PASS) (and P(FAIL)) over resamples of its own seeds as measured."""

    p_pass: float
    p_fail: float
    allowed: float
    seeds: int
    resamples: int


Judge = Callable[[np.ndarray, float], tuple[Verdict, Statistic | None]]
"""(seed indices, shift) -> the part's verdict and statistic on the resampled, shifted data."""


@dataclass(frozen=True)
class PartSpec:
    """What the engine needs of one part: its rule's side and bound, and a judge of resampled, shifted data.

    Attributes:
        name: the part's name.
        bound: the bound of the rule.
        delta: the rule's margin (None: the mirror image of the shrunk effect fails).
        upper: True for an upper-bound rule (PASS when the CI's upper end <= bound).
        judge: see :data:`Judge`; shift is added to the part's statistic.
    """

    name: str
    bound: float
    delta: float | None
    upper: bool
    judge: Judge


def part_power(
    spec: PartSpec, seeds_available: int, seeds: int, resamples: int, rng: np.random.Generator
) -> PartPower:
    """The power of one part (module docstring) at ``seeds`` seeds from ``seeds_available`` measured ones."""
    _, observed = spec.judge(np.arange(seeds_available), 0.0)
    if observed is None:
        raise ValueError(f"{spec.name}: the exploratory data give no statistic; no power can be computed.")
    if spec.upper:
        shrunk = observed.ci_high
        failing = spec.bound + 2.0 * (spec.delta if spec.delta is not None else 0.0)
    else:
        shrunk = observed.ci_low
        failing = spec.bound - 2.0 * (
            spec.delta if spec.delta is not None else abs(shrunk - spec.bound) / 2.0
        )
    draws = [rng.integers(0, seeds_available, seeds) for _ in range(resamples)]
    decide = [_judged(spec.judge, index, shrunk - observed.value) for index in draws]
    failed = [_judged(spec.judge, index, failing - observed.value) for index in draws]
    measured = [_judged(spec.judge, index, 0.0) for index in draws]
    return PartPower(
        part=spec.name,
        bound=spec.bound,
        estimate=observed.value,
        ci_low=observed.ci_low,
        ci_high=observed.ci_high,
        shrunk=shrunk,
        failing=failing,
        p_pass=_share(decide, Verdict.PASS),
        p_decide=_share(decide, Verdict.PASS) + _share(decide, Verdict.FAIL),
        p_pass_as_measured=_share(measured, Verdict.PASS),
        p_fail=_share(failed, Verdict.FAIL),
        seeds=seeds,
        resamples=resamples,
    )


def control_power(
    judge: Callable[[np.ndarray], Verdict],
    seeds_available: int,
    seeds: int,
    resamples: int,
    level: float,
    rng: np.random.Generator,
) -> ControlPower:
    """P(control PASS) and P(control FAIL) over seed resamples of the control's cells as measured."""
    draws = [rng.integers(0, seeds_available, seeds) for _ in range(resamples)]
    verdicts = [_control_judged(judge, index) for index in draws]
    return ControlPower(
        p_pass=_share(verdicts, Verdict.PASS),
        p_fail=_share(verdicts, Verdict.FAIL),
        allowed=1.0 - level,
        seeds=seeds,
        resamples=resamples,
    )


def _judged(judge: Judge, index: np.ndarray, shift: float) -> Verdict:
    """The verdict of one resample; INCONCLUSIVE where repeated seeds leave the rule without an answer (a singular
    covariance of the means): such a resample counts as not deciding."""
    try:
        return judge(index, shift)[0]
    except ValueError:
        return Verdict.INCONCLUSIVE


def _control_judged(judge: Callable[[np.ndarray], Verdict], index: np.ndarray) -> Verdict:
    """The control's verdict on one resample (INCONCLUSIVE where the rule has no answer, as :func:`_judged`)."""
    try:
        return judge(index)
    except ValueError:
        return Verdict.INCONCLUSIVE


def _share(verdicts: Sequence[Verdict], which: Verdict) -> float:
    """The share of ``verdicts`` equal to ``which``."""
    return sum(v is which for v in verdicts) / len(verdicts)


def _with(row: dict[str, Any], **fields: float) -> dict[str, Any]:
    """A copy of a cell result with ``fields`` replaced."""
    return {**row, **fields}


class C5Power:
    """C5's parts and control on one run's records (:mod:`crl.claims.c05_trained_gap`'s own rule functions)."""

    def __init__(self, records: list[CellRecord], fidelity: Fidelity) -> None:
        self.fidelity = fidelity
        self.level = part_level(c5.CLAIM.parts)
        self.data = c5.Series(records, c5.SEEDS[fidelity])
        self.n = c5.N_FOR_M[fidelity]
        self.grid = c5.M_GRIDS[fidelity]

    def seeds(self, arm: str) -> int:
        """The measured seeds of an arm."""
        return len(next(rows for key, rows in self.data.groups.items() if key[0] == arm))

    def _resampled(self, arm: str, index: np.ndarray) -> "c5.Series":
        """The arm's groups with seed i replaced by seed ``index[i]`` (every grid point alike)."""
        out = c5.Series([], len(index))
        out.groups = {
            key: [rows[int(i)] for i in index] for key, rows in self.data.groups.items() if key[0] == arm
        }
        return out

    def window(self, arm: str, regime: str) -> list[int]:
        """The m where no seed's ball binds and every fit converged (as measured)."""
        return [m for m in self.grid if self.data.usable((arm, regime, self.n, m))]

    def exponent_spec(self, regime: str) -> PartSpec:
        """Part 1 (SCRL) or 2 (SSCRL): r of a + b m^r on the measured window."""
        window = self.window("claim", regime)
        means = np.array([self.data.values(("claim", regime, self.n, m), "gap_cv").mean() for m in window])
        offset = c5.offset_power_fit(np.array(window, dtype=np.float64), np.abs(means)).a

        def judge(index: np.ndarray, shift: float) -> tuple[Verdict, Statistic | None]:
            data = self._resampled("claim", index)
            for m in window:
                key = ("claim", regime, self.n, m)
                factor = (m / window[0]) ** shift
                data.groups[key] = [
                    _with(row, gap_cv=offset + (float(row["gap_cv"]) - offset) * factor)
                    for row in data.groups[key]
                ]
            verdict, stats, _ = c5.exponent_part(data, "claim", regime, self.n, window, self.level, regime)
            return verdict, stats[0] if stats else None

        return PartSpec(f"C5 r in m, {regime}", c5.BOUNDS[regime], 0.1, True, judge)

    def ratio_spec(self) -> PartSpec:
        """Part 3: the SSCRL/SCRL log ratio at every m <= n/4 of both windows; its weakest m is the statistic."""
        both = [
            m
            for m in self.window("claim", "independent")
            if m in self.window("claim", "shared") and c5.RATIO_SHARE * m <= self.n
        ]

        def judge(index: np.ndarray, shift: float) -> tuple[Verdict, Statistic | None]:
            data = self._resampled("claim", index)
            for m in both:
                key = ("claim", "shared", self.n, m)
                data.groups[key] = [
                    _with(row, gap_cv=float(row["gap_cv"]) * math.exp(shift)) for row in data.groups[key]
                ]
            verdict, stats, _ = c5.ratio_part(data, "claim", self.n, both, self.level)
            return verdict, min(stats, key=lambda s: s.ci_low) if stats else None

        return PartSpec("C5 log ratio SSCRL/SCRL (weakest m)", 0.0, None, False, judge)

    def n_spec(self, which: int) -> PartSpec:
        """Part 4 (which = 0: floor-free gap) or 5 (which = 1: excess risk): the secant slope in n."""
        grid, m = c5.N_GRIDS[self.fidelity], c5.M_FOR_N[self.fidelity]
        label = c5.N_QUANTITIES[which][0]

        def judge(index: np.ndarray, shift: float) -> tuple[Verdict, Statistic | None]:
            data = self._resampled("claim", index)
            for n in grid:
                key = ("claim", "independent", n, m)
                f = (n / grid[0]) ** shift
                data.groups[key] = [
                    _with(
                        row,
                        gap=float(row["star_gap"]) + (float(row["gap"]) - float(row["star_gap"])) * f,
                        excess_risk=float(row["excess_risk"]) * f,
                    )
                    for row in data.groups[key]
                ]
            verdicts, stats, _ = c5.n_parts(data, grid, m, self.level)
            wanted = [s for s in stats if label in s.name]
            return verdicts[which], wanted[0] if wanted else None

        return PartSpec(f"C5 secant slope in n of {label}", c5.N_BOUND, 0.05, True, judge)

    def specs(self) -> list[PartSpec]:
        """The five parts."""
        return [
            self.exponent_spec("independent"),
            self.exponent_spec("shared"),
            self.ratio_spec(),
            self.n_spec(0),
            self.n_spec(1),
        ]

    def control(self, index: np.ndarray) -> Verdict:
        """The control's combined verdict (parts 1-3 on its arm) on resampled seeds."""
        data = self._resampled("control", index)
        verdicts, _, _ = c5.m_parts(data, "control", self.n, self.grid, self.level)
        return combine_verdicts(*verdicts)


class C10Power:
    """C10's parts and control on one run's records (:mod:`crl.claims.c10_generalisation`'s own rule functions)."""

    def __init__(self, records: list[CellRecord], fidelity: Fidelity) -> None:
        self.plan = c10.PLANS[fidelity]
        self.level = part_level(c10.CLAIM.parts)
        training = [r for r in records if "replicate" in r.cell.params]
        self.measured = 1 + max(int(r.cell.params["replicate"]) for r in training)
        self.gaps = c10.collect(training, self.measured, "gap")

    def seeds(self, arm: str) -> int:
        """The measured seeds (both arms have the same count)."""
        return self.measured

    def _matrix(self, keys: list[tuple[str, int, int, float]], index: np.ndarray) -> np.ndarray:
        """(seeds, points) of the gaps at ``keys``, seeds resampled by ``index``."""
        return np.column_stack([self.gaps[key][index] for key in keys])

    def k_spec(self) -> PartSpec:
        """Part 1: the rate of the gap in k (power law, misfit protocol), upper bound K_BOUND."""
        plan = self.plan
        keys = [("claim", plan.k_series_n, k, c10.TAU) for k in plan.k_grid]
        x = np.array(plan.k_grid, dtype=np.float64)

        def judge(index: np.ndarray, shift: float) -> tuple[Verdict, Statistic | None]:
            values = self._matrix(keys, index) * (x / x[0])[None, :] ** shift
            part = c10.rate_part("rate of the gap in k", plan.k_grid, values, c10.K_BOUND, self.level)
            return part.verdict, part.statistic

        return PartSpec("C10 rate of the gap in k", c10.K_BOUND, 0.1, True, judge)

    def n_spec(self) -> PartSpec:
        """Part 2: the secant slope of the gap in n, upper bound N_BOUND."""
        plan = self.plan
        keys = [("claim", n, plan.n_series_k, c10.TAU) for n in plan.n_grid]
        x = np.array(plan.n_grid, dtype=np.float64)

        def judge(index: np.ndarray, shift: float) -> tuple[Verdict, Statistic | None]:
            values = self._matrix(keys, index) * (x / x[0])[None, :] ** shift
            part = c10.secant_part("rate of the gap in n", plan.n_grid, values, c10.N_BOUND, self.level)
            return part.verdict, part.statistic

        return PartSpec("C10 secant slope of the gap in n", c10.N_BOUND, 0.05, True, judge)

    def tau_spec(self) -> PartSpec:
        """Part 3: G(smallest tau) - G(largest tau) above 0."""
        plan = self.plan
        small, large = (("claim", plan.tau_n, plan.tau_k, tau) for tau in c10.TAU_PAIR)

        def judge(index: np.ndarray, shift: float) -> tuple[Verdict, Statistic | None]:
            difference = self.gaps[small][index] - self.gaps[large][index] + shift
            part = c10.tau_part(difference, self.level)
            return part.verdict, part.statistic

        return PartSpec("C10 G(small tau) - G(large tau)", 0.0, None, False, judge)

    def specs(self) -> list[PartSpec]:
        """The three parts."""
        return [self.k_spec(), self.n_spec(), self.tau_spec()]

    def control(self, index: np.ndarray) -> Verdict:
        """The control's verdict (shared negatives, secant in n) on resampled seeds."""
        plan = self.plan
        keys = [("shared", n, plan.n_series_k, c10.TAU) for n in plan.n_grid]
        name = "control (shared negatives): rate of the gap in n"
        return c10.secant_part(name, plan.n_grid, self._matrix(keys, index), c10.N_BOUND, self.level).verdict


CLAIMS: dict[str, type[C5Power] | type[C10Power]] = {"C5": C5Power, "C10": C10Power}
"""The claims whose power this module computes."""


def power_table(
    run_dir: Path,
    claim: str,
    fidelity: Fidelity,
    *,
    resamples: int = RESAMPLES,
    seeds: int | None = None,
    control_seeds: int | None = None,
    seed: int = 0,
) -> tuple[list[PartPower], ControlPower]:
    """Every part's power and the control's P(PASS) for one claim of one run (module docstring)."""
    if claim not in CLAIMS:
        raise ValueError(f"claim={claim!r} has no power calculation here; use one of {sorted(CLAIMS)}.")
    engine = CLAIMS[claim](stored_records(run_dir, claim), fidelity)
    rng = np.random.default_rng(seed)
    available, control_available = engine.seeds("claim"), engine.seeds("control")
    parts = [part_power(spec, available, seeds or available, resamples, rng) for spec in engine.specs()]
    control = control_power(
        engine.control, control_available, control_seeds or control_available, resamples, engine.level, rng
    )
    return parts, control


def markdown(claim: str, parts: list[PartPower], control: ControlPower) -> str:
    """The power table of one claim as Markdown."""
    lines = [
        f"| {claim} part | bound | exploratory [CI] | shrunk to | P(PASS) | P(decide) | truth for FAIL | P(FAIL) "
        "| P(PASS) at the estimate | seeds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in parts:
        lines.append(
            f"| {p.part} | {p.bound:g} | {p.estimate:.3g} [{p.ci_low:.3g}, {p.ci_high:.3g}] | {p.shrunk:.3g} | "
            f"{p.p_pass:.3f} | {p.p_decide:.3f} | {p.failing:.3g} | {p.p_fail:.3f} | {p.p_pass_as_measured:.3f} | "
            f"{p.seeds} |"
        )
    lines.append(
        f"| control | | | | P(PASS) {control.p_pass:.3f} (allowed {control.allowed:.4f}) | | | "
        f"P(FAIL) {control.p_fail:.3f} | | {control.seeds} |"
    )
    lines.append(f"\n{parts[0].resamples if parts else control.resamples} resamples of whole seeds.")
    return "\n".join(lines)


def saturation_table(
    source: Path,
    fidelity: Fidelity,
    *,
    gate: bool = False,
    q: float | None = None,
    seeds: int | None = None,
    resamples: int = RESAMPLES,
) -> str:
    """C6's pilot figures as Markdown (:mod:`crl.claims.saturation_gate`), from a run's store or a table of its
    cells (``source``: a `crl verify --out` folder or a ``--export-cells`` file) read on ``fidelity``'s grids: the
    tolerance choice, or with ``gate`` the power gate at ``q`` (default the registered Q; ``seeds`` per
    subsample, default 3/8 of the run's seeds)."""
    curves = saturation_gate.curves_from_records(_c6_records(source), fidelity)
    if not gate:
        return saturation_gate.tolerance_markdown(*saturation_gate.choose_q(curves))
    tolerance = saturation_gate.c6.Q if q is None else q
    size = seeds or 3 * curves.seeds // 8
    halves = saturation_gate.power_gate(curves, q=tolerance, seeds=size, resamples=resamples)
    return saturation_gate.gate_markdown(halves, tolerance, size)


def _c6_records(source: Path) -> list[CellRecord]:
    """C6's cells from a run folder's store or from a table written by ``--export-cells``.

    Raises:
        ValueError: when the table holds cells of another claim.
    """
    if not source.is_file():
        return stored_records(source, "C6")
    records = read_cells(source)
    others = sorted({record.claim.split("@")[0] for record in records} - {"C6"})
    if others:
        raise ValueError(f"{source} holds cells of {', '.join(others)}; pass a table of C6's cells.")
    return records
