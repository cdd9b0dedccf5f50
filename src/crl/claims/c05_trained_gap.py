"""C5: the generalisation gap and excess risk of trained models (ERM) against m and n ([A] Thm 4.5/4.6).

Pre-registered in docs/claims/C5.md (docs/theory.md section 7, C5).

Experiment. Truth ``VMFUniform(3, kappa=4)``, tau = 0.5 (s* = tau kappa <x, y>, bounded: |s*| <= 2). Score family
``x^T W y + b^T y`` (p = 12, :mod:`crl.erm`), restricted to the ball ``|theta| <= R = 1.5 |theta*|``; s_hat = the
ERM of [A]'s L_hat on n pairs and a fixed negative set (SCRL: n x m; SSCRL: m shared), solved by
:func:`crl.erm.convex.fit_ball` to a KKT residual <= 1e-8 (reported per cell, with whether the ball binds).
Per fit: G = L(s_hat) - L_hat(s_hat), its variance-reduced form G_cv (same expectation; :mod:`crl.erm.trained`),
L(s_hat) - L* and E* - E(s_hat), exact inner expectations. |G| is the absolute value of the seed mean of G_cv.

Rule (five parts, each at the per-part level; intervals by the delete-one-seed jackknife with Student-t
quantiles, :func:`crl.stats.jackknife_t`; contract v2 of docs/theory.md section 7):

1. SCRL, vs m at fixed n on the window of m where the ball binds in no seed and every fit converged: fit
   |G|(m) = a + b m^r; PASS when r's CI upper end <= -0.9, FAIL when its lower end > -0.9
   (:func:`crl.claims.verdict.verdict_at_most`, bound = r + delta with r = -1, delta = 0.1); INCONCLUSIVE
   with fewer than 5 window points (the misfit test needs 2 degrees of freedom beside a, b, r) or a misfit
   that is material and significant (:func:`crl.stats.judge_misfit` on the seeds' covariance).
2. SSCRL, offset-free (contract v4): on the window's consecutive doublings (m, 2m), the per-seed differences
   D(m) = G_cv(m) - G_cv(2m), whose mean is b (1 - 2^r) m^r when G = a + b m^r: a pure power law with the same r
   and no offset to absorb it. r is the rate of the seed means of D by :func:`crl.stats.seed_rate` (the misfit
   protocol, jackknife Student-t); at least 4 differences; PASS when r's CI upper end <= -0.4 (r = -1/2), FAIL
   when its lower end > -0.4; a mean D <= 0 is INCONCLUSIVE.
3. SSCRL's |G| above SCRL's at each m of both windows with m <= n/4 (above it both regimes share the n-floor):
   the CI of log(|G|_SSCRL/|G|_SCRL) above 0 at every such m (each m at the part's level divided over those m,
   Bonferroni), below 0 at some m: FAIL.
4. SCRL vs n at fixed m, end to end (:func:`crl.stats.secant_rate`): the secant slope between the window's
   ends of the floor-free gap G - b*_m = (L(s_hat) - L*) + (L_hat(s*) - L_hat(s_hat)) (>= 0 per seed; b*_m =
   L* - L_hat(s*) is the fixed-s* inner bias on the same sample) has CI upper end <= -0.45. The leftover floor
   b*_m, measured with fresh negatives, is reported at the largest n.
5. The same for the excess risk L(s_hat) - L*.

Control: a heavy-tailed score class, where [A]'s bounded-score premise fails. Gaussian anchors and negatives
N(0, I_3) with wide positives y = rho x + sqrt(v) eps (``GaussianTwoTower(3, rho=0.5, variance=3)``), so
s* = tau log p+/p- carries ``e* |y|^2`` with e* = tau (v - 1)/(2v) > 0 and, under p-, ``exp(s*/tau)`` has the tail
index alpha = v/(v - 1) = 1.5 (finite mean, infinite variance; C3's control has alpha = 1.2). The class is
``x^T W y + b^T y + e* |y|^2`` with e* fixed (:func:`crl.erm.trained.family_for`), so every member has the same
tail and a finite risk; it contains s*. The SCRL inner bias then falls like m^(1 - alpha) = m^-0.5, not 1/m. Ball
radius 3 |theta*| (the heavy tail drives the ERM to the boundary at small m; pilot, docs/claims/C5.md), 48 seeds
(quick 8, full 64: its gaps are noisier). Parts 1-3 on the same grid and level; it must not PASS.

Cells (:func:`erm_cell`): one ball-constrained ERM fit on a synthetic truth and its measurements. A cell is
(arm, regime, n, m, seed index) at the fidelity's evaluation sizes; its seed derives from (arm, n, seed index)
only, so seed i draws the same n pairs at every m and in both regimes (common random numbers: the n-floor's
noise is shared along the m axis and between the regimes, and the jackknife over seeds keeps seed i's cells
together). Each anchor's negatives are drawn after the pairs, independently per cell.

Statistics: the offset power law G(m) = a + b m^r, secant slopes in n, and ratios, each with a Student-t
interval over seeds by the delete-one-seed jackknife (:func:`crl.stats.jackknife_t`).

Every statistic here is a smooth function of the seed means of a quantity at each grid point (k seeds per
point; seed i of every point forms "seed i"). Its interval: the estimate from all seeds, the jackknife standard
error ``se^2 = (k - 1)/k sum_i (theta_(i) - theta_(.))^2`` over the k delete-one estimates, and the Student-t
quantile with k - 1 degrees of freedom at the part's level (docs/theory.md section 7: Student-t over seeds, not a
percentile bootstrap, which undercovers at 8 seeds).

The offset power law is fitted by relative least squares, ``min sum_j ((y_j - a - b x_j^r)/y_j)^2``: for each r on
a grid, (a, b) by weighted linear least squares, then a parabola through the grid minimum refines r. Its misfit
is judged by :func:`crl.stats.judge_misfit` (material and significant, on the seeds' covariance); a misfit makes
the part INCONCLUSIVE.
"""

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from crl._vocab import REGIME_LABELS
from crl.claims.context import ClaimContext, Fidelity
from crl.claims.figure_spec import FigureSpec, loglog_figure, points
from crl.claims.result import Claim, ClaimResult
from crl.claims.verdict import Statistic, Verdict, combine_verdicts, verdict_above, verdict_at_most
from crl.erm.trained import erm_record, ideal_parameters
from crl.stats import FewSeedsError, NonPositiveMeanError, jackknife_t, judge_misfit, secant_rate, seed_rate
from crl.stats.misfit import offset_power_jacobian
from crl.sweep import Cell, CellRecord
from crl.synthetic import GaussianTwoTower, VMFUniform
from crl.synthetic.base import GroundTruth

