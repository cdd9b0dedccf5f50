"""C1: Fisher consistency of [A]'s contrastive risk (Thm 3.1): a minimiser of L maximises the AUC E.

Part (a), random scores. For many scores s (random linear maps and random MLP features, random quadratic
scores, random score tables, and small perturbations of s*), in three models:

- ``VMFUniform(3, kappa=4)`` and ``GaussianTwoTower(4, rho=0.6)``: s is a FeatureScore, so log Z_s(x) and the law
  of s(x, y') under p- are closed forms; ``L(s) - L*`` (:func:`crl.metrics.risk.excess_risk`, paired with
  ``tau log r`` so that its variance vanishes at s*) and ``E* - E(s)`` (:func:`crl.metrics.risk.auc_gap`,
  paired with s*) are unbiased Monte-Carlo estimates with standard errors;
- ``DiscreteLatent([3, 4, 5], weights [0.5, 0.3, 0.2])``: random tables, everything exact by enumeration
  (:mod:`crl.metrics.risk.finite`; se = 0, rounding tolerance 1e-12).

Part (b), a family. Gaussian two-tower model, tau = 0.5, and the family
``s_c(x, y) = tau (rho <x, y> - c |y|^2/2)/(1 - rho^2)`` for c in {0, 0.12, ..., 0.96}; c = rho^2 = 0.36 is s*.
L(c) and E(c) are estimated on common draws (the same (x, y) for every c), so their differences are precise.

Negative control: a contrastive loss whose negatives come from the wrong law, q = N(0, 2.25 I) instead of
p- = N(0, I) (e.g. a mis-specified noise law, or negatives drawn from another population than the positives).
Its population minimiser is ``tau log(p+/q) + g(x)``, which ranks y by p+/q = (p+/p-)(p-/q), not by p+/p-; in the
family it is c_q = 1 - (1 - rho^2)/2.25 ~ 0.72, where E is clearly below E*. [A]'s Thm 3.1 does not cover it
(its negatives are not the law that defines E), so it is a genuine alternative that is *not* Fisher
consistent for E, and the family part of the rule must FAIL on it. (L_q(s_c) is integrated exactly under q by
passing ``negative_law`` to :func:`crl.metrics.risk.excess_risk`; the excess is taken relative to p-'s L*, a
constant that does not move the argmin.)
"""

import math
from typing import Any, ClassVar

import numpy as np
import torch

from crl.claims._random_scores import GAUSS_DIM, RHO, TAU, make_model, random_feature_score, random_table
from crl.claims.base import (
    Claim,
    ClaimContext,
    ClaimResult,
    Fidelity,
    FigureSpec,
    Statistic,
    Verdict,
    bound_figure,
    combine_verdicts,
    curve,
    points,
    verdict_no_violations,
)
from crl.metrics.risk import (
    FeatureScore,
    IsotropicGaussian,
    auc_gap,
    excess_risk_terms,
    feature_log_partition,
    feature_score_cdf,
    finite_auc,
    finite_law_of,
    finite_optimal_auc,
    finite_optimal_risk,
    finite_population_risk,
    negative_law_of,
)
from crl.metrics.risk.exact import NegativeLaw
from crl.stats import bound_violations
from crl.sweep import Cell
from crl.synthetic import DiscreteLatent, GaussianTwoTower

WRONG_VARIANCE = 2.25
FAMILY_GRID = tuple(round(0.12 * k, 2) for k in range(9))
FAMILY_Z = 3.0
"""Part (b) passes when ``max_c E(c) - E(c_L)`` is at most this many (paired) standard errors."""
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
    n = int(params["n_anchors"])
    x, y = truth.sample(n, generator)
    negative_law = negative_law_of(truth)
    assert negative_law is not None
    terms = excess_risk_terms(score, truth, x, y, feature_log_partition(score, negative_law, x, TAU), tau=TAU)
    gap = auc_gap(score, truth, generator=generator, n_anchors=n)
    return {
        "excess": float(terms.mean()),
        "excess_se": float(terms.std() / math.sqrt(n)),
        "gap": gap.mean,
        "gap_se": gap.se,
    }


def _exact_table_cell(truth: DiscreteLatent, index: int, generator: torch.Generator) -> dict[str, Any]:
    """A random score table of the discrete model: excess risk and AUC gap by exact enumeration (se = 0)."""
    law = finite_law_of(truth)
    table = random_table(law, index, generator)
    excess = finite_population_risk(law, table, TAU) - finite_optimal_risk(law, TAU)
    gap = finite_optimal_auc(law) - finite_auc(law, table)
    return {"excess": excess, "excess_se": 0.0, "gap": gap, "gap_se": 0.0}


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
    """Curves with se, the L-minimiser, and the paired gap ``max_c E(c) - E(c_L)`` with its se."""
    n = risks.shape[1]
    risk_mean, auc_mean = risks.mean(dim=1), aucs.mean(dim=1)
    best_l = int(torch.argmin(risk_mean))
    diffs = aucs - aucs[best_l]
    best_e = int(torch.argmax(diffs.mean(dim=1)))
    return {
        "risk": risk_mean.tolist(),
        "risk_se": (risks.std(dim=1) / math.sqrt(n)).tolist(),
        "auc": auc_mean.tolist(),
        "auc_se": (aucs.std(dim=1) / math.sqrt(n)).tolist(),
        "argmin_risk": FAMILY_GRID[best_l],
        "argmax_auc": FAMILY_GRID[best_e],
        "auc_shortfall": float(diffs[best_e].mean()),
        "auc_shortfall_se": float(diffs[best_e].std() / math.sqrt(n)),
    }


