"""C4: with shared negatives (SSCRL) the empirical risk fluctuates like 1/sqrt(m); with SCRL it does not ([A] Thm 4.6).

Experiment. Model ``AsymmetricSphere(d=3, kappa=1, anchor_kappa=10, negative_law="marginal")`` (anchors
concentrated around e, negatives = other positives, [A]'s convention), tau = 0.5, fixed score
``s(x, y) = 0.25 <x, y>``. For each m in {16, 32, 64, 128, 256} the sd over independent data sets (n pairs and
their negatives, all redrawn) of the empirical risk ``L_hat_m(s)`` (GCL through :mod:`crl.objectives`):

- SSCRL: one draw of m negatives shared by all n anchors, R replicate data sets
  (:func:`crl.metrics.risk.empirical_risk_draws`, regime "shared");
- SCRL: m fresh negatives per anchor. Its n per-anchor terms are i.i.d., so ``sd(L_hat_m) = sd(term)/sqrt(n)``
  exactly; the sd is computed from N i.i.d. terms (:func:`crl.metrics.risk.empirical_risk_per_anchor`, regime
  "independent") instead of from n x R terms, the same quantity at a fraction of the cost.

Why these slopes (the design, fixed from the variance decomposition before any run of this claim). To first
order ``Var L_hat_SS = A/n + C/m`` and ``Var L_hat_SC = A/n + B/(n m)`` with ``A = Var(tau log Z_s(x) - s(x, y))``
(anchors), ``B = tau^2 E_x Var_{y'}(W/Z_s(x))`` (negatives within an anchor) and
``C = tau^2 Var_{y'}(E_x[W(x, y')/Z_s(x)])`` (the part of the negatives' effect shared by all anchors),
``W = exp(s(x, y')/tau)``. A pilot simulation (tau = 1 units, multiply by tau^2) gave A = 0.069, B = 0.062,
C = 0.048 for this model and score. Over m in [16, 256]: SCRL's local slope ``-1/2 (B/m)/(A + B/m)`` is within
[-0.03, 0]: flat; SSCRL's ``-1/2 / (1 + (A/C)(m/n))`` is within [-0.5, -0.46] at n = 4096 (quick) and
[-0.5, -0.48] at n = 8192 (standard). Below m = 16 a second-order shared term O(1/m^2) (a degenerate
U-statistic of the shared negatives) would steepen the *control's* curve, so the grid starts at 16.

Rule: SSCRL's sd slope CI contains -1/2 (and is at most 0.5 wide), and SCRL is flat: its sd slope CI lies inside
[-0.15, 0.15] (point estimate outside: FAIL; estimate inside but CI not: INCONCLUSIVE). The sd slope is half the
slope of the variance, fitted by :func:`crl.stats.loglog_slope_from_replicates` to the replicates
``(L_r - Lbar)^2 R/(R-1)`` (whose mean is the unbiased variance); its CI is half the variance slope's CI.

Negative control (the pitfall of docs/theory.md section 6.1). The same rule with uniform anchors:
``VMFUniform(3, kappa=1)`` and the same rotation-invariant score. Then ``E_x W(x, y')/Z = 1`` for every y', so
C = 0: the 1/sqrt(m) shared fluctuation cancels and SSCRL is as flat as SCRL; the SSCRL part of the rule must
FAIL.
"""

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np
import torch

from crl.claims.base import (
    Claim,
    ClaimContext,
    ClaimResult,
    Fidelity,
    FigureSpec,
    Statistic,
    Verdict,
    bonferroni_level,
    combine_verdicts,
    loglog_figure,
    points,
    verdict_contains,
)
from crl.metrics.risk import FeatureScore, empirical_risk_draws, empirical_risk_per_anchor
from crl.stats import SlopeFit, loglog_slope_from_replicates
from crl.sweep import Cell
from crl.synthetic import AsymmetricSphere, VMFUniform
from crl.synthetic.base import GroundTruth

DIM = 3
TAU = 0.5
BETA = 0.25
KAPPA = 1.0
ANCHOR_KAPPA = 10.0
M_GRID = (16, 32, 64, 128, 256)
SHARED_SLOPE = -0.5
MAX_CI_WIDTH = 0.5
FLAT_BAND = 0.15
"""SCRL counts as flat when its sd slope CI lies inside [-FLAT_BAND, FLAT_BAND]."""

N_ANCHORS = {Fidelity.QUICK: 4096, Fidelity.STANDARD: 8192, Fidelity.FULL: 16384}
"""n, the pairs per data set."""
SHARED_CHUNKS = {Fidelity.QUICK: 2, Fidelity.STANDARD: 4, Fidelity.FULL: 8}
REPLICATES_PER_CHUNK = 50
"""R = chunks x 50 replicate data sets per m for SSCRL."""
INDEPENDENT_TERMS = {Fidelity.QUICK: 2000, Fidelity.STANDARD: 4000, Fidelity.FULL: 8000}
INDEPENDENT_CHUNKS = 2
"""N = 2 x terms i.i.d. per-anchor SCRL terms per m."""


