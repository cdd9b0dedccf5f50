"""C6 (synthetic): where more negatives stop helping, m*(n), grows faster with n in SSCRL than in SCRL ([A] Sec. 5).

Pre-registered in docs/claims/C6.md (docs/theory.md section 7, C6).

Experiment (:mod:`crl.claims._c06_fit`). Truth ``AsymmetricSphere(2, kappa=4, anchor_kappa=2, p- = pi)``,
tau = 0.5; s_hat minimises [A]'s gcl empirical risk over the ball |theta| <= 6 of the scores
``s(x, y) = <A x + b, y>`` (it contains s*), on n pairs and a fixed negative set: SCRL (each anchor its own m)
or SSCRL (m shared). The metric is the exact excess risk L(s_hat) - L*. A cell is one (arm, n, seed): it draws
the pairs once (shared by SCRL and SSCRL of that seed and n) and fits every grid m with fresh negatives.

Rule (one part, :mod:`crl.stats.saturation`). m*(n) per regime from the seed means (plateau = mean at the two
largest m, tol = max(Student-t half-width of the plateau at the per-part level, 1% of it)), censored at the
grid's ends; the least-squares slope of log m* on log n as an interval over the censored values; the CI of
slope(SSCRL) - slope(SCRL) by a bootstrap over >= 30 seeds; PASS when it lies above 0.

Negative control: swapped arms. The claim's SCRL arm in SSCRL's role and a second SSCRL arm (SSCRL', on pairs
and negatives independent of the claim's) in SCRL's: slope(SCRL) - slope(SSCRL') has minus the claim's true
difference, so where the claim holds the rule must return FAIL.
"""

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch

from crl.claims._c06_fit import CircleTruth, Fit, Regime, draw_sample, fit_in_ball
from crl.claims.base import (
    Claim,
    ClaimContext,
    ClaimResult,
    Fidelity,
    FigureSpec,
    Statistic,
    Verdict,
    loglog_figure,
    points,
    verdict_above,
)
from crl.stats.saturation import (
    CENSOR_NAMES,
    Difference,
    Saturations,
    SlopeBounds,
    lower_quantile,
    saturations,
    seed_weights,
    slope_bounds,
    slope_difference,
    upper_quantile,
)
from crl.sweep import Cell, derive_seed

TRUTH = CircleTruth(kappa=4.0, kappa0=2.0, tau=0.5)
RADIUS = 6.0
"""Ball radius: 2 |theta*| (|theta*| = tau sqrt(2 kappa^2 + kappa0^2) = 3)."""
ARMS = ("scrl", "sscrl", "control")
REGIME = {"scrl": "scrl", "sscrl": "sscrl", "control": "sscrl"}
PLANS: dict[Fidelity, dict[str, Any]] = {
    Fidelity.QUICK: {"n": (8, 16, 32, 64, 128), "m": tuple(2**i for i in range(1, 10)), "seeds": 30},
    Fidelity.STANDARD: {"n": (32, 64, 128, 256, 512), "m": tuple(2**i for i in range(1, 12)), "seeds": 32},
    Fidelity.FULL: {
        "n": tuple(2**i for i in range(5, 12)),
        "m": tuple(2**i for i in range(1, 15)),
        "seeds": 64,
    },
}
N_BOOT = 2000
UNBOUNDED = 99.0
"""Shown in place of an interval end that censoring leaves unbounded (the report stores finite numbers only)."""


def saturation_cell(cell: Cell) -> dict[str, Any]:
    """One (arm, n, seed): the pairs once, then every grid m (fresh negatives, warm start from the previous m)."""
    params = cell.params
    n = int(params["n"])
    regime: Regime = "shared" if params["regime"] == "sscrl" else "independent"
    pairs_generator = torch.Generator().manual_seed(int(params["pair_seed"]))
    anchors, positives = TRUTH.model().sample(n, pairs_generator)
    rows: dict[str, list[Any]] = {
        "excess": [],
        "empirical": [],
        "kkt": [],
        "constrained": [],
        "converged": [],
    }
    start = None
    for m in params["m_grid"]:
        generator = torch.Generator().manual_seed(derive_seed(cell.seed, int(m)))
        sample = draw_sample(TRUTH, n, int(m), regime, generator, pairs=(anchors, positives))
        fit: Fit = fit_in_ball(sample, TRUTH.tau, RADIUS, start)
        start = fit.theta
        rows["excess"].append(TRUTH.excess_risk(fit.theta))
        rows["empirical"].append(fit.empirical_risk)
        rows["kkt"].append(fit.kkt_residual)
        rows["constrained"].append(fit.constrained)
        rows["converged"].append(fit.converged)
    return rows


