"""crl.erm: the lifted L_hat's derivatives against autograd, and the ball-constrained ERM against brute force."""

import math

import numpy as np
import pytest
import torch
from scipy import optimize

from crl.erm import EmpiricalRisk, LiftedFamily, fit_ball, gradient_mapping_norm
from crl.erm.trained import erm_record, family_for, ideal_parameters, sample_risk
from crl.risk import excess_risk
from crl.synthetic import GaussianTwoTower, VMFUniform

TAU = 0.5


def _direct_risk(
    theta: torch.Tensor, x, y, negatives, quadratic: bool, regime: str, offset: float = 0.0
) -> torch.Tensor:
    """An independent L_hat: s = x^T W y + b^T y (+ e|y|^2, e learned or a fixed offset) written out, then
    tau (logsumexp - log m)."""
    d = x.shape[1]
    weight, bias = theta[: d * d].reshape(d, d), theta[d * d : d * d + d]
    e = theta[-1] if quadratic else torch.tensor(offset, dtype=theta.dtype)

    def score(a, b):
        return (a @ weight * b).sum(-1) + b @ bias + e * b.square().sum(-1)

    positive = score(x, y)
    if regime == "independent":
        neg = score(x[:, None, :].expand_as(negatives), negatives)
    else:
        neg = torch.stack([score(x, negatives[j].expand_as(x)) for j in range(negatives.shape[0])], dim=1)
    m = neg.shape[1]
    return TAU * (torch.logsumexp((neg - positive[:, None]) / TAU, dim=1) - math.log(m)).mean()


@pytest.mark.parametrize("regime", ["independent", "shared"])
@pytest.mark.parametrize("quadratic", [False, True])
def test_value_gradient_and_hessian_match_autograd(regime: str, quadratic: bool) -> None:
    """If this fails, L_hat or its Kronecker-structured derivatives disagree with autograd of a direct formula."""
    g = torch.Generator().manual_seed(3)
    truth = GaussianTwoTower(2, 0.6) if quadratic else VMFUniform(2, 3.0)
    x, y = truth.sample(7, g)
    negatives = truth.sample_negatives((7, 5) if regime == "independent" else (5,), g)
    family = LiftedFamily(2, quadratic=quadratic)
    risk = EmpiricalRisk(family, x, y, negatives, TAU, regime)
    theta = torch.randn(family.n_params, generator=g, dtype=torch.float64)

    def f(t):
        return _direct_risk(t, x, y, negatives, quadratic, regime)

    d = risk.derivatives(theta)
    assert d.value == pytest.approx(float(f(theta)), abs=1e-12)
    assert torch.allclose(d.gradient, torch.autograd.functional.jacobian(f, theta), atol=1e-11)
    assert torch.allclose(d.hessian, torch.autograd.functional.hessian(f, theta), atol=1e-10)


@pytest.mark.parametrize("regime", ["independent", "shared"])
def test_a_fixed_offset_enters_the_value_but_not_the_parameters(regime: str) -> None:
    """If this fails, the fixed coefficient e0 of |y|^2 (C5's heavy-tailed class) is missing from L_hat or leaks into
    its derivatives: value, gradient and Hessian against autograd of the direct formula with e = e0."""
    g = torch.Generator().manual_seed(4)
    truth = GaussianTwoTower(2, 0.5, variance=3.0)
    x, y = truth.sample(7, g)
    negatives = truth.sample_negatives((7, 5) if regime == "independent" else (5,), g)
    family = LiftedFamily(2, offset=0.2)
    risk = EmpiricalRisk(family, x, y, negatives, TAU, regime)
    theta = torch.randn(family.n_params, generator=g, dtype=torch.float64)

    def f(t):
        return _direct_risk(t, x, y, negatives, False, regime, offset=0.2)

    d = risk.derivatives(theta)
    assert family.n_params == 6 and family.score(theta).curvature == pytest.approx(-0.4)
    assert d.value == pytest.approx(float(f(theta)), abs=1e-12)
    assert torch.allclose(d.gradient, torch.autograd.functional.jacobian(f, theta), atol=1e-11)
    assert torch.allclose(d.hessian, torch.autograd.functional.hessian(f, theta), atol=1e-10)