def model(arm: str) -> GroundTruth:
    """The claim's model (non-uniform anchors) or the control's (uniform anchors: docs/theory.md 6.1's pitfall)."""
    if arm == "claim":
        return AsymmetricSphere(DIM, kappa=KAPPA, anchor_kappa=ANCHOR_KAPPA, negative_law="marginal")
    return VMFUniform(DIM, KAPPA)


def fixed_score() -> FeatureScore:
    """``s(x, y) = BETA <x, y>``: bounded and rotation invariant."""
    return FeatureScore(lambda x: BETA * x)


def fluctuation_cell(cell: Cell) -> dict[str, Any]:
    """Shared regime: R replicate values of L_hat_m. Independent regime: i.i.d. per-anchor terms."""
    params = cell.params
    generator = torch.Generator().manual_seed(cell.seed)
    truth, score, m = model(str(params["arm"])), fixed_score(), int(params["m"])
    if params["regime"] == "shared":
        values = empirical_risk_draws(
            score,
            truth,
            TAU,
            m,
            generator=generator,
            n_anchors=int(params["n"]),
            n_replicates=int(params["replicates"]),
            regime="shared",
        )
    else:
        values = empirical_risk_per_anchor(
            score, truth, TAU, m, generator=generator, n_anchors=int(params["terms"]), regime="independent"
        )
    return {"values": values.tolist()}


def _squared_deviations(values: np.ndarray, scale: float) -> np.ndarray:
    """``(v - mean)^2 N/(N-1) * scale``: replicates whose mean is the unbiased variance times ``scale``."""
    return np.square(values - values.mean()) * values.size / (values.size - 1) * scale


def _sd_fit(variance_fit: SlopeFit) -> SlopeFit:
    """The fit of ``log sd = log(var)/2``: slope, intercept and CI halved."""
    return dataclasses.replace(
        variance_fit,
        slope=variance_fit.slope / 2.0,
        intercept=variance_fit.intercept / 2.0,
        ci_low=variance_fit.ci_low / 2.0,
        ci_high=variance_fit.ci_high / 2.0,
        slope_se=variance_fit.slope_se / 2.0,
    )


def _flat_verdict(statistic: Statistic) -> Verdict:
    """PASS if the CI lies inside [-FLAT_BAND, FLAT_BAND]; FAIL if the estimate is outside; else INCONCLUSIVE."""
    if statistic.ci_low >= -FLAT_BAND and statistic.ci_high <= FLAT_BAND:
        return Verdict.PASS
    if abs(statistic.value) > FLAT_BAND:
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE


