"""One ERM fit on a synthetic truth and what crl's exact estimators say about it (C5's measurements).

For a truth with a closed-form negative law (``VMFUniform``: uniform sphere; ``GaussianTwoTower``: N(0, I)) and a
:class:`~crl.erm.lifted.LiftedFamily` containing s* (``ideal_parameters``):

- the sample: n pairs (x_i, y_i) and a fixed negative set, SCRL (n x m, each anchor its own) or SSCRL (m shared);
- the fit: :func:`crl.erm.convex.fit_ball` over the ball ``|theta| <= radius``;
- G = L(s_hat) - L_hat(s_hat) = (L(s_hat) - L*) + L* - L_hat(s_hat), with ``L(s_hat) - L*`` from
  :func:`crl.risk.excess_risk` (exact inner expectation, outer mean over ``n_eval`` fresh pairs, paired so
  its variance vanishes at s*) and L* from the truth's closed form;
- E* - E(s_hat) from :func:`crl.risk.auc_gap` (exact inner probability, paired with s*);
- the variance-reduced gap ``G_cv = (L(s_hat) - L*) + (L_hat(s*) - L_hat(s_hat)) + bias*_m``: G minus the fixed-s*
  gap of the same sample, ``L* - L_hat(s*)``, plus that gap's expectation ``bias*_m = L* - E L_hat_m(s*)`` (the same
  in both regimes: each anchor's m negatives are iid p- either way), estimated without bias from ``n_bias`` fresh
  draws by :func:`crl.risk.inner_gap_draws`. ``E G_cv = E G``; the fixed-s* fluctuation (O(1/sqrt n), and
  O(1/sqrt m) shared in SSCRL) is gone, so the seed mean resolves E G at a few seeds.
"""

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch

from crl._validate import check_count
from crl._vocab import Regime
from crl.erm.convex import KKT_TOLERANCE, BallFit, fit_ball
from crl.erm.lifted import EmpiricalRisk, LiftedFamily
from crl.risk import auc_gap, excess_risk, inner_gap_draws
from crl.synthetic import GaussianTwoTower, VMFUniform
from crl.synthetic.base import GroundTruth


def family_for(truth: GroundTruth, tau: float) -> LiftedFamily:
    """The realisable lifted family of a truth at temperature tau: bilinear + b^T y on the sphere, plus e|y|^2 for
    the Gaussian; for wide Gaussian positives (s*'s e > 0, heavy-tailed exp(s*/tau)) e is fixed at s*'s own e
    (:class:`~crl.erm.lifted.LiftedFamily`'s offset), so every member keeps s*'s tail index and a finite risk."""
    if isinstance(truth, VMFUniform):
        return LiftedFamily(truth.dim)
    if isinstance(truth, GaussianTwoTower):
        _, quadratic = truth.ideal_coefficients(tau)
        if quadratic > 0.0:
            return LiftedFamily(truth.dim, offset=quadratic)
        return LiftedFamily(truth.dim, quadratic=True)
    raise ValueError(
        f"truth={truth!r} has no lifted family with exact risks here; use VMFUniform or GaussianTwoTower."
    )


def ideal_parameters(truth: GroundTruth, tau: float) -> torch.Tensor:
    """theta* of s* in :func:`family_for`'s family (s* up to a g(x), which no risk sees).

    VMFUniform: ``W = tau kappa I``; GaussianTwoTower: ``W = w I`` and e (learned, or the family's fixed offset)
    from :meth:`~crl.synthetic.GaussianTwoTower.ideal_coefficients`.
    """
    family = family_for(truth, tau)
    eye = torch.eye(truth.dim, dtype=torch.float64)
    zero = torch.zeros(truth.dim, dtype=torch.float64)
    if isinstance(truth, VMFUniform):
        return family.parameters_of(tau * truth.kappa * eye, zero)
    assert isinstance(truth, GaussianTwoTower)
    weight, quadratic = truth.ideal_coefficients(tau)
    return family.parameters_of(weight * eye, zero, quadratic)


def sample_risk(
    truth: GroundTruth, n: int, m: int, tau: float, regime: Regime, generator: torch.Generator
) -> EmpiricalRisk:
    """L_hat of :func:`family_for`'s family on n pairs and a fixed negative set (SCRL n x m, SSCRL m shared)."""
    check_count("n", n, 1)
    check_count("m", m, 1)
    x, y = truth.sample(n, generator)
    shape = (n, m) if regime == "independent" else (m,)
    negatives = truth.sample_negatives(shape, generator)
    return EmpiricalRisk(family_for(truth, tau), x, y, negatives, tau, regime)


