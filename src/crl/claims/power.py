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

C6 (:func:`saturation_power`) is the exception: its m* lives on the m grid, so its effect cannot be moved; its
power is taken as measured, its FAIL side with the two regimes swapped (the measured effect mirrored below 0),
and its null control as measured.

Usage: ``python -m crl.claims.power RUN_DIR --claim C5 [--resamples 200] [--seeds S] [--control-seeds S]``.
``--claim C6 --judge-run-seed SEED`` prints instead the verdicts of the stored cells themselves under this
checkout's rule (:func:`saturation_verdicts`), for a run made with ``crl verify --seed SEED``.
"""

import argparse
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crl.claims import c05_trained_gap as c5
from crl.claims import c06_saturation as c6
from crl.claims import c10_generalisation as c10
from crl.claims.budget import part_level
from crl.claims.context import Fidelity
from crl.claims.verdict import Statistic, Verdict, combine_verdicts
from crl.stats.saturation import Difference, seed_weights, slope_difference
from crl.sweep import CellRecord, SweepStore, derive_seed

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
        self.data = c5._Series(records, c5.SEEDS[fidelity])
        self.n = c5.N_FOR_M[fidelity]
        self.grid = c5.M_GRIDS[fidelity]

    def seeds(self, arm: str) -> int:
        """The measured seeds of an arm."""
        return len(next(rows for key, rows in self.data.groups.items() if key[0] == arm))

    def _resampled(self, arm: str, index: np.ndarray) -> "c5._Series":
        """The arm's groups with seed i replaced by seed ``index[i]`` (every grid point alike)."""
        out = c5._Series([], len(index))
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
            verdict, stats, _ = c5._exponent_part(data, "claim", regime, self.n, window, self.level, regime)
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
            verdict, stats, _ = c5._ratio_part(data, "claim", self.n, both, self.level)
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
            verdicts, stats, _ = c5._n_parts(data, grid, m, self.level)
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
        verdicts, _, _ = c5._m_parts(data, "control", self.n, self.grid, self.level)
        return combine_verdicts(*verdicts)


class C10Power:
    """C10's parts and control on one run's records (:mod:`crl.claims.c10_generalisation`'s own rule functions)."""

    def __init__(self, records: list[CellRecord], fidelity: Fidelity) -> None:
        self.plan = c10.PLANS[fidelity]
        self.level = part_level(c10.CLAIM.parts)
        training = [r for r in records if "replicate" in r.cell.params]
        self.measured = 1 + max(int(r.cell.params["replicate"]) for r in training)
        self.gaps = c10._collect(training, self.measured, "gap")

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
            part = c10._rate_part("rate of the gap in k", plan.k_grid, values, c10.K_BOUND, self.level)
            return part.verdict, part.statistic

        return PartSpec("C10 rate of the gap in k", c10.K_BOUND, 0.1, True, judge)

    def n_spec(self) -> PartSpec:
        """Part 2: the secant slope of the gap in n, upper bound N_BOUND."""
        plan = self.plan
        keys = [("claim", n, plan.n_series_k, c10.TAU) for n in plan.n_grid]
        x = np.array(plan.n_grid, dtype=np.float64)

        def judge(index: np.ndarray, shift: float) -> tuple[Verdict, Statistic | None]:
            values = self._matrix(keys, index) * (x / x[0])[None, :] ** shift
            part = c10._secant_part("rate of the gap in n", plan.n_grid, values, c10.N_BOUND, self.level)
            return part.verdict, part.statistic

        return PartSpec("C10 secant slope of the gap in n", c10.N_BOUND, 0.05, True, judge)

    def tau_spec(self) -> PartSpec:
        """Part 3: G(smallest tau) - G(largest tau) above 0."""
        plan = self.plan
        small, large = (("claim", plan.tau_n, plan.tau_k, tau) for tau in c10.TAU_PAIR)

        def judge(index: np.ndarray, shift: float) -> tuple[Verdict, Statistic | None]:
            difference = self.gaps[small][index] - self.gaps[large][index] + shift
            part = c10._tau_part(difference, self.level)
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
        return c10._secant_part(name, plan.n_grid, self._matrix(keys, index), c10.N_BOUND, self.level).verdict