TAU = 0.5
KAPPA = 4.0
"""vMF concentration of the claim's truth: s* = tau kappa <x, y>, |s*| <= 2."""
CONTROL_RHO = 0.5
"""rho of the control's wide Gaussian truth (positives y = rho x + sqrt(v) eps)."""
CONTROL_VARIANCE = 3.0
"""v of the control's positives: exp(s*/tau) has the tail index v/(v - 1) = 1.5 under p- = N(0, I)."""
DIM = 3
RADIUS_FACTORS = {"claim": 1.5, "control": 3.0}
"""The ball's radius R = factor |theta*|: contains s* with room, binds where the sample is (nearly) separable; the
control's heavy tail needs more room (its pilot, docs/claims/C5.md)."""


def truth_of(arm: str) -> GroundTruth:
    """The claim's bounded truth (VMFUniform(3, kappa = 4)) or the control's heavy-tailed one (wide Gaussian)."""
    if arm in ("claim", "shared-control"):
        return VMFUniform(DIM, KAPPA)
    if arm == "control":
        return GaussianTwoTower(DIM, CONTROL_RHO, variance=CONTROL_VARIANCE)
    raise ValueError(f"arm={arm!r} is not known; use 'claim', 'control' or 'shared-control'.")


def radius_of(arm: str) -> float:
    """R = factor |theta*| for the arm's truth (the n-parts' control uses the claim's ball)."""
    factor = RADIUS_FACTORS["control" if arm == "control" else "claim"]
    return factor * float(ideal_parameters(truth_of(arm), TAU).norm())


def erm_cell(cell: Cell) -> dict[str, Any]:
    """Fit and measure one cell (:func:`crl.erm.trained.erm_record`); failures come back as records."""
    p = cell.params
    arm = str(p["arm"])
    return erm_record(
        truth_of(arm),
        n=int(p["n"]),
        m=int(p["m"]),
        tau=TAU,
        regime=p["regime"],
        radius=radius_of(arm),
        seed=cell.seed,
        n_eval=int(p["n_eval"]),
        n_bias=int(p["n_bias"]),
    ).to_dict()


FloatArray = NDArray[np.float64]

EXPONENT_GRID = np.arange(-3.0, 0.5 + 1e-9, 0.002)
"""Candidate exponents r of the offset power law."""


@dataclass(frozen=True)
class OffsetPowerLaw:
    """``y = a + b x^r`` fitted by relative least squares (module docstring)."""

    a: float
    b: float
    r: float
    max_relative_residual: float

    def predict(self, x: FloatArray) -> FloatArray:
        """``a + b x^r``."""
        return self.a + self.b * np.power(x, self.r)


