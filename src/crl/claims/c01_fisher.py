"""C1: Fisher consistency of [A]'s contrastive risk (Thm 3.1): a minimiser of L maximises the AUC E.

Part (a), random scores. For many scores s (random linear maps and random MLP features, random quadratic
scores, random score tables, and small perturbations of s*), in three models:

- ``VMFUniform(3, kappa=4)`` and ``GaussianTwoTower(4, rho=0.6)``: s is a FeatureScore, so log Z_s(x) and the law
  of s(x, y') under p- are closed forms; ``L(s) - L*`` (:func:`crl.risk.excess_risk`, paired with
  ``tau log r`` so that its variance vanishes at s*) and ``E* - E(s)`` (:func:`crl.risk.auc_gap`,
  paired with s*) are unbiased Monte-Carlo estimates with standard errors;
- ``DiscreteLatent([3, 4, 5], weights [0.5, 0.3, 0.2])``: random tables, everything exact by enumeration
  (:mod:`crl.risk.finite`; se = 0, rounding tolerance 1e-12).

Part (b), a family. Gaussian two-tower model, tau = 0.5, and the family
``s_c(x, y) = tau (rho <x, y> - c |y|^2/2)/(1 - rho^2)`` for c in {0, 0.12, ..., 0.96}; c = rho^2 = 0.36 is s*.
L(c) and E(c) are estimated on common draws (the same (x, y) for every c), so their differences are precise.
With ``c_L = argmin_c L(c)``, the claim argmin L = argmax E says ``E(c) - E(c_L) <= 0`` for the 8 other c: a
violation count like part (a)'s, with the paired se of each difference.

Three parts, each judged at the per-part level ``ctx.level`` (docs/theory.md section 7): the two counts of part
(a) and the count of part (b); the control is judged at the same level. C1 is a theorem for every s, so the
verdict tests crl's estimators (``excess_risk_terms``, ``auc_gap``, the finite enumerations), not [A].

Negative control: a contrastive loss whose negatives come from the wrong law, q = N(0, 2.25 I) instead of
p- = N(0, I) (e.g. a mis-specified noise law, or negatives drawn from another population than the positives).
Its population minimiser is ``tau log(p+/q) + g(x)``, which ranks y by p+/q = (p+/p-)(p-/q), not by p+/p-; in the
family it is c_q = 1 - (1 - rho^2)/2.25 ~ 0.72, where E is clearly below E*. [A]'s Thm 3.1 does not cover it
(its negatives are not the law that defines E), so it is a genuine alternative that is *not* Fisher
consistent for E, and the family part of the rule must FAIL on it. (L_q(s_c) is integrated exactly under q by
passing ``negative_law`` to :func:`crl.risk.excess_risk`; the excess is taken relative to p-'s L*, a
constant that does not move the argmin.) Its part (b) count must be non-zero.
"""

import math
from typing import Any, ClassVar

import numpy as np
import torch
from scipy import stats as scipy_stats

from crl._vocab import Estimate
from crl.claims._random_scores import (
    GAUSS_DIM,
    RHO,
    TAU,
    feature_point,
    finite_point,
    make_model,
    random_feature_score,
    random_table,
)
from crl.claims.base import (
    Claim,
    ClaimContext,
    ClaimResult,
    Fidelity,
    FigureSpec,
    Statistic,
    bound_figure,
    combine_verdicts,
    curve,
    points,
    verdict_no_violations,
)
from crl.risk import (
    FeatureScore,
    IsotropicGaussian,
    excess_risk_terms,
    feature_log_partition,
    feature_score_cdf,
    finite_law_of,
)
from crl.risk.exact import NegativeLaw
from crl.stats import ViolationCount, bound_violations
from crl.sweep import Cell
from crl.synthetic import DiscreteLatent, GaussianTwoTower

WRONG_VARIANCE = 2.25
FAMILY_GRID = tuple(round(0.12 * k, 2) for k in range(9))
ROUNDING = 1e-12
"""Tolerance for exactly computed (se = 0) quantities."""

SCORES_PER_MODEL = {Fidelity.QUICK: 20, Fidelity.STANDARD: 60, Fidelity.FULL: 200}
N_ANCHORS = {Fidelity.QUICK: 20_000, Fidelity.STANDARD: 100_000, Fidelity.FULL: 400_000}
MODELS = ("vmf", "gaussian", "discrete")