class SscrlFluctuation(Claim):
    """C4 (module docstring): sd of L_hat_m vs m for shared and independent negatives, and the uniform control."""

    id: ClassVar[str] = "C4"
    title: ClassVar[str] = "SSCRL shared-negative fluctuation O(1/sqrt m)"
    source: ClassVar[str] = "[A] Thm 4.6"
    statement: ClassVar[str] = (
        "With one set of m negatives shared by all anchors (SSCRL), the empirical risk of a fixed score "
        "fluctuates over draws by O(1/sqrt m) whatever n, while with independent negatives per anchor (SCRL) "
        "the negatives' fluctuation is averaged over anchors and the sd is flat in m (dominated by O(1/sqrt n))."
    )
    rule: ClassVar[str] = (
        "docs/theory.md section 7, C4: "
        "SSCRL slope CI contains -1/2; SCRL flat. Fixed by crl: AsymmetricSphere(3, kappa=1, "
        "anchor_kappa=10, negatives = positives' marginal), s = 0.25 <x,y>, tau = 0.5, m in {16, ..., 256}, "
        "n = 4096/8192/16384 (quick/standard/full), anchors and negatives redrawn per data set. CI (each of the "
        "two at half the claim's error rate, Bonferroni) of the "
        "slope of log sd(L_hat_m) vs log m (half the variance slope; replicate bootstrap, 2000 resamples, widened "
        "on misfit). SSCRL: PASS if the CI contains -0.5 and is at most 0.5 wide (INCONCLUSIVE if wider), else "
        "FAIL. SCRL flat: PASS if the CI lies inside [-0.15, 0.15], FAIL if the slope is outside it, else "
        "INCONCLUSIVE. Both parts must PASS."
    )
    control_description: ClassVar[str] = (
        "The pitfall of docs/theory.md section 6.1: the same rule with uniform anchors (VMFUniform(3, kappa=1)) "
        "and the same "
        "rotation-invariant score, where the shared 1/sqrt(m) fluctuation cancels exactly (E_x W(x,y')/Z = 1), "
        "so SSCRL is flat too and its part of the rule must FAIL."
    )

    def run(self, ctx: ClaimContext) -> ClaimResult:
        """Compute both regimes in both arms, fit the sd slopes and apply the rule to claim and control."""
        cells = self._cells(ctx)
        records = ctx.run_cells(cells, fluctuation_cell)
        pooled: dict[tuple[str, str, int], list[float]] = {}
        for record in records:
            p = record.cell.params
            pooled.setdefault((str(p["arm"]), str(p["regime"]), int(p["m"])), []).extend(
                record.result["values"]
            )
        n = N_ANCHORS[ctx.fidelity]
        table: list[dict[str, Any]] = []
        stats: dict[tuple[str, str], Statistic] = {}
        fits: dict[tuple[str, str], SlopeFit] = {}
        for arm in ("claim", "control"):
            for regime in ("shared", "independent"):
                scale = 1.0 if regime == "shared" else 1.0 / n
                replicates = [
                    _squared_deviations(np.asarray(pooled[(arm, regime, m)]), scale) for m in M_GRID
                ]
                fit = _sd_fit(
                    loglog_slope_from_replicates(
                        list(M_GRID),
                        replicates,
                        rng=ctx.rng("boot", arm, regime),
                        ci=bonferroni_level(2, ctx.level),
                    )
                )
                fits[(arm, regime)] = fit
                label = "SSCRL (shared)" if regime == "shared" else "SCRL (independent)"
                stats[(arm, regime)] = Statistic.from_slope(f"{arm}: slope of sd(L_hat_m) vs m, {label}", fit)
                table.extend(_rows(arm, regime, n, replicates))
        verdict, control = (
            combine_verdicts(
                verdict_contains(stats[(arm, "shared")], SHARED_SLOPE, max_width=MAX_CI_WIDTH),
                _flat_verdict(stats[(arm, "independent")]),
            )
            for arm in ("claim", "control")
        )
        return self.result(
            ctx,
            verdict=verdict,
            statistics=[stats[("claim", "shared")], stats[("claim", "independent")]],
            control_verdict=control,
            control_statistics=[stats[("control", "shared")], stats[("control", "independent")]],
            figures=[_figure(table, fits)],
            table=table,
            notes=(
                f"n = {n} pairs per data set. SSCRL: {SHARED_CHUNKS[ctx.fidelity] * REPLICATES_PER_CHUNK} "
                f"replicate data sets per m. SCRL: sd(L_hat_m) = sd(per-anchor term)/sqrt(n) from "
                f"{INDEPENDENT_CHUNKS * INDEPENDENT_TERMS[ctx.fidelity]} i.i.d. terms per m (exact identity: the "
                "terms of one SCRL data set are i.i.d.)."
            ),
        )

    @staticmethod
    def _cells(ctx: ClaimContext) -> list[Cell]:
        """One cell per (arm, regime, m, chunk), each with its own derived seed."""
        fid = ctx.fidelity
        cells = []
        for arm in ("claim", "control"):
            for m in M_GRID:
                for k in range(SHARED_CHUNKS[fid]):
                    params = {
                        "arm": arm,
                        "regime": "shared",
                        "m": m,
                        "chunk": k,
                        "n": N_ANCHORS[fid],
                        "replicates": REPLICATES_PER_CHUNK,
                    }
                    cells.append(Cell(params, ctx.seed_for(params)))
                for k in range(INDEPENDENT_CHUNKS):
                    params = {
                        "arm": arm,
                        "regime": "independent",
                        "m": m,
                        "chunk": k,
                        "terms": INDEPENDENT_TERMS[fid],
                    }
                    cells.append(Cell(params, ctx.seed_for(params)))
        return cells


def _rows(arm: str, regime: str, n: int, replicates: list[np.ndarray]) -> list[dict[str, Any]]:
    """Tidy rows: the sd of L_hat_m at each m with a delta-method standard error (se(var)/(2 sd))."""
    rows = []
    for m, sq in zip(M_GRID, replicates, strict=True):
        variance = float(sq.mean())
        sd = math.sqrt(variance)
        se_sd = float(sq.std(ddof=1) / math.sqrt(sq.size)) / (2.0 * sd)
        rows.append(
            {
                "arm": arm,
                "regime": regime,
                "m": m,
                "n": n,
                "draws": int(sq.size),
                "sd": sd,
                "sd_se": se_sd,
                "sqrt_m_times_sd": math.sqrt(m) * sd,
            }
        )
    return rows


def _figure(table: list[dict[str, Any]], fits: dict[tuple[str, str], SlopeFit]) -> FigureSpec:
    """Log-log figure of sd(L_hat_m) vs m: claim and control, SSCRL and SCRL, with the theory slope -1/2."""
    series = []
    for arm in ("claim", "control"):
        for regime in ("shared", "independent"):
            rows = [r for r in table if r["arm"] == arm and r["regime"] == regime]
            label = f"{arm}: {'SSCRL' if regime == 'shared' else 'SCRL'}"
            series.append(
                points(
                    label,
                    [r["m"] for r in rows],
                    [r["sd"] for r in rows],
                    y_err=[1.96 * r["sd_se"] for r in rows],
                    fit=fits[(arm, regime)],
                )
            )
    return loglog_figure(
        "sd_vs_m",
        "C4: sd of L_hat_m over data sets (claim: vMF anchors; control: uniform anchors)",
        "m (negatives)",
        "sd(L_hat_m)",
        *series,
        theory_slope=SHARED_SLOPE,
    )


CLAIM = SscrlFluctuation()