def offset_power_fit(x: FloatArray, y: FloatArray) -> OffsetPowerLaw:
    """Fit ``y = a + b x^r`` (module docstring) to at least 4 points with y > 0.

    Raises:
        ValueError: on fewer than 4 points, mismatched lengths, x <= 0 or y <= 0.
    """
    gx, gy = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if gx.shape != gy.shape or gx.ndim != 1 or gx.size < 4:
        raise ValueError(
            f"x and y must be 1-D of equal length >= 4 (a, b, r and one more); got {gx.shape}, {gy.shape}."
        )
    if np.any(gx <= 0.0) or np.any(gy <= 0.0) or not np.all(np.isfinite(gy)):
        raise ValueError("x and y must be finite and > 0 (G is fitted on |G| means).")
    scale = math.exp(float(np.mean(np.log(gx))))
    u = gx / scale
    rss, _, _ = _profile(u, gy, EXPONENT_GRID)
    best = int(np.clip(np.argmin(rss), 1, EXPONENT_GRID.size - 2))
    left, mid, right = rss[best - 1], rss[best], rss[best + 1]
    curvature = left - 2.0 * mid + right
    shift = 0.5 * (left - right) / curvature if curvature > 0.0 else 0.0
    step = EXPONENT_GRID[1] - EXPONENT_GRID[0]
    r = float(EXPONENT_GRID[best] + np.clip(shift, -1.0, 1.0) * step)
    _, a_r, b_r = _profile(u, gy, np.array([r]))
    a, b = float(a_r[0]), float(b_r[0]) / scale**r
    fitted = a + b * gx**r
    residual = float(np.max(np.abs(gy / fitted - 1.0))) if np.all(fitted > 0.0) else math.inf
    return OffsetPowerLaw(a=a, b=b, r=r, max_relative_residual=residual)