class Saturation(Claim):
    """C6 on the synthetic truth (module docstring)."""

    id: ClassVar[str] = "C6"
    title: ClassVar[str] = "Saturation m*(n), synthetic"
    source: ClassVar[str] = "[A] Sec. 5; balancing Thm 4.5/4.6"
    evidence: ClassVar[str] = (
        "[A]'s balance of its bounds read as a prediction: SSCRL's m* grows faster with n than SCRL's "
        "(exact excess risk of ball-constrained ERM on a synthetic truth)"
    )
    parts: ClassVar[int] = 1
    statement: ClassVar[str] = (
        "The number of negatives m*(n) beyond which the excess risk of the ERM stops improving grows faster "
        "with n when the negatives are shared (SSCRL, m* ~ n by balancing the bounds) than when each anchor "
        "has its own (SCRL, m* ~ n^(1/2))."
    )
    rule: ClassVar[str] = (
        "docs/theory.md section 7, C6: slope(SSCRL) - slope(SCRL) of log m*(n) on log n is > 0. Fixed by crl: "
        "AsymmetricSphere(2, kappa=4, anchor_kappa=2, p- = pi), tau = 0.5, s(x,y) = <Ax + b, y> in the ball "
        "|theta| <= 6 (contains s*), s_hat = argmin of the gcl L_hat over the ball (projected Newton, KKT "
        "residual <= 1e-7), metric L(s_hat) - L* (exact). m*(n) = smallest grid m from which the mean metric "
        "stays within tol = max(per-part-level Student-t half-width of the plateau, 1% of it) of the plateau "
        "(mean at the two largest m); right-censored when that is one of the two largest m or none, "
        "left-censored at the smallest m. Censored points enter the least-squares slope through their bounds "
        "(slope intervals, never dropped). CI of the difference: bootstrap over >= 30 seeds (2000 resamples), "
        "lower end from the lower bounds, upper end from the upper bounds. PASS if the CI's lower end is > 0, "
        "FAIL if its upper end is < 0, INCONCLUSIVE otherwise. Both slopes are reported against 1/2 and 1. "
        "Control: swapped arms, slope(SCRL) - slope(SSCRL') with SSCRL' on independent pairs (true difference "
        "minus the claim's); expected FAIL where the claim PASSes, never PASS."
    )
    control_description: ClassVar[str] = (
        "Swapped arms: the claim's SCRL arm in SSCRL's role and a second SSCRL arm (SSCRL', independent pairs "
        "and negatives) in SCRL's, so the true difference slope(SCRL) - slope(SSCRL') is minus the claim's; "
        "same fits, metric, m* rule, censoring, bootstrap and level; it must not PASS, and where the claim "
        "PASSes it must FAIL."
    )

    def run(self, ctx: ClaimContext) -> ClaimResult:
        """Fit every (arm, n, seed, m), find m*(n) per arm, and judge the slope differences."""
        plan = PLANS[ctx.fidelity]
        grid_n, grid_m, n_seeds = plan["n"], plan["m"], plan["seeds"]
        cells = [
            Cell(params, ctx.seed_for(params))
            for arm in ARMS
            for n in grid_n
            for r in range(n_seeds)
            for params in [_cell_params(ctx, arm, n, r, grid_m)]
        ]
        records = ctx.run_cells(cells, saturation_cell)
        by_arm = {arm: _stack(records, arm, grid_n, n_seeds, "excess") for arm in ARMS}
        unconverged = sum(not ok for record in records for ok in record.result["converged"])
        weights = seed_weights(n_seeds, ctx.rng("bootstrap"), N_BOOT)
        log_n = np.log(np.asarray(grid_n, dtype=np.float64))
        m_values = np.asarray(grid_m, dtype=np.float64)
        sats = {arm: saturations(m_values, by_arm[arm], weights, ctx.level) for arm in ARMS}
        slopes = {arm: slope_bounds(log_n, sats[arm]) for arm in ARMS}
        claim, control = claim_and_control(slopes, ctx.level)
        verdict, reasons = _judge(claim, unconverged)
        control_verdict, control_reasons = _judge(control, unconverged)
        table = _table(grid_n, grid_m, by_arm, sats, records)
        return self.result(
            ctx,
            verdict=verdict,
            statistics=[
                _difference_statistic("slope(SSCRL) - slope(SCRL) of log m* on log n", claim, ctx.level),
                *(_slope_statistic(arm, slopes[arm], ctx.level) for arm in ("sscrl", "scrl")),
            ],
            control_verdict=control_verdict,
            control_statistics=[
                _difference_statistic("control: slope(SCRL) - slope(SSCRL')", control, ctx.level),
                _slope_statistic("control", slopes["control"], ctx.level),
            ],
            figures=[_figure(grid_n, grid_m, sats)],
            table=table,
            notes=_notes(grid_n, grid_m, n_seeds, sats, slopes, records, unconverged),
            reasons=reasons,
            control_reasons=control_reasons,
        )