def random_score_cell(cell: Cell) -> dict[str, Any]:
    """Part (a): one random score of one model: ``L(s) - L*`` and ``E* - E(s)`` with standard errors."""
    params = cell.params
    generator = torch.Generator().manual_seed(cell.seed)
    name, index = str(params["model"]), int(params["index"])
    truth = make_model(name)
    if isinstance(truth, DiscreteLatent):
        return _exact_table_cell(truth, index, generator)
    score = random_feature_score(truth, index, generator)
    return feature_point(truth, score, TAU, int(params["n_anchors"]), generator)


def _exact_table_cell(truth: DiscreteLatent, index: int, generator: torch.Generator) -> dict[str, Any]:
    """A random score table of the discrete model: excess risk and AUC gap by exact enumeration (se = 0)."""
    law = finite_law_of(truth)
    return finite_point(law, random_table(law, index, generator), TAU)


def family_score(c: float) -> FeatureScore:
    """``s_c(x, y) = tau (rho <x, y> - c |y|^2/2)/(1 - rho^2)``; c = rho^2 is s*."""
    factor = TAU / (1.0 - RHO * RHO)
    return FeatureScore(lambda x: factor * RHO * x, curvature=factor * c)


def family_cell(cell: Cell) -> dict[str, Any]:
    """Part (b): L(c) (under p-, or under the wrong law q for the control) and E(c) on common draws."""
    params = cell.params
    generator = torch.Generator().manual_seed(cell.seed)
    truth = GaussianTwoTower(GAUSS_DIM, rho=RHO)
    x, y = truth.sample(int(params["n_anchors"]), generator)
    p_minus = IsotropicGaussian(GAUSS_DIM, 1.0)
    loss_law: NegativeLaw = (
        p_minus if params["arm"] == "claim" else IsotropicGaussian(GAUSS_DIM, WRONG_VARIANCE)
    )
    risks, aucs = [], []
    for c in FAMILY_GRID:
        score = family_score(c)
        log_z = feature_log_partition(score, loss_law, x, TAU)
        risks.append(excess_risk_terms(score, truth, x, y, log_z, tau=TAU))
        aucs.append(feature_score_cdf(score, p_minus, x, score(x, y)))
    return _family_summary(torch.stack(risks), torch.stack(aucs))


def _family_summary(risks: torch.Tensor, aucs: torch.Tensor) -> dict[str, Any]:
    """Curves with se, the L-minimiser c_L, and the paired gains ``E(c) - E(c_L)`` with their se.

    ``risks`` and ``aucs`` are (len(FAMILY_GRID), n) per-draw terms on common draws; the gains' se are those of
    per-draw differences. ``auc_shortfall`` is the largest gain, ``max_c E(c) - E(c_L)`` (0 when c_L maximises E).
    """
    n = risks.shape[1]
    risk_mean, auc_mean = risks.mean(dim=1), aucs.mean(dim=1)
    best_l = int(torch.argmin(risk_mean))
    diffs = aucs - aucs[best_l]
    gains, gains_se = diffs.mean(dim=1), diffs.std(dim=1) / math.sqrt(n)
    best_e = int(torch.argmax(gains))
    return {
        "risk": risk_mean.tolist(),
        "risk_se": (risks.std(dim=1) / math.sqrt(n)).tolist(),
        "auc": auc_mean.tolist(),
        "auc_se": (aucs.std(dim=1) / math.sqrt(n)).tolist(),
        "argmin_risk": FAMILY_GRID[best_l],
        "argmax_auc": FAMILY_GRID[best_e],
        "auc_gain": gains.tolist(),
        "auc_gain_se": gains_se.tolist(),
        "auc_shortfall": float(gains[best_e]),
        "auc_shortfall_se": float(gains_se[best_e]),
        "n": n,
    }


def family_violations(summary: dict[str, Any], level: float) -> ViolationCount:
    """Part (b): the c != c_L whose ``E(c) - E(c_L)`` exceeds 0 by more than k paired se + 1e-12.

    k is the Bonferroni multiple for ``alpha = 1 - level`` over the len(FAMILY_GRID) - 1 comparisons
    (:func:`crl.stats.bound_violations`), so a true claim shows a violation with probability <= 1 - level.
    """
    best_l = FAMILY_GRID.index(summary["argmin_risk"])
    others = [i for i in range(len(FAMILY_GRID)) if i != best_l]
    gains = np.array(summary["auc_gain"])[others]
    se = np.array(summary["auc_gain_se"])[others]
    return bound_violations(gains, np.zeros_like(gains), se, atol=ROUNDING, alpha=1 - level, ci=level)


