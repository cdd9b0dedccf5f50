"""Tests of claims C3 and C4: the heavy-tailed control's closed forms, the rate protocol on exact gaps, C4's
fixed-pair estimator, and that each control is judged at its claim's per-part level (docs/theory.md section 7)."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate

from crl.claims import _kernel_heavy_tail as heavy
from crl.claims import c03_scrl_inner as c3
from crl.claims import c04_sscrl_fluctuation as c4
from crl.claims.budget import part_level
from crl.claims.c04_sscrl_fluctuation import block_sd, block_values, c4_factor
from crl.claims.context import ClaimContext, Fidelity
from crl.claims.verdict import Verdict, verdict_rate
from crl.risk import FeatureScore, IsotropicGaussian, feature_log_partition, inner_gap_draws
from crl.stats import rate_fit
from crl.sweep import SweepStore
from crl.synthetic import GaussianTwoTower, VMFUniform


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_c3_score_is_bounded_as_stated() -> None:
    """If this fails, C3's score exceeds the bound B = 0.25 its rule and [A]'s constant use."""
    x = torch.nn.functional.normalize(torch.randn(1000, 3, dtype=torch.float64), dim=1)
    y = torch.nn.functional.normalize(torch.randn(1000, 3, dtype=torch.float64), dim=1)
    assert float(c3.fixed_score()(x, y).abs().max()) <= c3.BOUND_B


@pytest.mark.parametrize(("dim", "c_over_tau"), [(2, 0.1), (3, 0.1), (2, 0.2)])
def test_gaussian_quadratic_partition_matches_monte_carlo(dim: int, c_over_tau: float) -> None:
    """If this fails, E exp(c|y|^2/tau) = (1 - 2c/tau)^(-d/2) for y ~ N(0, I_d) (the control's log Z) is wrong.
    (c/tau <= 0.2 keeps E exp(2c|y|^2/tau) finite, so the Monte-Carlo mean has a standard error.)"""
    tau = 0.5
    score = FeatureScore(torch.zeros_like, curvature=-2.0 * c_over_tau * tau)
    exact = float(feature_log_partition(score, IsotropicGaussian(dim), torch.zeros(1, dim), tau)[0])
    assert exact == pytest.approx(-0.5 * dim * math.log(1.0 - 2.0 * c_over_tau))
    y = torch.randn(400_000, dim, generator=gen(dim), dtype=torch.float64)
    w = torch.exp(c_over_tau * y.square().sum(dim=1))
    se = float(w.std()) / math.sqrt(w.numel())
    assert abs(float(w.mean()) - math.exp(exact)) < 5 * se


def test_control_weights_are_pareto_with_the_stated_tail_index() -> None:
    """If this fails, exp(s/tau) of C3's control is not Pareto(alpha) (P(W > w) = w^-alpha in d = 2) or its log Z
    is not log(alpha/(alpha - 1)): the premise it breaks (E W^2 = inf) would not be the stated one."""
    score, truth = c3.arm_model("control")
    assert isinstance(truth, GaussianTwoTower) and truth.dim == 2
    log_z = feature_log_partition(score, IsotropicGaussian(2), torch.zeros(1, 2), c3.TAU)
    assert float(log_z[0]) == pytest.approx(math.log(c3.ALPHA / (c3.ALPHA - 1.0)))
    y = truth.sample_negatives((200_000,), gen(1))
    w = torch.exp(score(torch.zeros_like(y), y) / c3.TAU)
    for level in (2.0, 10.0, 50.0):
        assert float((w > level).double().mean()) == pytest.approx(level**-c3.ALPHA, rel=0.08)


def test_control_estimator_matches_the_exact_gap() -> None:
    """If this fails, C3's control cells (plain gaps of inner_gap_draws) do not estimate the exact heavy-tailed gap
    tau E[-log(Wbar/Z)] (Frullani quadrature of :mod:`crl.claims._kernel_heavy_tail`)."""
    score, truth = c3.arm_model("control")
    for m in (4, 64):
        draws = inner_gap_draws(score, truth, c3.TAU, m, generator=gen(m), n_draws=20_000).naive
        se = float(draws.std()) / math.sqrt(draws.numel())
        exact = c3.TAU * heavy.cross_entropy_gap(m, "dcl", c3.ALPHA)
        assert abs(float(draws.mean()) - exact) < 5 * se


def test_control_rate_is_the_heavy_tail_one_and_fails() -> None:
    """If this fails, the exact control gap over C3's grid does not decay like m^(1 - alpha) (local rate about
    -0.25 at alpha = 1.2) or the rule, measured at 1% relative error, does not FAIL it."""
    grid = c3.M_GRIDS[Fidelity.QUICK]
    gaps = np.array([c3.TAU * heavy.cross_entropy_gap(m, "dcl", c3.ALPHA) for m in grid])
    fit = rate_fit(list(grid), gaps, 0.01 * gaps, rng=np.random.default_rng(0), ci=part_level(1))
    assert fit.model == "power"
    assert fit.exponent == pytest.approx(1.0 - c3.ALPHA, abs=0.06)
    assert verdict_rate(fit, c3.TARGET_RATE, c3.DELTA)[0] is Verdict.FAIL


def _exact_isotropic_gap(beta: float, tau: float, m: int) -> float:
    """``L(s) - E L_hat_m(s)`` for s = beta <x, y> on VMFUniform(3) by Frullani quadrature (W/Z = e^{au}/C_3(a))."""
    a = beta / tau
    mean = math.sinh(a) / a

    def phi(s: float) -> float:
        return integrate.quad(lambda u: 0.5 * math.exp(-s * math.exp(a * u) / mean), -1.0, 1.0, epsabs=1e-15)[
            0
        ]

    def integrand(t: float) -> float:
        return (phi(t / m) ** m - math.exp(-t)) / t

    head = integrate.quad(integrand, 0.0, 1.0, epsabs=1e-15, limit=200)[0]
    return tau * (head + integrate.quad(integrand, 1.0, 80.0, epsabs=1e-15, limit=400)[0])


def test_exact_gap_of_a_twice_larger_score_passes_the_band() -> None:
    """If this fails, the rate protocol would not pass the exact O(1/m) gap of a score twice C3's size (B/tau = 1),
    whose power-law slope is about -1.005 with a standard-fidelity CI of +-0.004 (issue 8 item 2)."""
    grid = (4, 16, 64, 256, 1024)
    gaps = np.array([_exact_isotropic_gap(0.5, c3.TAU, m) for m in grid])
    fit = rate_fit(list(grid), gaps, 0.003 * gaps, rng=np.random.default_rng(0), ci=part_level(1))
    assert fit.power.slope < -1.002
    assert verdict_rate(fit, c3.TARGET_RATE, c3.DELTA)[0] is Verdict.PASS


def test_c4_factor_values() -> None:
    """If this fails, c4(R) (E sample sd = c4 sd for normal data) is wrong: c4(2) = sqrt(2/pi)."""
    assert c4_factor(2) == pytest.approx(math.sqrt(2.0 / math.pi))
    sds = np.random.default_rng(0).standard_normal((20000, 5)).std(axis=1, ddof=1)
    assert sds.mean() / c4_factor(5) == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("regime", ["shared", "independent"])
def test_block_fixes_the_pairs(regime: str) -> None:
    """If this fails, a block redraws its pairs or mixes the regimes. At m = 1 on VMFUniform(3) with s = beta<x,y>,
    L_hat = (1/n) sum_i (s(x_i, y'_i) - s(x_i, y_i)) given the pairs, so Var(L_hat | pairs) is beta^2 |xbar|^2/3
    (shared y') or beta^2/(3n) (independent), exactly."""
    truth, n, beta = VMFUniform(3, 1.0), 8, c4.BETA
    x, _ = truth.sample(n, gen(5))
    values = block_values(
        c4.fixed_score(), truth, c4.TAU, n=n, m=1, replicates=40_000, regime=regime, generator=gen(5)
    )
    variance = beta**2 * (float(x.mean(dim=0).square().sum()) if regime == "shared" else 1.0 / n) / 3.0
    assert block_sd(values) == pytest.approx(math.sqrt(variance), rel=0.02)


@pytest.mark.usefixtures("one_thread")
def test_c3_control_is_judged_at_the_claims_level(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """If this fails, C3's control is judged at another level than the claim's per-part level, or does not FAIL."""
    for arm in ("claim", "control"):
        monkeypatch.setitem(c3.CHUNKS[arm], Fidelity.QUICK, 1)
        monkeypatch.setitem(c3.DRAWS_PER_CHUNK[arm], Fidelity.QUICK, 2000)
    monkeypatch.setitem(c3.M_GRIDS, Fidelity.QUICK, (4, 16, 64, 256))
    level = part_level(c3.CLAIM.parts)
    with SweepStore(tmp_path / "r.sqlite") as store:  # type: ignore[operator]
        result = c3.CLAIM.run(ClaimContext("C3", Fidelity.QUICK, store, seed=0, run_id="run", level=level))
    assert result.level == pytest.approx(level) and result.parts == 1
    assert result.control.verdict is Verdict.FAIL
    assert all(s.ci_level == pytest.approx(level) for s in (*result.statistics, *result.control.statistics))
    assert result.slack is not None and result.slack < 0.1
    assert all(p.control == p.label.startswith("control") for p in result.figures[0].points)


@pytest.mark.usefixtures("one_thread")
def test_c4_control_is_judged_at_the_claims_level(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """If this fails, C4's three parts or its control are judged at another level than part_level(3)."""
    monkeypatch.setitem(c4.BLOCKS, Fidelity.QUICK, 3)
    monkeypatch.setitem(c4.REPLICATES, Fidelity.QUICK, 6)
    monkeypatch.setattr(c4, "N_FOR_M", 64)
    level = part_level(c4.CLAIM.parts)
    with SweepStore(tmp_path / "r.sqlite") as store:  # type: ignore[operator]
        result = c4.CLAIM.run(ClaimContext("C4", Fidelity.QUICK, store, seed=0, run_id="run", level=level))
    assert result.parts == 3 and result.level == pytest.approx(level)
    assert len(result.statistics) == len(result.control.statistics) == 3
    assert all(s.ci_level == pytest.approx(level) for s in (*result.statistics, *result.control.statistics))
    for figure in result.figures:
        assert all(p.control == p.label.startswith("control") for p in figure.points)
