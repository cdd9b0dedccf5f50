"""C10: the seed-rate statistics, the three parts' verdicts, and the gap estimator against brute force."""

import math

import numpy as np
import pytest
import torch

from crl.claims.base import Verdict
from crl.claims.c10_generalisation import (
    MODEL,
    _unconverged,
    draw_tuples,
    embed,
    empirical_risk,
    fit_embedding,
    gap_terms,
    random_parameters,
    rate_part,
    secant_part,
    tau_part,
    tuple_losses,
)

X = np.array([256.0, 512.0, 1024.0, 2048.0, 4096.0])


def _seeds(rate: float, seeds: int, noise: float, rng: np.random.Generator) -> np.ndarray:
    """(seeds, 5) values c x^rate times independent lognormal noise of relative sd ``noise``."""
    return (X**rate)[None, :] * np.exp(noise * rng.standard_normal((seeds, X.size)))


def test_non_positive_means_make_the_rate_part_inconclusive() -> None:
    """If this fails, a negative mean gap reaches a logarithm (a silent NaN) instead of an INCONCLUSIVE part."""
    values = np.ones((4, 5))
    values[:, 2] = -1.0
    assert rate_part("rate", list(X), values, -0.45, 0.99).verdict is Verdict.INCONCLUSIVE


def test_every_verdict_of_the_rate_parts_is_reachable() -> None:
    """If this fails, the n part (end to end) cannot PASS on a 1/n gap, FAIL on a flat one, or be INCONCLUSIVE
    when noisy; or the k part (a fitted rate) cannot reach all three."""
    rng = np.random.default_rng(2)
    assert secant_part("n", list(X), _seeds(-1.0, 30, 0.1, rng), -0.45, 0.998).verdict is Verdict.PASS
    assert secant_part("n", list(X), _seeds(0.0, 30, 0.1, rng), -0.45, 0.998).verdict is Verdict.FAIL
    assert secant_part("n", list(X), _seeds(-0.45, 4, 0.3, rng), -0.45, 0.998).verdict is Verdict.INCONCLUSIVE
    assert rate_part("k", list(X), _seeds(0.0, 30, 0.1, rng), 0.1, 0.998).verdict is Verdict.PASS
    assert rate_part("k", list(X), _seeds(0.5, 30, 0.1, rng), 0.1, 0.998).verdict is Verdict.FAIL
    assert rate_part("k", list(X), _seeds(0.1, 12, 0.3, rng), 0.1, 0.998).verdict is Verdict.INCONCLUSIVE
    fewer_seeds_than_points = rate_part("k", list(X), _seeds(0.0, 4, 0.1, rng), 0.1, 0.998)
    assert fewer_seeds_than_points.verdict is Verdict.INCONCLUSIVE
    assert "more seeds than" in fewer_seeds_than_points.reason


def test_every_verdict_of_the_tau_part_is_reachable() -> None:
    """If this fails, the tau part (Student-t interval of per-seed differences) cannot reach all outcomes."""
    rng = np.random.default_rng(3)
    assert tau_part(1.0 + 0.1 * rng.standard_normal(20), 0.998).verdict is Verdict.PASS
    assert tau_part(-1.0 + 0.1 * rng.standard_normal(20), 0.998).verdict is Verdict.FAIL
    assert tau_part(rng.standard_normal(20), 0.998).verdict is Verdict.INCONCLUSIVE


def test_a_series_with_an_unconverged_fit_is_inconclusive() -> None:
    """If this fails, a claim part could pass on fits that are not stationary points (not ERMs)."""
    key = ("claim", 256, 8, 0.5)
    assert _unconverged({key: np.array([1e-7, 1e-7])}, [key]) is None
    part = _unconverged({key: np.array([1e-7, 3.0])}, [key])
    assert part is not None and part.verdict is Verdict.INCONCLUSIVE


def _brute_force_risk(theta: torch.Tensor, anchors, positives, negatives, tau: float) -> float:
    """[B]'s InfoNCE - log k, tuple by tuple in Python floats (negatives (n, k, 3) or shared (k, 3))."""
    total = 0.0
    for i in range(anchors.shape[0]):
        a, p = embed(theta, anchors[i]), embed(theta, positives[i])
        row = negatives if negatives.ndim == 2 else negatives[i]
        positive = float(a @ p)
        terms = [math.exp((float(a @ embed(theta, row[j])) - positive) / tau) for j in range(row.shape[0])]
        total += math.log(1.0 + sum(terms)) - math.log(row.shape[0])
    return total / anchors.shape[0]


@pytest.mark.parametrize("negatives", ["own", "shared"])
def test_gap_terms_match_a_brute_force_loop(negatives: str) -> None:
    """If this fails, R_hat (InfoNCE - log k through crl.objectives) or the control-variate gap differs from
    the formula evaluated tuple by tuple."""
    generator = torch.Generator().manual_seed(4)
    train = draw_tuples(MODEL, MODEL.sample(6, generator), 3, negatives, generator)  # type: ignore[arg-type]
    fresh = draw_tuples(MODEL, MODEL.sample(9, generator), 3, "own", generator)
    theta_hat, theta_ref = random_parameters(generator), random_parameters(generator)
    tau = 0.5
    expected = {
        name: _brute_force_risk(theta, sample.anchors, sample.positives, sample.negatives, tau)
        for name, theta, sample in [
            ("fh", theta_hat, fresh),
            ("fr", theta_ref, fresh),
            ("th", theta_hat, train),
            ("tr", theta_ref, train),
        ]
    }
    terms = gap_terms(theta_hat, theta_ref, train, fresh, tau)
    assert terms["gap"] == pytest.approx(
        (expected["fh"] - expected["fr"]) - (expected["th"] - expected["tr"]), rel=1e-10, abs=1e-13
    )
    assert terms["plain_gap"] == pytest.approx(expected["fh"] - expected["th"], rel=1e-10)


def test_the_control_variate_has_mean_zero_for_a_fixed_embedding() -> None:
    """If this fails, R_hat_n(phi_0) is not unbiased for R(phi_0): the gap estimator would be biased."""
    generator = torch.Generator().manual_seed(5)
    theta = random_parameters(generator)
    fresh = draw_tuples(MODEL, MODEL.sample(40000, generator), 4, "own", generator)
    population = empirical_risk(theta, fresh, 0.5)
    small = np.array(
        [
            empirical_risk(theta, draw_tuples(MODEL, MODEL.sample(32, generator), 4, "own", generator), 0.5)
            for _ in range(300)
        ]
    )
    se = math.sqrt(small.var(ddof=1) / small.size + float(tuple_losses(theta, fresh, 0.5).var()) / 40000)
    assert abs(small.mean() - population) < 4.5 * se


def test_the_fit_reaches_a_stationary_point() -> None:
    """If this fails, fit_embedding returns a point whose gradient is far from 0 on an easy sample."""
    generator = torch.Generator().manual_seed(6)
    sample = draw_tuples(MODEL, MODEL.sample(200, generator), 4, "own", generator)
    fit = fit_embedding(sample, 0.5, [random_parameters(generator)])
    assert fit.grad_max <= 1e-5
    assert fit.empirical_risk <= empirical_risk(random_parameters(generator), sample, 0.5)