def test_wide_truth_family_fixes_e_at_the_ideal_and_has_zero_excess_risk_at_s_star() -> None:
    """If this fails, a wide Gaussian truth's family does not contain s* with e fixed at s*'s own e > 0, or its
    exact risk does not vanish at theta*."""
    truth = GaussianTwoTower(3, 0.5, variance=3.0)
    family = family_for(truth, TAU)
    _, e_star = truth.ideal_coefficients(TAU)
    assert family.offset == pytest.approx(TAU / 3.0) == pytest.approx(e_star) and not family.quadratic
    score = family.score(ideal_parameters(truth, TAU))
    gap = excess_risk(score, truth, TAU, generator=torch.Generator().manual_seed(0), n_anchors=4096)
    assert gap.mean == pytest.approx(0.0, abs=1e-12)
    assert family_for(GaussianTwoTower(3, 0.5), TAU).quadratic


def test_offset_and_learned_quadratic_are_exclusive() -> None:
    """If this fails, a family both fixes and learns the coefficient of |y|^2 without an error naming offset."""
    with pytest.raises(ValueError, match="offset"):
        LiftedFamily(2, quadratic=True, offset=0.1)
    with pytest.raises(ValueError, match="offset"):
        LiftedFamily(2, offset=math.nan)


def _brute_force(risk: EmpiricalRisk, radius: float, starts: int = 3) -> tuple[np.ndarray, float]:
    """min L_hat over |theta| <= R by scipy's SLSQP from several starts (a second, independent solver)."""
    rng = np.random.default_rng(0)
    p = risk.family.n_params
    best = None
    for _ in range(starts):
        start = rng.normal(size=p)
        start *= 0.5 * radius / np.linalg.norm(start)
        res = optimize.minimize(
            lambda t: risk.value(torch.from_numpy(t)),
            start,
            jac=lambda t: risk.derivatives(torch.from_numpy(t), hessian=False).gradient.numpy(),
            constraints=[{"type": "ineq", "fun": lambda t: radius**2 - t @ t, "jac": lambda t: -2.0 * t}],
            method="SLSQP",
            options={"ftol": 1e-14, "maxiter": 1000},
        )
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None
    return best.x, float(best.fun)


@pytest.mark.parametrize(("m", "radius", "active"), [(64, 6.0, False), (2, 3.0, True), (64, 0.5, True)])
def test_ball_fit_matches_brute_force_and_flags_the_binding_ball(m: int, radius: float, active: bool) -> None:
    """If this fails, fit_ball misses the constrained minimum, its KKT residual, or whether the ball binds."""
    truth = VMFUniform(2, 3.0)
    risk = sample_risk(truth, 12, m, TAU, "independent", torch.Generator().manual_seed(1))
    fit = fit_ball(risk, radius)
    theta, value = _brute_force(risk, radius)
    assert fit.converged and fit.kkt_residual <= 1e-8
    assert fit.active is active
    assert fit.norm <= radius * (1 + 1e-12)
    assert fit.risk <= value + 1e-9
    assert np.allclose(fit.theta.numpy(), theta, atol=1e-4)
    if active:
        assert fit.norm == pytest.approx(radius, rel=1e-9) and fit.multiplier > 0.0
    else:
        assert fit.multiplier == 0.0


def test_separable_sample_binds_the_ball_where_unconstrained_erm_diverges() -> None:
    """If this fails, a separable sample (m = 1, SSCRL) no longer drives the scores to the ball's edge."""
    risk = sample_risk(VMFUniform(3, 4.0), 64, 1, TAU, "shared", torch.Generator().manual_seed(0))
    fit = fit_ball(risk, 5.0)
    assert fit.converged and fit.active
    direction = fit.theta / fit.theta.norm()
    assert (
        risk.value(20.0 * direction) < risk.value(5.0 * direction) < risk.value(torch.zeros_like(direction))
    )