def _shortfall_statistic(name: str, summary: dict[str, Any], level: float) -> Statistic:
    """``max_c E(c) - E(c_L)`` with its normal interval at ``level`` (reported beside part (b)'s count)."""
    estimate = Estimate(summary["auc_shortfall"], summary["auc_shortfall_se"], int(summary["n"]))
    low, high = estimate.normal_ci(level)
    detail = (
        f"argmin L at c = {summary['argmin_risk']}, argmax E at c = {summary['argmax_auc']}; "
        f"paired se {estimate.se:.3g}; reported, not judged"
    )
    return Statistic(name, estimate.mean, low, high, level, detail)


class FisherConsistency(Claim):
    """C1 (module docstring): excess risk and AUC gap are >= 0; the family's argmin of L maximises E."""

    id: ClassVar[str] = "C1"
    title: ClassVar[str] = "Fisher consistency"
    source: ClassVar[str] = "[A] Thm 3.1"
    evidence: ClassVar[str] = "crl's estimators (C1 is a theorem of [A] for every s)"
    parts: ClassVar[int] = 3
    statement: ClassVar[str] = (
        "L(s) >= L* and E(s) <= E* for every score, with L* attained by s* = tau log(p+/p-) + g(x); a minimiser "
        "of the population contrastive risk L maximises the retrieval AUC E (argmin L = argmax E)."
    )
    rule: ClassVar[str] = (
        "docs/theory.md section 7, C1: "
        "zero violations beyond MC error of L(s) - L* >= 0 and of E* - E(s) >= 0 over random s, and "
        "argmin L = argmax E within a family. Fixed by crl: three violation counts, each at the per-part level. "
        "(a1), (a2): 3 models x 20/60/200 random scores (quick/standard/full); a violation is an estimate of "
        "L(s) - L* (a1) or of E* - E(s) (a2) below 0 by more than k se + 1e-12, k the Bonferroni multiple at the "
        "part's level over the scores (crl.stats.bound_violations). (b) Gaussian two-tower (d=4, rho=0.6, "
        "tau=0.5), s_c = tau (rho<x,y> - c|y|^2/2)/(1-rho^2), c in {0, 0.12, ..., 0.96}, L and E on common "
        "draws, c_L = argmin_c L(c); a violation is E(c) - E(c_L) > k paired se + 1e-12 for a c != c_L, k the "
        "Bonferroni multiple at the part's level over the 8 other c. PASS iff all three counts are zero."
    )
    control_description: ClassVar[str] = (
        "A contrastive loss with negatives from the wrong law q = N(0, 2.25 I) (not p- = N(0, I)): its minimiser "
        "ranks by p+/q, not p+/p-, so it is not Fisher consistent for E. Part (b) of the rule on this loss, at "
        "the same per-part level, must FAIL (its argmin c ~ 0.72 has an E clearly below E at c = 0.36)."
    )

    def run(self, ctx: ClaimContext) -> ClaimResult:
        """Part (a) over random scores, part (b) over the family for the claim and the control."""
        n_anchors = N_ANCHORS[ctx.fidelity]
        random_cells = [
            Cell(
                {"part": "a", "model": name, "index": i, "n_anchors": n_anchors},
                ctx.seed_for("a", name, i, n_anchors),
            )
            for name in MODELS
            for i in range(SCORES_PER_MODEL[ctx.fidelity])
        ]
        family_cells = [
            Cell({"part": "b", "arm": arm, "n_anchors": n_anchors}, ctx.seed_for("b", n_anchors))
            for arm in ("claim", "control")
        ]
        rows = [{**r.cell.params, **r.result} for r in ctx.run_cells(random_cells, random_score_cell)]
        family = {str(r.cell.params["arm"]): r.result for r in ctx.run_cells(family_cells, family_cell)}
        excess_count = _sign_violations(rows, "excess", ctx.level)
        gap_count = _sign_violations(rows, "gap", ctx.level)
        claim_family, control_family = family["claim"], family["control"]
        family_count = family_violations(claim_family, ctx.level)
        control_count = family_violations(control_family, ctx.level)
        return self.result(
            ctx,
            verdict=combine_verdicts(
                *(verdict_no_violations(c) for c in (excess_count, gap_count, family_count))
            ),
            statistics=[
                Statistic.from_violations("(a1) violations of L(s) - L* >= 0", excess_count),
                Statistic.from_violations("(a2) violations of E* - E(s) >= 0", gap_count),
                Statistic.from_violations("(b) violations of E(c) <= E(argmin L)", family_count),
                _shortfall_statistic("family: max_c E(c) - E(argmin L)", claim_family, ctx.level),
            ],
            control_verdict=verdict_no_violations(control_count),
            control_statistics=[
                Statistic.from_violations(
                    "wrong-law loss: violations of E(c) <= E(argmin L_q)", control_count
                ),
                _shortfall_statistic("wrong-law loss: max_c E(c) - E(argmin L_q)", control_family, ctx.level),
            ],
            figures=[_scatter(rows, ctx.level), _family_figure(family)],
            table=rows + [_family_rows(arm, family[arm]) for arm in ("claim", "control")],
            notes=_notes(rows, claim_family, control_family),
        )