def claim_and_control(slopes: dict[str, SlopeBounds], level: float) -> tuple[Difference, Difference]:
    """The claim's slope(SSCRL) - slope(SCRL) and the swapped-arms control's slope(SCRL) - slope(SSCRL')."""
    claim = slope_difference(slopes["sscrl"], slopes["scrl"], level)
    control = slope_difference(slopes["scrl"], slopes["control"], level)
    return claim, control


def _cell_params(
    ctx: ClaimContext, arm: str, n: int, replicate: int, grid_m: Sequence[int]
) -> dict[str, Any]:
    """A cell's parameters; SCRL and SSCRL share the pairs of (n, replicate), the control's SSCRL' its own."""
    pair_key = "control" if arm == "control" else "claim"
    return {
        "arm": arm,
        "regime": REGIME[arm],
        "n": n,
        "replicate": replicate,
        "m_grid": list(grid_m),
        "pair_seed": ctx.seed_for("pairs", pair_key, n, replicate),
    }


def _stack(records: list[Any], arm: str, grid_n: Sequence[int], n_seeds: int, key: str) -> np.ndarray:
    """(S, N, M) array of one arm's per-m values ``key``."""
    rows: dict[tuple[int, int], list[float]] = {}
    for record in records:
        params = record.cell.params
        if params["arm"] == arm:
            rows[(int(params["replicate"]), int(params["n"]))] = record.result[key]
    return np.asarray([[rows[(r, n)] for n in grid_n] for r in range(n_seeds)], dtype=np.float64)


def _judge(difference: Difference, unconverged: int) -> tuple[Verdict, list[str]]:
    """PASS if the CI is above 0, FAIL if below, else INCONCLUSIVE; INCONCLUSIVE whenever a fit did not converge."""
    if unconverged:
        return Verdict.INCONCLUSIVE, [f"{unconverged} fits did not reach the KKT tolerance"]
    statistic = Statistic("difference", difference.point, difference.ci_low, difference.ci_high)
    verdict = verdict_above(statistic, 0.0)
    if verdict is Verdict.INCONCLUSIVE:
        return verdict, [
            f"CI [{difference.ci_low:.3g}, {difference.ci_high:.3g}] of the slope difference contains 0"
        ]
    return verdict, []


def _difference_statistic(name: str, difference: Difference, level: float) -> Statistic:
    """The difference with its bootstrap CI; the detail gives its censoring bounds on the data."""
    detail = (
        f"censored points at their bounds; bounds on the data [{difference.bound_low:.3g}, "
        f"{difference.bound_high:.3g}]; bootstrap over seeds, {N_BOOT} resamples; +-{UNBOUNDED:g} marks an end "
        "that censoring leaves unbounded"
    )
    return Statistic(
        name, difference.point, _shown(difference.ci_low), _shown(difference.ci_high), level, detail
    )


def _shown(value: float) -> float:
    """``value``, or +-UNBOUNDED in place of an infinite end (the verdict is taken before this)."""
    return value if math.isfinite(value) else math.copysign(UNBOUNDED, value)