def test_gradient_mapping_is_zero_only_at_kkt_points() -> None:
    """If this fails, the KKT residual is not the gradient mapping of the ball-constrained problem."""
    theta = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert gradient_mapping_norm(theta, -2.0 * theta, 5.0) == 0.0
    assert gradient_mapping_norm(theta, torch.tensor([1.0, 0.0], dtype=torch.float64), 5.0) > 0.1
    assert gradient_mapping_norm(0.5 * theta, 0.0 * theta, 5.0) == 0.0


def test_erm_beats_s_star_empirically_and_has_non_negative_excess_risk() -> None:
    """If this fails, the ERM is not the empirical minimiser over a ball containing s*, or L - L* < 0."""
    truth = VMFUniform(3, 4.0)
    radius = 1.5 * float(ideal_parameters(truth, TAU).norm())
    for regime in ("independent", "shared"):
        record = erm_record(truth, n=256, m=32, tau=TAU, regime=regime, radius=radius, seed=5, n_eval=4096)
        assert record.status == "ok" and record.metrics is not None
        metrics = record.metrics
        assert metrics.excess_risk is not None and metrics.excess_risk_se is not None
        star_risk = truth.optimal_risk(TAU) - metrics.star_gap
        assert metrics.empirical_risk <= star_risk + 1e-12
        assert metrics.excess_risk >= -4.0 * metrics.excess_risk_se
        assert metrics.excess_risk > 0.0


def test_a_fit_that_misses_its_tolerance_is_recorded_not_dropped() -> None:
    """If this fails, a non-converged fit is not reported as such (status, reason, no measurements)."""
    truth = VMFUniform(3, 4.0)
    record = erm_record(truth, n=64, m=4, tau=TAU, regime="independent", radius=5.0, seed=0, tolerance=1e-300)
    assert record.status == "not converged" and record.converged is False
    assert "tolerance" in record.reason or "did not converge" in record.reason
    assert record.metrics is None and record.to_dict()["gap"] is None and record.kkt_residual > 0.0


def test_bad_input_is_named() -> None:
    """If this fails, bad shapes or radii reach torch instead of a clear ValueError."""
    family = LiftedFamily(3)
    x = torch.zeros(4, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="negatives"):
        EmpiricalRisk(family, x, x, torch.zeros(4, 3, dtype=torch.float64), TAU, "independent")
    risk = EmpiricalRisk(family, x, x, torch.zeros(4, 2, 3, dtype=torch.float64), TAU, "independent")
    with pytest.raises(ValueError, match="radius"):
        fit_ball(risk, -1.0)
    with pytest.raises(ValueError, match="theta"):
        risk.value(torch.zeros(5, dtype=torch.float64))


def test_mlp_fit_keeps_the_best_restart_and_reports_stationarity() -> None:
    """If this fails, the non-convex MLP fit does not keep its best restart, or reports a wrong L_hat/gradient."""
    from crl.erm.mlp import fit_mlp, mlp_empirical_risk

    truth = VMFUniform(3, 4.0)
    g = torch.Generator().manual_seed(0)
    x, y = truth.sample(48, g)
    negatives = truth.sample_negatives((8,), g)
    fit = fit_mlp(x, y, negatives, TAU, "shared", scale=2.0, generator=g, hidden=4, restarts=2, max_iter=10)
    assert fit.risk == min(fit.restart_risks)
    assert fit.risk == pytest.approx(
        float(mlp_empirical_risk(fit.score, x, y, negatives, TAU, "shared").detach())
    )
    assert fit.risk < 0.0, "better than the constant score (L_hat = 0)"
    assert math.isfinite(fit.gradient_norm) and fit.converged == (fit.gradient_norm <= 1e-6)
    assert fit.score(x, y).abs().max() <= 2.0 + 1e-12
    with pytest.raises(ValueError, match="scale"):
        fit_mlp(x, y, negatives, TAU, "shared", scale=-1.0, generator=g)