def _sign_violations(rows: list[dict[str, Any]], key: str, level: float) -> ViolationCount:
    """Part (a): the scores whose estimate of ``key`` (excess risk or AUC gap) is below 0 beyond MC error."""
    values = np.array([r[key] for r in rows])
    se = [r[f"{key}_se"] for r in rows]
    return bound_violations(-values, np.zeros_like(values), se, atol=ROUNDING, alpha=1 - level, ci=level)


def _notes(rows: list[dict[str, Any]], claim: dict[str, Any], control: dict[str, Any]) -> str:
    """The smallest estimates of part (a) and the family's argmins, in words."""
    excess, gaps = min(r["excess"] for r in rows), min(r["gap"] for r in rows)
    return (
        f"{len(rows)} random scores; smallest excess {excess:.3g}, smallest AUC gap {gaps:.3g} (negative values "
        f"are Monte-Carlo error; exact tables have se = 0). Family: argmin L at c = {claim['argmin_risk']}, "
        f"argmax E at c = {claim['argmax_auc']}; wrong-law loss argmin at c = {control['argmin_risk']}. "
        "The checks are signs (bound 0), so they have no slack to report."
    )


def _family_rows(arm: str, summary: dict[str, Any]) -> dict[str, Any]:
    """One tidy row per arm of part (b): the curves as lists and the decision numbers."""
    return {"part": "b", "arm": arm, "c": list(FAMILY_GRID), **summary}


def _scatter(rows: list[dict[str, Any]], level: float) -> FigureSpec:
    """E* - E(s) against L(s) - L* for part (a), per model, bars at ``level``, on symlog axes (values near 0)."""
    z = float(scipy_stats.norm.ppf(0.5 + level / 2.0))
    series = []
    for name in MODELS:
        sub = [r for r in rows if r["model"] == name]
        series.append(
            points(
                name,
                [r["excess"] for r in sub],
                [r["gap"] for r in sub],
                y_err=[z * r["gap_se"] for r in sub],
            )
        )
    top = max(r["excess"] for r in rows)
    return bound_figure(
        "random_scores",
        f"C1(a): excess risk and AUC gap of random scores (both must be >= 0; bars at {level:.5g})",
        "L(s) - L*",
        "E* - E(s)",
        *series,
        bound=curve("zero", [0.0, top], [0.0, 0.0]),
        x_scale="symlog",
        y_scale="symlog",
    )


def _normalised(values: list[float], errors: list[float]) -> tuple[list[float], list[float]]:
    """``(v - min v)/(max v - min v)`` and the errors on the same scale: the curves' shapes on one axis."""
    low, high = min(values), max(values)
    span = high - low if high > low else 1.0
    return [(v - low) / span for v in values], [e / span for e in errors]


def _family_figure(family: dict[str, dict[str, Any]]) -> FigureSpec:
    """Part (b): L(c) under p-, L_q(c) under q, and max E - E(c), each rescaled to [0, 1], against c."""
    claim, control = family["claim"], family["control"]
    top = max(claim["auc"])
    series = []
    for label, values, errors in (
        ("L(c), negatives ~ p-", claim["risk"], claim["risk_se"]),
        ("control: L_q(c), negatives ~ q", control["risk"], control["risk_se"]),
        ("max E - E(c)", [top - a for a in claim["auc"]], claim["auc_se"]),
    ):
        y, err = _normalised(values, errors)
        series.append(points(label, FAMILY_GRID, y, y_err=err))
    return FigureSpec(
        "family",
        "C1(b): s_c = tau(rho<x,y> - c|y|^2/2)/(1-rho^2); argmin L vs argmax E",
        "c (s* at c = rho^2 = 0.36)",
        "rescaled to [0, 1] (min at 0)",
        tuple(series),
        log_x=False,
        log_y=False,
    )


CLAIM = FisherConsistency()