def _profile(
    u: FloatArray, y: FloatArray, exponents: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """For every exponent r at once: the relative residual sum of squares of the best (a, b) and that (a, b).

    Minimises ``sum_j (1 - a/y_j - b u_j^r/y_j)^2`` by the 2 x 2 normal equations (columns c0 = 1/y, c1 = u^r/y).
    """
    c0 = 1.0 / y
    c1 = u[None, :] ** exponents[:, None] / y[None, :]
    s00, s01, s11 = float(c0 @ c0), c1 @ c0, np.sum(c1 * c1, axis=1)
    t0, t1 = float(c0.sum()), c1.sum(axis=1)
    det = s00 * s11 - s01 * s01
    safe = np.where(np.abs(det) > 1e-300, det, 1.0)
    a = (s11 * t0 - s01 * t1) / safe
    b = (s00 * t1 - s01 * t0) / safe
    resid = 1.0 - a[:, None] * c0[None, :] - b[:, None] * c1
    rss = np.where(np.abs(det) > 1e-300, np.sum(resid * resid, axis=1), np.inf)
    return rss, a, b


M_GRIDS = {
    Fidelity.QUICK: (8, 16, 32, 64, 128, 256),
    Fidelity.STANDARD: (8, 16, 32, 64, 128, 256, 512, 1024),
    Fidelity.FULL: (32, 64, 128, 256, 512, 1024, 2048),
}
N_FOR_M = {Fidelity.QUICK: 256, Fidelity.STANDARD: 1024, Fidelity.FULL: 4096}
"""n of the m series (stated per series)."""
N_GRIDS = {
    Fidelity.QUICK: (128, 256, 512, 1024),
    Fidelity.STANDARD: (256, 512, 1024, 2048, 4096),
    Fidelity.FULL: (256, 512, 1024, 2048, 4096, 8192, 16384),
}
M_FOR_N = {Fidelity.QUICK: 64, Fidelity.STANDARD: 256, Fidelity.FULL: 256}
"""m of the n series (SCRL)."""
SHARED_CONTROL_M = 16
"""m of the n-parts' control: one set of 16 negatives shared by all anchors (docs/claims/C5.md)."""
SEEDS = {Fidelity.QUICK: 4, Fidelity.STANDARD: 12, Fidelity.FULL: 96}
"""The claim's seeds (m and n series, and the n-parts' control); full's 96 sized by the one power method
(docs/claims/C5.md, contract v4)."""
CONTROL_SEEDS = {Fidelity.QUICK: 8, Fidelity.STANDARD: 48, Fidelity.FULL: 64}
"""The control's seeds: its heavy-tailed gaps are noisier, and its r sits 0.3-0.4 from the bound (pilot)."""
N_EVAL = {Fidelity.QUICK: 4096, Fidelity.STANDARD: 16384, Fidelity.FULL: 65536}
"""Fresh pairs for the outer means of L(s_hat) - L* and E* - E(s_hat)."""
N_BIAS = {Fidelity.QUICK: 1024, Fidelity.STANDARD: 2048, Fidelity.FULL: 8192}
"""Fresh draws for bias*_m = L* - E L_hat_m(s*) in G_cv."""
BOUNDS = {"independent": -0.9, "shared": -0.4}
"""r + delta: SCRL r = -1, SSCRL r = -1/2, delta = 0.1 (upper-bound rule)."""
N_BOUND = -0.45
"""-1/2 + 0.05: the secant slope in n of the floor-free gap and of the excess risk."""
MIN_WINDOW = 5
"""a, b and r plus the 2 degrees of freedom the misfit test needs."""
MIN_DIFFERENCES = 4
"""Part 2's differences D(m): a power law's 2 parameters plus the 2 degrees of freedom of the misfit test."""
RATIO_SHARE = 4
"""The SSCRL/SCRL ratio is judged only where m <= n / 4."""


class TrainedGap(Claim):
    """C5 (module docstring): trained-model gap and excess risk vs m and n, and the heavy-tailed control."""

    id: ClassVar[str] = "C5"
    title: ClassVar[str] = "Trained models: gap and excess risk vs m and n"
    source: ClassVar[str] = "[A] Thm 4.5/4.6"
    evidence: ClassVar[str] = (
        "[A] Thm 4.5/4.6 for the empirical risk minimiser of a bounded, realisable score class (a norm ball of "
        "bilinear scores) on the vMF sphere: the rates in m and n of its gap and excess risk, as upper bounds"
    )
    parts: ClassVar[int] = 5
    statement: ClassVar[str] = (
        "For the ERM over a bounded score class, the gap L(s_hat) - L_hat(s_hat) decays in m at least like 1/m "
        "(SCRL) and 1/sqrt(m) (SSCRL), where it is larger than in SCRL (m <= n/4), and the gap without its "
        "fixed-m floor and the excess risk decay in n at least like 1/sqrt(n)."
    )
    rule: ClassVar[str] = (
        "docs/theory.md section 7, C5 (contract v4), on VMFUniform(3, kappa=4), tau = 0.5, ERM of gcl L_hat "
        "over x^T W y + b^T y with |theta| <= 1.5 |theta*| (Newton with a multiplier search, KKT residual <= "
        "1e-8 per fit). |G| = |seed mean of G_cv| (G minus the fixed-s* gap of the same sample plus its "
        "expectation). Intervals: delete-one-seed jackknife, Student-t with seeds - 1 dof. (1) SCRL and (2) "
        "SSCRL vs m at n = 1024 (quick 256, full 4096), m in {8, ..., 1024} (quick to 256, full {32, ..., "
        "2048}), on the window of m "
        "where no seed's ball binds and every fit converged. (1) SCRL (at least 5 m, else INCONCLUSIVE): fit "
        "|G| = a + b m^r by relative least squares; a misfit that is material and significant (chi^2 on the "
        "seeds' covariance at alpha 0.05 and a relative residual above 5% beyond t se) is INCONCLUSIVE; PASS if "
        "r's CI upper end <= -0.9, FAIL if its lower end is above it, else INCONCLUSIVE. (2) SSCRL, offset-free: "
        "the per-seed differences D(m) = G_cv(m) - G_cv(2m) on the window's doublings (at least 4, else "
        "INCONCLUSIVE), r = the power-law rate of their seed means (the same misfit protocol, with the two-term "
        "model as its fallback; a mean D <= 0 is INCONCLUSIVE); PASS if r's CI upper end <= -0.4, FAIL if its "
        "lower end is above it, else INCONCLUSIVE. "
        "(3) At every m <= n/4 of both windows the CI of log(|G| SSCRL / |G| SCRL) lies above 0 (Bonferroni "
        "over those m): PASS; below 0 at some m: FAIL. (4, 5) SCRL vs n at m = 256 (quick 64), n in {256, ..., "
        "4096} (quick {128, ..., 1024}, full to 16384), end to end: the secant slope between the window's ends "
        "of the floor-free gap G - b*_m = (L(s_hat) - L*) + (L_hat(s*) - L_hat(s_hat)) and of the excess risk "
        "L(s_hat) - L* has CI upper end <= -0.45 (PASS), lower end above (FAIL); the fitted slope and the "
        "leftover floor b*_m at the largest n are reported. Seeds: 12 (quick 4, full 96). Every r and slope is "
        "reported as measured; non-converged fits are counted and reported."
    )
    control_description: ClassVar[str] = (
        "A heavy-tailed score class ([A]'s bounded-score premise fails): GaussianTwoTower(3, rho=0.5, variance=3) "
        "(negatives N(0, I), positives y = rho x + sqrt(3) eps), class x^T W y + b^T y + e*|y|^2 with e* = tau/3 "
        "fixed (contains s*; exp(s/tau) has tail index 1.5 under p- for every member, so the SCRL bias falls like "
        "m^-0.5), ball 3 |theta*|, 48 seeds (quick 8, full 64); same grid, estimator and level; parts 1-3 (the m "
        "series). And for parts 4-5 (the n series): the claim's truth, class and ball in SSCRL with one set of 16 "
        "negatives shared by all anchors, whose excess risk and floor-free gap keep a term that does not fall "
        "with n; same n grid, seeds, rule and level. Neither may PASS."
    )

    def run(self, ctx: ClaimContext) -> ClaimResult:
        """Fit every cell, reduce each series over seeds, and judge the five parts and the control."""
        fid = ctx.fidelity
        cells = _cells(ctx)
        records = {(r.cell.key, r.cell.seed): r for r in ctx.run_cells(cells, erm_cell)}
        data = Series(list(records.values()), ctx.seeds_or(SEEDS[fid]))
        n_m = N_FOR_M[fid]
        claim_parts, claim_stats, claim_reasons = m_parts(data, "claim", n_m, M_GRIDS[fid], ctx.level)
        n_verdicts, n_stats, n_reasons = n_parts(data, N_GRIDS[fid], M_FOR_N[fid], ctx.level)
        control_parts, control_stats, control_reasons = m_parts(data, "control", n_m, M_GRIDS[fid], ctx.level)
        shared_parts, shared_stats, shared_reasons = n_parts(
            data, N_GRIDS[fid], SHARED_CONTROL_M, ctx.level, series=SHARED_CONTROL
        )
        table = data.table()
        failed = sum(row["failed"] for row in table)
        return self.result(
            ctx,
            verdict=combine_verdicts(*claim_parts, *n_verdicts),
            statistics=claim_stats + n_stats,
            control_verdict=controls_verdict(
                combine_verdicts(*control_parts), combine_verdicts(*shared_parts)
            ),
            control_statistics=control_stats + shared_stats,
            figures=[_figure(data, n_m, M_GRIDS[fid]), _n_figure(data, N_GRIDS[fid], M_FOR_N[fid])],
            table=table,
            notes=(
                f"n = {N_FOR_M[fid]} for the m series, m = {M_FOR_N[fid]} for the n series; "
                f"{ctx.seeds_or(SEEDS[fid])} seeds "
                f"(control {CONTROL_SEEDS[fid]}); "
                f"ball radius {RADIUS_FACTORS['claim']} |theta*| (control {RADIUS_FACTORS['control']}); tau = {TAU}, "
                f"kappa = {KAPPA} (control: rho = {CONTROL_RHO}, v = {CONTROL_VARIANCE}, tail index "
                f"{CONTROL_VARIANCE / (CONTROL_VARIANCE - 1.0):.2g}). "
                f"Failed fits (not converged, or infinite risk): {failed} of {len(records)} cells, counted in the "
                f"table per point with their reasons. Largest KKT residual: "
                f"{max(row['kkt_max'] for row in table):.2g}. Plain G and E* - E(s_hat) are in the table."
            ),
            reasons=claim_reasons + n_reasons,
            control_reasons=control_reasons + shared_reasons,
        )


def controls_verdict(heavy_tailed: Verdict, shared: Verdict) -> Verdict:
    """The two controls as one: PASS if either PASSes (a control that passes fails the run), FAIL if both
    FAIL, INCONCLUSIVE otherwise (docs/claims/C5.md, "A control for the n-parts")."""
    if Verdict.PASS in (heavy_tailed, shared):
        return Verdict.PASS
    if heavy_tailed is Verdict.FAIL and shared is Verdict.FAIL:
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE


def _cells(ctx: ClaimContext) -> list[Cell]:
    """Every (arm, regime, n, m, seed index) of the m series (both arms) and the n series (claim, SCRL; the
    n-parts' control, SSCRL at m = 16), once."""
    fid = ctx.fidelity
    sizes = {"n_eval": N_EVAL[fid], "n_bias": N_BIAS[fid]}
    specs = [
        (arm, regime, N_FOR_M[fid], m)
        for arm in ("claim", "control")
        for regime in ("independent", "shared")
        for m in M_GRIDS[fid]
    ] + [("claim", "independent", n, M_FOR_N[fid]) for n in N_GRIDS[fid]]
    specs += [("shared-control", "shared", n, SHARED_CONTROL_M) for n in N_GRIDS[fid]]
    unique: dict[tuple[str, int], Cell] = {}
    for arm, regime, n, m in specs:
        for index in range(CONTROL_SEEDS[fid] if arm == "control" else ctx.seeds_or(SEEDS[fid])):
            params = {"arm": arm, "regime": regime, "n": n, "m": m, "index": index, **sizes}
            cell = Cell(params, ctx.seed_for("pairs", arm, n, index))
            unique[(cell.key, cell.seed)] = cell
    return list(unique.values())


class Series:
    """The records grouped by (arm, regime, n, m), seeds in index order."""

    def __init__(self, records: list[CellRecord], seeds: int) -> None:
        self.groups: dict[tuple[str, str, int, int], list[dict[str, Any]]] = {}
        for record in sorted(records, key=lambda r: int(r.cell.params["index"])):
            p = record.cell.params
            key = (str(p["arm"]), str(p["regime"]), int(p["n"]), int(p["m"]))
            self.groups.setdefault(key, []).append(record.result)
        self.seeds = seeds

    def usable(self, key: tuple[str, str, int, int]) -> bool:
        """Every seed converged with a finite risk and none has its ball binding."""
        rows = self.groups[key]
        return all(r["status"] == "ok" and not r["active"] for r in rows)

    def values(self, key: tuple[str, str, int, int], name: str) -> np.ndarray:
        """(seeds,) values of one measurement (only for usable groups)."""
        return np.array([float(r[name]) for r in self.groups[key]], dtype=np.float64)

    def table(self) -> list[dict[str, Any]]:
        """One row per series point: means over converged seeds, counts of binding balls and failures."""
        rows = []
        for (arm, regime, n, m), results in sorted(self.groups.items()):
            ok = [r for r in results if r["status"] == "ok"]
            row: dict[str, Any] = {
                "arm": arm,
                "regime": REGIME_LABELS[regime],
                "n": n,
                "m": m,
                "seeds": len(results),
                "active": sum(bool(r["active"]) for r in results),
                "failed": len(results) - len(ok),
                "reasons": "; ".join(sorted({r["reason"] for r in results if r["reason"]})),
                "kkt_max": max(float(r["kkt_residual"]) for r in results),
            }
            for name in ("gap_cv", "gap", "excess_risk", "auc_gap"):
                values = np.array([float(r[name]) for r in ok])
                row[name] = float(values.mean()) if values.size else None
                row[f"{name}_se"] = (
                    float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else None
                )
            rows.append(row)
        return rows


def m_parts(
    data: Series, arm: str, n: int, grid: tuple[int, ...], level: float
) -> tuple[list[Verdict], list[Statistic], list[str]]:
    """Parts 1-3 of one arm at n pairs: r in m per regime on its window, and the SSCRL/SCRL ratio."""
    verdicts, stats, reasons = [], [], []
    windows = {}
    for regime in ("independent", "shared"):
        window = [m for m in grid if data.usable((arm, regime, n, m))]
        windows[regime] = window
        if regime == "independent":
            name = f"{arm}: r of |G| = a + b m^r, {REGIME_LABELS[regime]}, n = {n}, window m = {window}"
            verdict, statistic, reason = exponent_part(data, arm, regime, n, window, level, name)
        else:
            verdict, statistic, reason = difference_part(data, arm, regime, n, window, level)
        verdicts.append(verdict)
        stats.extend(statistic)
        reasons.extend(reason)
    both = [m for m in windows["independent"] if m in windows["shared"] and RATIO_SHARE * m <= n]
    verdict, statistic, reason = ratio_part(data, arm, n, both, level)
    return [*verdicts, verdict], stats + statistic, reasons + reason


def exponent_part(
    data: Series, arm: str, regime: str, n: int, window: list[int], level: float, name: str
) -> tuple[Verdict, list[Statistic], list[str]]:
    """Part 1 or 2: the exponent r of a + b m^r fitted to |G| on the window, against its bound."""
    label = f"{arm} {REGIME_LABELS[regime]}"
    if len(window) < MIN_WINDOW:
        return (
            Verdict.INCONCLUSIVE,
            [],
            [f"{label}: {len(window)} m in the window (< {MIN_WINDOW}): too few points"],
        )
    x = np.array(window, dtype=np.float64)
    seeds = np.column_stack([data.values((arm, regime, n, m), "gap_cv") for m in window])
    try:
        means = seeds.mean(axis=0)
        fit = offset_power_fit(x, np.abs(means))
        interval = jackknife_t(lambda means: offset_power_fit(x, np.abs(means)).r, seeds, level)
        fitted = fit.predict(x)
        test = judge_misfit(
            np.abs(means),
            fitted,
            offset_power_jacobian(x, fit.a, fit.b, fit.r),
            seed_values=seeds * np.sign(means)[None, :],
        )
    except ValueError as error:
        return Verdict.INCONCLUSIVE, [], [f"{label}: the fit failed ({error})"]
    detail = (
        f"a = {fit.a:.3g}, b = {fit.b:.3g}, {test.describe()}; "
        f"jackknife se {interval.se:.3g} over {interval.seeds} seeds"
    )
    stat = Statistic(name, interval.value, interval.ci_low, interval.ci_high, level, detail)
    if test.misfit:
        return Verdict.INCONCLUSIVE, [stat], [f"{label}: misfit, material and significant ({detail})"]
    verdict = verdict_at_most(stat, BOUNDS[regime])
    reason = [] if verdict is not Verdict.INCONCLUSIVE else [f"{label}: CI of r straddles {BOUNDS[regime]}"]
    return verdict, [stat], reason


def doublings(window: list[int]) -> list[int]:
    """The m of ``window`` whose double is in it too: part 2's differences D(m) = G_cv(m) - G_cv(2m)."""
    return [m for m in window if 2 * m in window]


def differences(data: Series, arm: str, regime: str, n: int, window: list[int]) -> np.ndarray:
    """(seeds, len(doublings(window))) per-seed D(m) = G_cv(m) - G_cv(2m)."""
    return np.column_stack(
        [
            data.values((arm, regime, n, m), "gap_cv") - data.values((arm, regime, n, 2 * m), "gap_cv")
            for m in doublings(window)
        ]
    )


def difference_part(
    data: Series, arm: str, regime: str, n: int, window: list[int], level: float
) -> tuple[Verdict, list[Statistic], list[str]]:
    """Part 2 (module docstring): the rate in m of the differences D(m) = G_cv(m) - G_cv(2m) on the window."""
    label = f"{arm} {REGIME_LABELS[regime]}"
    x = doublings(window)
    if len(x) < MIN_DIFFERENCES:
        return (
            Verdict.INCONCLUSIVE,
            [],
            [
                f"{label}: {len(x)} doublings (m, 2m) in the window {window} (< {MIN_DIFFERENCES}): too few points"
            ],
        )
    name = f"{arm}: r of D(m) = G(m) - G(2m) (offset-free), {REGIME_LABELS[regime]}, n = {n}, m = {x}"
    return difference_rate_part(x, differences(data, arm, regime, n, window), level, name, BOUNDS[regime])


def difference_rate_part(
    x: list[int], values: np.ndarray, level: float, name: str, bound: float
) -> tuple[Verdict, list[Statistic], list[str]]:
    """The upper-bound rule on the rate of the seed means of ``values`` (seeds, len(x)) in x
    (:func:`crl.stats.seed_rate`: power law, misfit protocol, jackknife Student-t)."""
    try:
        fit = seed_rate(x, values, level)
    except (NonPositiveMeanError, FewSeedsError) as error:
        return Verdict.INCONCLUSIVE, [], [f"{name}: {error}"]
    stat = Statistic.from_rate(name, fit)
    if fit.misfit:
        return Verdict.INCONCLUSIVE, [stat], [f"{name}: misfit, material and significant ({fit.describe()})"]
    verdict = verdict_at_most(stat, bound)
    reason = [] if verdict is not Verdict.INCONCLUSIVE else [f"{name}: CI of r straddles {bound}"]
    return verdict, [stat], reason


def ratio_part(
    data: Series, arm: str, n: int, window: list[int], level: float
) -> tuple[Verdict, list[Statistic], list[str]]:
    """Part 3: at each m of both windows the CI of log(|G| SSCRL / |G| SCRL) against 0 (Bonferroni over m)."""
    if not window:
        return (
            Verdict.INCONCLUSIVE,
            [],
            [f"{arm}: no m <= n/{RATIO_SHARE} in both windows for the SSCRL/SCRL ratio"],
        )
    each = 1.0 - (1.0 - level) / len(window)
    verdicts, stats = [], []
    for m in window:
        pair = np.stack(
            [data.values((arm, "shared", n, m), "gap_cv"), data.values((arm, "independent", n, m), "gap_cv")],
            axis=1,
        )
        interval = jackknife_t(lambda means: _log_ratio(means), pair, each)
        stat = Statistic(
            f"{arm}: log(|G| SSCRL / |G| SCRL) at m = {m}, n = {n}",
            interval.value,
            interval.ci_low,
            interval.ci_high,
            each,
            f"ratio {math.exp(interval.value):.3g}; jackknife se {interval.se:.3g}",
        )
        verdicts.append(verdict_above(stat, 0.0))
        stats.append(stat)
    verdict = combine_verdicts(*verdicts)
    reason = [] if verdict is not Verdict.INCONCLUSIVE else [f"{arm}: a ratio CI contains 1"]
    return verdict, stats, reason


def _log_ratio(means: np.ndarray) -> float:
    """``log(|mean SSCRL| / |mean SCRL|)``; -inf/inf guarded by the caller's finite data (G_cv != 0)."""
    return math.log(abs(means[0])) - math.log(abs(means[1]))


def floor_free_gap(data: "Series", key: tuple[str, str, int, int]) -> np.ndarray:
    """(seeds,) G - b*_m = (L(s_hat) - L*) + (L_hat(s*) - L_hat(s_hat)) = G - star_gap: the gap without the
    fixed-s* inner bias of the sample, >= 0 up to the Monte-Carlo error of L(s_hat) - L*."""
    return data.values(key, "gap") - data.values(key, "star_gap")


def leftover_floor(data: "Series", key: tuple[str, str, int, int]) -> tuple[float, float]:
    """b*_m = L* - E L_hat_m(s*) at one point, measured with fresh negatives (G_cv - G + star_gap), as a mean
    over seeds with its standard error."""
    floor = data.values(key, "gap_cv") - data.values(key, "gap") + data.values(key, "star_gap")
    return float(floor.mean()), float(floor.std(ddof=1) / math.sqrt(floor.size))


def excess_risk(data: "Series", key: tuple[str, str, int, int]) -> np.ndarray:
    """(seeds,) L(s_hat) - L* at one point."""
    return data.values(key, "excess_risk")


N_QUANTITIES = (("G - b*_m", floor_free_gap), ("L(s_hat) - L*", excess_risk))
"""Parts 4 and 5: the floor-free gap and the excess risk, each judged end to end in n."""


@dataclass(frozen=True)
class NSeries:
    """Which cells an n series reads: the arm and regime, and the label its statistics carry."""

    arm: str
    regime: str
    label: str


CLAIM_N_SERIES = NSeries("claim", "independent", "SCRL")
SHARED_CONTROL = NSeries("shared-control", "shared", "control: SSCRL, one shared set")


def n_parts(
    data: Series, grid: tuple[int, ...], m: int, level: float, *, series: NSeries = CLAIM_N_SERIES
) -> tuple[list[Verdict], list[Statistic], list[str]]:
    """Parts 4 and 5: secant slopes in n of the floor-free gap and of the excess risk (SCRL, fixed m); with
    ``series=SHARED_CONTROL`` the same rule on the n-parts' control."""
    arm, regime = series.arm, series.regime
    usable = [n for n in grid if all(r["status"] == "ok" for r in data.groups[(arm, regime, n, m)])]
    verdicts, stats, reasons = [], [], []
    for label, quantity in N_QUANTITIES:
        if len(usable) < 2 or usable[0] != grid[0] or usable[-1] != grid[-1]:
            verdicts.append(Verdict.INCONCLUSIVE)
            reasons.append(
                f"{series.label}: rate of {label} in n: a window end has failed fits (usable n = {usable})"
            )
            continue
        seeds = np.column_stack([quantity(data, (arm, regime, n, m)) for n in usable])
        try:
            rate = secant_rate(usable, seeds, level)
        except NonPositiveMeanError as error:
            verdicts.append(Verdict.INCONCLUSIVE)
            reasons.append(f"{series.label}: rate of {label} in n: {error}")
            continue
        detail = rate.describe()
        if quantity is floor_free_gap:
            floor, floor_se = leftover_floor(data, (arm, regime, usable[-1], m))
            detail += f"; leftover floor b*_m at n = {usable[-1]}: {floor:.3g} (se {floor_se:.2g})"
        stat = Statistic(
            f"secant slope of {label} in n ({series.label}, m = {m}), n = {usable[0]}..{usable[-1]}",
            rate.exponent,
            rate.ci_low,
            rate.ci_high,
            level,
            detail,
        )
        verdict = verdict_at_most(stat, N_BOUND)
        verdicts.append(verdict)
        stats.append(stat)
        if verdict is Verdict.INCONCLUSIVE:
            reasons.append(f"{series.label}: rate of {label} in n: CI straddles {N_BOUND}")
    return verdicts, stats, reasons


def _figure(data: Series, n: int, grid: tuple[int, ...]) -> FigureSpec:
    """|G| (seed mean of G_cv, bars 1 se) against m at n pairs, both regimes, claim and control."""
    series = []
    for arm in ("claim", "control"):
        for regime in ("independent", "shared"):
            keys = [(arm, regime, n, m) for m in grid]
            keys = [k for k in keys if k in data.groups and all(r["status"] == "ok" for r in data.groups[k])]
            if not keys:
                continue
            values = [data.values(k, "gap_cv") for k in keys]
            series.append(
                points(
                    f"{arm} {REGIME_LABELS[regime]} (n = {n})",
                    [k[3] for k in keys],
                    [abs(float(v.mean())) for v in values],
                    y_err=[float(v.std(ddof=1) / math.sqrt(v.size)) for v in values],
                    control=arm == "control",
                )
            )
    return loglog_figure("gap_vs_m", "C5: gap of the ERM vs m", "m (negatives)", "|G| = |L - L_hat|", *series)


def _n_figure(data: Series, grid: tuple[int, ...], m: int) -> FigureSpec:
    """The floor-free gap G - b*_m and the excess risk against n (SCRL, fixed m), bars 1 se."""
    keys = [
        ("claim", "independent", n, m)
        for n in grid
        if all(r["status"] == "ok" for r in data.groups[("claim", "independent", n, m)])
    ]
    series = []
    for label, quantity in N_QUANTITIES:
        values = [quantity(data, k) for k in keys]
        series.append(
            points(
                f"{label} (SCRL, m = {m})",
                [k[2] for k in keys],
                [abs(float(v.mean())) for v in values],
                y_err=[float(v.std(ddof=1) / math.sqrt(v.size)) for v in values],
            )
        )
    return loglog_figure(
        "gap_vs_n",
        "C5: floor-free gap and excess risk vs n",
        "n (pairs)",
        "value",
        *series,
        theory_slope=-0.5,
    )


CLAIM = TrainedGap()