@dataclass(frozen=True)
class TrainedMetrics:
    """The measurements of one fitted s_hat (module docstring); ``None`` where the population risk is infinite.

    Attributes:
        empirical_risk: L_hat(s_hat).
        excess_risk: L(s_hat) - L* (Monte-Carlo outer mean), and excess_risk_se its standard error.
        gap: G = L(s_hat) - L_hat(s_hat) (se: excess_risk_se).
        gap_cv: the variance-reduced gap G_cv, and gap_cv_se its Monte-Carlo se (outer mean and bias*_m).
        star_gap: L* - L_hat(s*) on the same sample.
        auc_gap: E* - E(s_hat), and auc_gap_se its standard error.
    """

    empirical_risk: float
    excess_risk: float | None
    excess_risk_se: float | None
    gap: float | None
    gap_cv: float | None
    gap_cv_se: float | None
    star_gap: float
    auc_gap: float | None
    auc_gap_se: float | None


def trained_metrics(
    risk: EmpiricalRisk,
    fit: BallFit,
    truth: GroundTruth,
    *,
    generator: torch.Generator,
    n_eval: int = 1 << 15,
    n_bias: int = 1 << 14,
) -> TrainedMetrics:
    """G, G_cv, L(s_hat) - L* and E* - E(s_hat) of a fit (module docstring)."""
    tau = risk.tau
    optimal = truth.optimal_risk(tau)
    theta_star = ideal_parameters(truth, tau)
    star_gap = optimal - risk.value(theta_star)
    score = risk.family.score(fit.theta)
    try:
        excess = excess_risk(score, truth, tau, generator=generator, n_anchors=n_eval)
    except ValueError:
        return TrainedMetrics(fit.risk, None, None, None, None, None, star_gap, None, None)
    bias = inner_gap_draws(
        risk.family.score(theta_star), truth, tau, risk.m, generator=generator, n_draws=n_bias
    ).estimate
    bias_mean = float(bias.mean())
    bias_se = float(bias.std()) / math.sqrt(bias.numel())
    accuracy = auc_gap(score, truth, generator=generator, n_anchors=n_eval)
    return TrainedMetrics(
        empirical_risk=fit.risk,
        excess_risk=excess.mean,
        excess_risk_se=excess.se,
        gap=excess.mean + optimal - fit.risk,
        gap_cv=excess.mean + (optimal - star_gap - fit.risk) + bias_mean,
        gap_cv_se=math.hypot(excess.se, bias_se),
        star_gap=star_gap,
        auc_gap=accuracy.mean,
        auc_gap_se=accuracy.se,
    )


@dataclass(frozen=True)
class ErmRecord:
    """One ERM cell: the fit's status and, where the fit converged, its measurements.

    Attributes:
        status: "ok", "not converged" or "infinite risk" (E exp(s_hat/tau) infinite under p-).
        converged, active, kkt_residual, tolerance, norm, radius, multiplier, iterations, reason: the fit's
            :class:`crl.erm.convex.BallFit` status (reason: why it did not converge, or why the risk is infinite).
        metrics: the measurements; None when the fit did not converge (a counted cell, never dropped).
    """

    status: str
    converged: bool
    active: bool
    kkt_residual: float
    tolerance: float
    norm: float
    radius: float
    multiplier: float
    iterations: int
    reason: str
    metrics: TrainedMetrics | None

    def to_dict(self) -> dict[str, Any]:
        """The flat JSON dict a sweep cell stores: the status fields, then every :class:`TrainedMetrics` field
        (None without measurements)."""
        status = {name: getattr(self, name) for name in _FIT_FIELDS}
        measured = (
            asdict(self.metrics)
            if self.metrics is not None
            else dict.fromkeys(TrainedMetrics.__dataclass_fields__)
        )
        return {**status, "status": self.status, **measured}


_FIT_FIELDS = (
    "converged",
    "active",
    "kkt_residual",
    "tolerance",
    "norm",
    "radius",
    "multiplier",
    "iterations",
    "reason",
)


def erm_record(
    truth: GroundTruth,
    *,
    n: int,
    m: int,
    tau: float,
    regime: Regime,
    radius: float,
    seed: int,
    tolerance: float = KKT_TOLERANCE,
    n_eval: int = 1 << 15,
    n_bias: int = 1 << 14,
) -> ErmRecord:
    """Sample, fit and measure one cell (a sweep cell's result, by :meth:`ErmRecord.to_dict`)."""
    generator = torch.Generator().manual_seed(seed)
    risk = sample_risk(truth, n, m, tau, regime, generator)
    fit = fit_ball(risk, radius, tolerance=tolerance)
    status = {name: getattr(fit, name) for name in _FIT_FIELDS}
    if not fit.converged:
        return ErmRecord(status="not converged", metrics=None, **status)
    metrics = trained_metrics(risk, fit, truth, generator=generator, n_eval=n_eval, n_bias=n_bias)
    if metrics.excess_risk is None:
        status["reason"] = "E exp(s_hat/tau) is infinite under p-"
        return ErmRecord(status="infinite risk", metrics=metrics, **status)
    return ErmRecord(status="ok", metrics=metrics, **status)