@dataclass(frozen=True)
class SaturationPower:
    """C6's power over resamples of whole seeds (its m* lives on the m grid, so its effect cannot be moved):

    Attributes:
        p_pass, p_decide: shares of resamples, as measured, whose verdict is PASS, and PASS or FAIL.
        p_fail_mirrored: share that FAIL with the regimes swapped (slope(SCRL) - slope(SSCRL): the measured effect
            mirrored below 0).
        p_control_pass, p_control_fail: the null control's shares.
        allowed: 1 - level.
        seeds, resamples: S and R.
    """

    p_pass: float
    p_decide: float
    p_fail_mirrored: float
    p_control_pass: float
    p_control_fail: float
    allowed: float
    seeds: int
    resamples: int


def saturation_power(
    records: list[CellRecord],
    fidelity: Fidelity,
    *,
    resamples: int = RESAMPLES,
    seeds: int | None = None,
    seed: int = 0,
) -> SaturationPower:
    """C6's shares over seed resamples, judged by :mod:`crl.claims.c06_saturation`'s own m* rule and bootstrap."""
    grid_n, grids = c6.PLANS[fidelity]["n"], c6.m_grids(fidelity)
    measured = 1 + max(int(r.cell.params["replicate"]) for r in records)
    stacked = {arm: c6._stack(records, arm, grid_n, measured, "excess") for arm in c6.ARMS}
    level = part_level(c6.CLAIM.parts)
    rng = np.random.default_rng(seed)
    size = seeds or measured
    claim, mirrored, control = [], [], []
    for _ in range(resamples):
        index = rng.integers(0, measured, size)
        weights = seed_weights(size, rng, c6.N_BOOT)
        resampled = {arm: [values[index] for values in stacked[arm]] for arm in c6.ARMS}
        _, slopes = c6.arm_slopes(resampled, grid_n, grids, weights, level)
        forward, null = c6.claim_and_control(slopes, level)
        claim.append(c6._judge(forward, 0)[0])
        mirrored.append(c6._judge(slope_difference(slopes["scrl"], slopes["sscrl"], level), 0)[0])
        control.append(c6._judge(null, 0)[0])
    return SaturationPower(
        p_pass=_share(claim, Verdict.PASS),
        p_decide=_share(claim, Verdict.PASS) + _share(claim, Verdict.FAIL),
        p_fail_mirrored=_share(mirrored, Verdict.FAIL),
        p_control_pass=_share(control, Verdict.PASS),
        p_control_fail=_share(control, Verdict.FAIL),
        allowed=1.0 - level,
        seeds=size,
        resamples=resamples,
    )


def saturation_verdicts(
    records: list[CellRecord], fidelity: Fidelity, run_seed: int
) -> tuple[tuple[Verdict, Difference], tuple[Verdict, Difference]]:
    """C6's verdict and slope difference, then its control's, on stored cells, judged by this checkout's m* rule
    and bootstrap exactly as :meth:`crl.claims.c06_saturation.Saturation.run` judges them in a run of
    ``crl verify --seed run_seed`` (the same bootstrap stream, ``derive_seed(run_seed, "C6", "bootstrap")``):
    a rule's implementation fixed after a run re-judges that run's cells without recomputing them."""
    grid_n, n_seeds, grids = c6.PLANS[fidelity]["n"], c6.PLANS[fidelity]["seeds"], c6.m_grids(fidelity)
    level = part_level(c6.CLAIM.parts)
    by_arm = {arm: c6._stack(records, arm, grid_n, n_seeds, "excess") for arm in c6.ARMS}
    unconverged = sum(not ok for record in records for ok in record.result["converged"])
    rng = np.random.default_rng(derive_seed(run_seed, c6.CLAIM.id, "bootstrap"))
    weights = seed_weights(n_seeds, rng, c6.N_BOOT)
    _, slopes = c6.arm_slopes(by_arm, grid_n, grids, weights, level)
    claim, control = c6.claim_and_control(slopes, level)
    return (c6._judge(claim, unconverged)[0], claim), (c6._judge(control, unconverged)[0], control)