def family_verdict(summary: dict[str, Any]) -> Verdict:
    """PASS iff ``max_c E(c) - E(argmin_c L)`` is at most FAMILY_Z paired standard errors (0 when they agree)."""
    return (
        Verdict.PASS if summary["auc_shortfall"] <= FAMILY_Z * summary["auc_shortfall_se"] else Verdict.FAIL
    )


def _shortfall_statistic(name: str, summary: dict[str, Any]) -> Statistic:
    """``max_c E(c) - E(c_L)`` with its normal 95% interval."""
    value, se = summary["auc_shortfall"], summary["auc_shortfall_se"]
    detail = f"argmin L at c = {summary['argmin_risk']}, argmax E at c = {summary['argmax_auc']}; paired se {se:.3g}"
    return Statistic(name, value, value - 1.96 * se, value + 1.96 * se, 0.95, detail)


class FisherConsistency(Claim):
    """C1 (module docstring): excess risk and AUC gap are >= 0; the family's argmin of L maximises E."""

    id: ClassVar[str] = "C1"
    title: ClassVar[str] = "Fisher consistency"
    source: ClassVar[str] = "[A] Thm 3.1"
    statement: ClassVar[str] = (
        "L(s) >= L* and E(s) <= E* for every score, with L* attained by s* = tau log(p+/p-) + g(x); a minimiser "
        "of the population contrastive risk L maximises the retrieval AUC E (argmin L = argmax E)."
    )
    rule: ClassVar[str] = (
        "docs/theory.md section 7, C1: "
        "zero violations beyond MC error of L(s) - L* >= 0 and of E* - E(s) >= 0 over random s, and "
        "argmin L = argmax E within a family. Fixed by crl: (a) 3 models x 20/60/200 random scores "
        "(quick/standard/full); a violation is an estimate below 0 by more than k se + 1e-12, k the Bonferroni "
        "multiple for the claim's family-wise level over all scores (crl.stats.bound_violations); (b) Gaussian "
        "two-tower (d=4, rho=0.6, tau=0.5), s_c = tau (rho<x,y> - c|y|^2/2)/(1-rho^2), c in {0, 0.12, ..., 0.96}: "
        "PASS iff max_c E(c) - E(argmin_c L(c)) <= 3 paired se. All three parts must PASS."
    )
    control_description: ClassVar[str] = (
        "A contrastive loss with negatives from the wrong law q = N(0, 2.25 I) (not p- = N(0, I)): its minimiser "
        "ranks by p+/q, not p+/p-, so it is not Fisher consistent for E. Part (b) of the rule on this loss must "
        "FAIL (its argmin c ~ 0.72 has an E clearly below the family's maximum at c = 0.36)."
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
        excess = np.array([r["excess"] for r in rows])
        gaps = np.array([r["gap"] for r in rows])
        excess_count = bound_violations(
            -excess, np.zeros_like(excess), [r["excess_se"] for r in rows], atol=ROUNDING, alpha=1 - ctx.level
        )
        gap_count = bound_violations(
            -gaps, np.zeros_like(gaps), [r["gap_se"] for r in rows], atol=ROUNDING, alpha=1 - ctx.level
        )
        claim_family, control_family = family["claim"], family["control"]
        verdict = combine_verdicts(
            verdict_no_violations(excess_count),
            verdict_no_violations(gap_count),
            family_verdict(claim_family),
        )
        table = rows + [_family_rows(arm, family[arm]) for arm in ("claim", "control")]
        return self.result(
            ctx,
            verdict=verdict,
            statistics=[
                Statistic.from_violations("violations of L(s) - L* >= 0", excess_count),
                Statistic.from_violations("violations of E* - E(s) >= 0", gap_count),
                _shortfall_statistic("family: max_c E(c) - E(argmin L)", claim_family),
            ],
            control_verdict=family_verdict(control_family),
            control_statistics=[
                _shortfall_statistic("wrong-law loss: max_c E(c) - E(argmin L_q)", control_family)
            ],
            figures=[_scatter(rows), _family_figure(family)],
            table=table,
            notes=(
                f"{len(rows)} random scores; smallest excess {excess.min():.3g}, smallest AUC gap {gaps.min():.3g}. "
                f"Family: argmin L at c = {claim_family['argmin_risk']}, argmax E at c = {claim_family['argmax_auc']}; "
                f"wrong-law loss argmin at c = {control_family['argmin_risk']}."
            ),
        )


def _family_rows(arm: str, summary: dict[str, Any]) -> dict[str, Any]:
    """One tidy row per arm of part (b): the curves as lists and the decision numbers."""
    return {"part": "b", "arm": arm, "c": list(FAMILY_GRID), **summary}


def _scatter(rows: list[dict[str, Any]]) -> FigureSpec:
    """E* - E(s) against L(s) - L* for the random scores of part (a), per model, with the axes' zero lines."""
    series = []
    for name in MODELS:
        sub = [r for r in rows if r["model"] == name]
        series.append(
            points(
                name,
                [r["excess"] for r in sub],
                [r["gap"] for r in sub],
                y_err=[1.96 * r["gap_se"] for r in sub],
            )
        )
    top = max(r["excess"] for r in rows)
    return bound_figure(
        "random_scores",
        "C1(a): excess risk and AUC gap of random scores (both must be >= 0)",
        "L(s) - L*",
        "E* - E(s)",
        *series,
        bound=curve("zero", [0.0, top], [0.0, 0.0]),
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
