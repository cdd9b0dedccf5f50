"""Tests of C7's and C8's negative controls: the heavy-tailed model, its exact gaps, and how the rule judges it."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate

from crl._vocab import KernelForm
from crl.claims import _kernel_heavy_tail as heavy
from crl.claims import c07_ce_gap, c08_ideal_search
from crl.claims._kernel_series import CONTROL_KS, FORM_ORDER, judge_control
from crl.claims._sphere_kernel import DrawSummary
from crl.claims.budget import part_level
from crl.claims.context import ClaimContext, Fidelity
from crl.claims.verdict import Verdict
from crl.risk import cross_entropy_gap_bounds, ideal_search_gap, integrated_cross_entropy_gap
from crl.stats import loglog_slope
from crl.sweep import SweepStore


@pytest.mark.parametrize("a", [0.75, 1.2, 1.5])
@pytest.mark.parametrize("t", [1e-4, 0.05, 0.7, 1.0, 3.0, 12.0])
def test_pareto_laplace_transform_by_quadrature(a: float, t: float) -> None:
    """If this fails, the Laplace transform behind every exact control gap is wrong: E e^{-tW}, W ~ Pareto(a)."""
    direct, _ = integrate.quad(lambda w: a * w ** (-a - 1.0) * math.exp(-t * w), 1.0, math.inf, epsrel=1e-12)
    if t < 1e-3:
        direct = 1.0 - integrate.quad(lambda w: t * math.exp(-t * w) * min(1.0, w**-a), 0.0, math.inf)[0]
    assert math.exp(heavy.pareto_log_laplace(a, t)) == pytest.approx(direct, rel=1e-8)


def test_scores_are_pareto_and_the_kernel_ratio_is_exact() -> None:
    """If this fails, exp(c|y|^2/tau) on N(0, I_2) is not Pareto(alpha), or C8's dM/dpi is not the ratio of the
    Gaussian densities N(0, sigma^2 I)/N(0, I) (so E_pi dM/dpi would not be 1)."""
    draws = heavy.draw_heavy_tail(
        "wide", n_draws=200, n_negatives=500, generator=torch.Generator().manual_seed(3)
    )
    w = torch.exp(draws.negative_scores / heavy.TAU).reshape(-1)
    for level in (2.0, 10.0, 50.0):
        empirical = float((w > level).double().mean())
        assert empirical == pytest.approx(level**-heavy.ALPHA, rel=0.08)
    y2 = 2.0 * heavy.ALPHA * draws.negative_scores / heavy.TAU
    sigma2 = heavy.ALPHA / (heavy.ALPHA - heavy.GAMMA)
    gaussian_ratio = -y2 / (2.0 * sigma2) + y2 / 2.0 - math.log(sigma2)
    assert torch.allclose(draws.log_kernel_ratio, gaussian_ratio, atol=1e-12)
    assert heavy.kernel_ratio_second_moment() == pytest.approx(0.75**2 / (1.2 * 0.3))
    with pytest.raises(ValueError, match="gamma"):
        heavy.kernel_ratio_second_moment(gamma=0.6)


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("form", FORM_ORDER)
def test_exact_control_gaps_match_monte_carlo(form: KernelForm) -> None:
    """If this fails, the exact expected gaps drawn beside the controls disagree with the estimators they stand
    for (C7: integrated_cross_entropy_gap on two-tower positives; C8: ideal_search_gap on wide positives)."""
    k, generator = 16, torch.Generator().manual_seed(11)
    c7 = heavy.draw_heavy_tail("two-tower", n_draws=20000, n_negatives=k, generator=generator)
    plain = integrated_cross_entropy_gap(
        c7.positive_scores,
        c7.negative_scores,
        c7.log_partition,
        tau=heavy.TAU,
        form=form,
    ).naive
    se = float(plain.std()) / math.sqrt(plain.numel())
    assert float(plain.mean()) == pytest.approx(heavy.cross_entropy_gap(k, form), abs=4 * se)
    c8 = heavy.draw_heavy_tail("wide", n_draws=60000, n_negatives=k, generator=generator)
    estimate = ideal_search_gap(
        c8.positive_scores,
        c8.negative_scores,
        c8.log_kernel_ratio,
        c8.log_partition,
        tau=heavy.TAU,
        form=form,
    ).estimate
    se = float(estimate.std()) / math.sqrt(estimate.numel())
    assert float(estimate.mean()) == pytest.approx(heavy.ideal_search_gap(k, form), abs=4 * se)


def _slope(gap: object, ks: tuple[int, ...], form: str) -> float:
    values = np.abs([gap(k, form) for k in ks])  # type: ignore[operator]
    return loglog_slope(np.asarray(ks, dtype=float), values, rng=np.random.default_rng(0), ci=0.9).slope


def test_control_rates_are_the_heavy_tail_ones() -> None:
    """If this fails, the controls do not have the rates docs/claims/C7.md and C8.md predict: C7's gap ~ k^(1 -
    alpha) = k^-0.2 (-0.25 on the control grid), C8's DCL gap ~ k^-(alpha - gamma) = k^-0.75 (-0.67 on it),
    C8's InfoNCE gap -1/k; each far outside [-1.1, -0.9] except C8's InfoNCE form."""
    assert _slope(heavy.cross_entropy_gap, CONTROL_KS, "dcl") == pytest.approx(-0.25, abs=0.01)
    assert _slope(heavy.cross_entropy_gap, CONTROL_KS, "infonce") == pytest.approx(-0.19, abs=0.01)
    assert _slope(heavy.ideal_search_gap, CONTROL_KS, "dcl") == pytest.approx(-0.67, abs=0.01)
    assert _slope(heavy.ideal_search_gap, CONTROL_KS, "infonce") == pytest.approx(-0.99, abs=0.01)
    for gap, rate in (
        (heavy.cross_entropy_gap, 1 - heavy.ALPHA),
        (heavy.ideal_search_gap, heavy.GAMMA - heavy.ALPHA),
    ):
        local = math.log(gap(65536, "dcl") / gap(32768, "dcl")) / math.log(2.0)
        assert local == pytest.approx(rate, abs=0.015)


def _exact_summaries(gap: object, relative_se: float) -> dict[KernelForm, list[DrawSummary]]:
    def summary(value: float) -> DrawSummary:
        se = abs(value) * relative_se
        return DrawSummary(mean=value, se=se, sd=se, sd_se=0.0)

    return {form: [summary(gap(k, form)) for k in CONTROL_KS] for form in FORM_ORDER}  # type: ignore[operator]


@pytest.mark.parametrize("claim", ["C7", "C8"])
def test_control_is_judged_at_the_claims_level_and_fails(tmp_path: object, claim: str) -> None:
    """If this fails, a control is judged at another level than its claim's per-part level (docs/theory.md
    section 7), or the rule passes the heavy-tailed alternative measured at its exact expected gaps."""
    level = part_level(5)
    with SweepStore(tmp_path / "r.sqlite") as store:  # type: ignore[operator]
        ctx = ClaimContext(claim, Fidelity.QUICK, store, seed=0, run_id="run", level=level)
        if claim == "C7":
            outcome = judge_control(
                ctx,
                claim=claim,
                measured=_exact_summaries(heavy.cross_entropy_gap, 0.01),
                exact=heavy.cross_entropy_gap,
                bounds=lambda k, form: cross_entropy_gap_bounds(k, heavy.TAU, form),
                bound_name="Prop. 1",
            )
        else:
            outcome = judge_control(
                ctx,
                claim=claim,
                measured=_exact_summaries(heavy.ideal_search_gap, 0.01),
                exact=heavy.ideal_search_gap,
                bounds=lambda k, form: (-1.0, 1.0),
                bound_name="Prop. 2",
            )
    assert outcome.verdict is Verdict.FAIL
    assert len(outcome.statistics) == 3
    assert all(s.ci_level == pytest.approx(level) for s in outcome.statistics)
    assert outcome.figure.points and all(p.control for p in outcome.figure.points)


@pytest.mark.usefixtures("one_thread")
def test_c7_control_run_fails_at_the_claims_level(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """If this fails, C7's control, measured through its cells (plain gaps of integrated_cross_entropy_gap), does
    not FAIL or is judged at another level than the claim's."""
    monkeypatch.setitem(c07_ce_gap.CONTROL_DRAWS, Fidelity.QUICK, 8000)
    level = part_level(5)
    with SweepStore(tmp_path / "r.sqlite") as store:  # type: ignore[operator]
        ctx = ClaimContext("C7", Fidelity.QUICK, store, seed=0, run_id="run", level=level)
        outcome = c07_ce_gap.run_control(ctx)
    assert outcome.verdict is Verdict.FAIL
    assert all(s.ci_level == pytest.approx(level) for s in outcome.statistics)
    assert {row["k"] for row in outcome.table} == set(CONTROL_KS)


@pytest.mark.usefixtures("one_thread")
def test_c8_control_cells_use_the_ideal_search_estimator(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails, C8's control cells do not measure ideal_search_gap's variance-reduced estimate near the
    exact gap, or its statistics are not at the claim's level."""
    monkeypatch.setitem(c08_ideal_search.CONTROL_DRAWS, Fidelity.QUICK, 4000)
    level = part_level(5)
    with SweepStore(tmp_path / "r.sqlite") as store:  # type: ignore[operator]
        ctx = ClaimContext("C8", Fidelity.QUICK, store, seed=0, run_id="run", level=level)
        outcome = c08_ideal_search.run_control(ctx)
    assert all(s.ci_level == pytest.approx(level) for s in outcome.statistics)
    for row in outcome.table:
        assert row["gap"] == pytest.approx(row["exact_gap"], abs=5 * row["se"])