def verdicts_markdown(verdicts: tuple[tuple[Verdict, Difference], tuple[Verdict, Difference]]) -> str:
    """C6's re-judged verdicts as a Markdown table (CI ends printed in full, so a rounding residue shows)."""
    lines = ["| C6 | verdict | slope difference | CI |", "|---|---|---|---|"]
    for name, (verdict, diff) in zip(("claim", "null control"), verdicts, strict=True):
        lines.append(f"| {name} | {verdict} | {diff.point:.4g} | [{diff.ci_low!r}, {diff.ci_high!r}] |")
    return "\n".join(lines)


CLAIMS: dict[str, type[C5Power] | type[C10Power]] = {"C5": C5Power, "C10": C10Power}
"""The claims whose power this module computes."""


def stored_records(run_dir: Path, claim: str) -> list[CellRecord]:
    """Every record of ``claim`` in a run folder's store (the namespace with the most cells, if there are several)."""
    path = run_dir / "results.sqlite"
    if not path.is_file():
        raise ValueError(f"run_dir={str(run_dir)!r} has no results.sqlite; pass a `crl verify --out` folder.")
    with SweepStore(path) as store:
        spaces = [name for name in store.namespaces() if name.split("@")[0] == claim]
        if not spaces:
            raise ValueError(
                f"claim={claim!r} has no cells in {path}; run `crl verify --claims {claim}` first."
            )
        return max((store.records(name) for name in spaces), key=len)


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


def saturation_markdown(power: SaturationPower) -> str:
    """C6's power as a Markdown table."""
    return "\n".join(
        [
            "| C6 | P(PASS) | P(decide) | P(FAIL), arms swapped | null control P(PASS) (allowed) | P(FAIL) | seeds |",
            "|---|---|---|---|---|---|---|",
            f"| as measured | {power.p_pass:.3f} | {power.p_decide:.3f} | {power.p_fail_mirrored:.3f} | "
            f"{power.p_control_pass:.3f} ({power.allowed:.4f}) | {power.p_control_fail:.3f} | {power.seeds} |",
            f"\n{power.resamples} resamples of whole seeds.",
        ]
    )


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m crl.claims.power RUN_DIR --claim C5``: print the power table (Markdown)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--claim", required=True, choices=[*sorted(CLAIMS), "C6"])
    parser.add_argument("--fidelity", default="standard", choices=[f.value for f in Fidelity])
    parser.add_argument("--resamples", type=int, default=RESAMPLES)
    parser.add_argument(
        "--seeds", type=int, default=None, help="S of the confirmatory run (default: as measured)"
    )
    parser.add_argument("--control-seeds", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0, help="seed of the resampling")
    parser.add_argument(
        "--judge-run-seed",
        type=int,
        default=None,
        help="C6 only: instead of the power, the verdicts of the stored cells themselves under this checkout's "
        "rule, for the run made with `crl verify --seed` this value",
    )
    args = parser.parse_args(argv)
    if args.judge_run_seed is not None:
        if args.claim != "C6":
            parser.error(f"--judge-run-seed is for --claim C6, not {args.claim}")
        records = stored_records(args.run_dir, "C6")
        print(verdicts_markdown(saturation_verdicts(records, Fidelity(args.fidelity), args.judge_run_seed)))
        return
    if args.claim == "C6":
        power = saturation_power(
            stored_records(args.run_dir, "C6"),
            Fidelity(args.fidelity),
            resamples=args.resamples,
            seeds=args.seeds,
            seed=args.seed,
        )
        print(saturation_markdown(power))
        return
    parts, control = power_table(
        args.run_dir,
        args.claim,
        Fidelity(args.fidelity),
        resamples=args.resamples,
        seeds=args.seeds,
        control_seeds=args.control_seeds,
        seed=args.seed,
    )
    print(markdown(args.claim, parts, control))


if __name__ == "__main__":
    main()