def _slope_statistic(arm: str, slope: SlopeBounds, level: float) -> Statistic:
    """One arm's slope (reported against 1/2 and 1, not judged)."""
    name = {"sscrl": "slope of log m* on log n, SSCRL", "scrl": "slope of log m* on log n, SCRL"}.get(
        arm, f"slope of log m* on log n, {arm}"
    )
    detail = f"bounds on the data [{slope.low[0]:.3g}, {slope.high[0]:.3g}]; reported against 1/2 and 1, not judged"
    return Statistic(
        name,
        float(slope.point[0]),
        _shown(lower_quantile(slope.low[1:], level)),
        _shown(upper_quantile(slope.high[1:], level)),
        level,
        detail,
    )


def _table(
    grid_n: Sequence[int],
    grid_m: Sequence[int],
    by_arm: dict[str, np.ndarray],
    sats: dict[str, Saturations],
    records: list[Any],
) -> list[dict[str, Any]]:
    """One row per (arm, n, m): mean metric with its se, the plateau, tol, m*(n) and its censoring, and the
    fraction of seeds whose ball constraint binds."""
    constrained = {arm: _stack(records, arm, grid_n, by_arm[arm].shape[0], "constrained") for arm in ARMS}
    rows = []
    for arm in ARMS:
        values, sat = by_arm[arm], sats[arm]
        for i, n in enumerate(grid_n):
            for j, m in enumerate(grid_m):
                column = values[:, i, j]
                rows.append(
                    {
                        "arm": arm,
                        "n": n,
                        "m": m,
                        "excess_risk": float(column.mean()),
                        "excess_risk_se": float(column.std(ddof=1) / math.sqrt(column.size)),
                        "ball_active_fraction": float(constrained[arm][:, i, j].mean()),
                        "plateau": float(sat.plateau[0, i]),
                        "tol": float(sat.tol[0, i]),
                        "m_star": float(math.exp(sat.log_m[0, i])),
                        "m_star_censoring": CENSOR_NAMES[int(sat.censor[0, i])],
                    }
                )
    return rows


def _notes(
    grid_n: Sequence[int],
    grid_m: Sequence[int],
    n_seeds: int,
    sats: dict[str, Saturations],
    slopes: dict[str, SlopeBounds],
    records: list[Any],
    unconverged: int,
) -> str:
    """m*(n) per arm with its bootstrap interval, the slopes beside 1/2 and 1, and the fits' KKT residuals."""
    parts = []
    for arm in ARMS:
        sat = sats[arm]
        stars = []
        for i, n in enumerate(grid_n):
            low = math.exp(lower_quantile(sat.log_m[1:, i], 0.995))
            high = math.exp(upper_quantile(sat.log_m[1:, i], 0.995))
            mark = {1: ">=", 2: "<="}.get(int(sat.censor[0, i]), "")
            stars.append(f"n={n}: m* {mark}{math.exp(sat.log_m[0, i]):.0f} [{low:.0f}, {high:.0f}]")
        parts.append(f"{arm}: " + "; ".join(stars) + f"; slope {slopes[arm].point[0]:.3g} (vs 1/2 and 1)")
    worst = max(max(record.result["kkt"]) for record in records)
    return (
        f"{n_seeds} seeds, n in {list(grid_n)}, m in {list(grid_m)}. "
        + " | ".join(parts)
        + f". Largest KKT residual {worst:.2g}; fits not converged: {unconverged}."
    )


def _figure(grid_n: Sequence[int], grid_m: Sequence[int], sats: dict[str, Saturations]) -> FigureSpec:
    """m*(n) per arm on log-log axes (censored points at their bounds), with slopes 1/2 and 1 for reference."""
    labels = {"scrl": "SCRL", "sscrl": "SSCRL", "control": "control: SSCRL' (independent pairs)"}
    series = [
        points(
            labels[arm],
            list(grid_n),
            np.exp(sats[arm].log_m[0]).tolist(),
            control=arm == "control",
        )
        for arm in ARMS
    ]
    return loglog_figure(
        "m_star", "C6: m*(n) per regime", "n (pairs)", "m* (grid m)", *series, theory_slope=1.0
    )


CLAIM = Saturation()
