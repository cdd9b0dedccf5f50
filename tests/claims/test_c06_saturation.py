"""C6 (synthetic): the m* rule with its censoring, the slope intervals, the verdict, the fit and the exact metric."""

import itertools
import math
import zlib

import numpy as np
import pytest
import torch
from scipy import stats as scipy_stats

from crl.claims.base import Verdict
from crl.claims.c06_saturation import (
    ARMS,
    CLAIM_TERMS,
    CONTROL_TERMS,
    FAMILY,
    LINE,
    PLANS,
    CircleTruth,
    Sample,
    _cell_params,
    _judge,
    difference_of_differences,
    draw_sample,
    fit_in_ball,
    fit_on_line,
    judge,
    m_grids,
)
from crl.claims.context import Fidelity
from crl.stats.saturation import (
    LEFT,
    RIGHT,
    UNCENSORED,
    Saturations,
    SlopeBounds,
    jackknife_bounds,
    saturations,
    seed_weights,
    slope_bounds,
    slope_difference,
)

GRID = np.array([2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
TRUTH = CircleTruth(kappa=4.0, kappa0=2.0, tau=0.5)


def _one_curve(curve: list[float], seeds: int = 3) -> Saturations:
    """m* of one n whose every seed has the same curve (zero spread: tol = 1% of the plateau)."""
    values = np.tile(np.asarray(curve, dtype=np.float64), (seeds, 1, 1))
    return saturations(GRID, values, seed_weights(seeds, None, 0), 0.995)


@pytest.mark.parametrize(
    ("curve", "m_star", "censor"),
    [
        ([10.0, 5.0, 2.0, 1.005, 1.0, 1.0], 16.0, UNCENSORED),
        ([1.0, 5.0, 1.0, 1.0, 1.0, 1.0], 8.0, UNCENSORED),  # an early dip into the band does not count
        ([1.0, 1.0, 1.0, 1.0, 1.0, 1.0], 2.0, LEFT),
        ([8.0, 4.0, 2.0, 1.5, 1.02, 1.0], 32.0, RIGHT),  # saturates only at the plateau's own points
        ([8.0, 4.0, 2.0, 1.5, 1.2, 1.0], 32.0, RIGHT),  # the last point is outside: none qualifies
    ],
)
def test_m_star_on_hand_curves(curve: list[float], m_star: float, censor: int) -> None:
    """If this fails, the m* rule (smallest m from which every later mean is within tol of the plateau) or its
    censoring (right: m* among the two plateau points or none, recorded at m_(K-1); left: the first m) changed."""
    sat = _one_curve(curve)
    assert math.exp(sat.log_m[0, 0]) == pytest.approx(m_star)
    assert sat.censor[0, 0] == censor
    assert sat.plateau[0, 0] == pytest.approx(np.mean(curve[-2:]))


def test_tolerance_is_the_student_t_half_width_of_the_plateau_or_one_percent() -> None:
    """If this fails, tol is not max(t_{S-1} sd(p_s)/sqrt(S), 0.01 P) with p_s the per-seed plateau."""
    rng = np.random.default_rng(0)
    values = 1.0 + 0.2 * rng.standard_normal((5, 1, GRID.size))
    sat = saturations(GRID, values, seed_weights(5, None, 0), 0.99)
    per_seed = values[:, 0, -2:].mean(axis=1)
    half = scipy_stats.t.ppf(0.995, 4) * per_seed.std(ddof=1) / math.sqrt(5)
    assert sat.tol[0, 0] == pytest.approx(max(half, 0.01 * per_seed.mean()))


def test_slope_bounds_keep_censored_points_as_half_lines() -> None:
    """If this fails, a censored point is dropped or bounded on the wrong side of the least-squares slope."""
    log_n = np.log([16.0, 32.0, 64.0, 128.0, 256.0])
    y = 0.5 * log_n + 1.0
    exact = slope_bounds(log_n, Saturations(y[None], np.zeros((1, 5), dtype=np.int64), y[None], y[None]))
    assert exact.point[0] == pytest.approx(0.5) and exact.low[0] == exact.high[0] == pytest.approx(0.5)
    last_right = np.array([[0, 0, 0, 0, RIGHT]])
    sat = slope_bounds(log_n, Saturations(y[None], last_right, y[None], y[None]))
    assert sat.low[0] == pytest.approx(0.5) and sat.high[0] == math.inf
    first_right = np.array([[RIGHT, 0, 0, 0, 0]])
    assert slope_bounds(log_n, Saturations(y[None], first_right, y[None], y[None])).low[0] == -math.inf
    first_left = np.array([[LEFT, 0, 0, 0, 0]])
    bounds = slope_bounds(log_n, Saturations(y[None], first_left, y[None], y[None]))
    assert bounds.low[0] == pytest.approx(0.5) and bounds.high[0] == math.inf


def _rows(values: list[float]) -> SlopeBounds:
    """Jackknife rows (row 0 the data, then one per deleted seed) of an uncensored statistic."""
    v = np.asarray(values, dtype=np.float64)
    return SlopeBounds(v, v, v)


def test_every_verdict_is_reachable() -> None:
    """If this fails, the C6 rule cannot PASS, FAIL or be INCONCLUSIVE on jackknife rows built to give each
    outcome, or a fit that did not converge does not block a PASS."""
    tight = [0.5] + [0.5 + 0.001 * (-1) ** i for i in range(40)]
    assert _judge(jackknife_bounds(_rows(tight), 0.995), 0)[0] is Verdict.PASS
    assert _judge(jackknife_bounds(_rows([-x for x in tight]), 0.995), 0)[0] is Verdict.FAIL
    wide = [0.05] + [0.05 + 0.1 * (-1) ** i for i in range(40)]
    assert _judge(jackknife_bounds(_rows(wide), 0.995), 0)[0] is Verdict.INCONCLUSIVE
    assert _judge(jackknife_bounds(_rows(tight), 0.995), 3)[0] is Verdict.INCONCLUSIVE


def _on_grid(log2_m: list[int], count: int) -> Saturations:
    """``count`` identical rows of uncensored m* = 2^log2_m (per n)."""
    log_m = np.tile(np.log(2.0 ** np.asarray(log2_m, dtype=np.float64)), (count, 1))
    return Saturations(log_m, np.zeros(log_m.shape, dtype=np.int64), log_m, log_m)


def test_a_lattice_difference_of_zero_is_zero_not_a_float_rounding_pass() -> None:
    """If this fails, float rounding decides a CI end of the tolerance-band m* (the real-data reports' m*): m* on
    doubling grids over six doubling n give slopes in
    multiples of 1/17.5, and two equal slopes formed from different m* may differ in float by an ulp or two (whether
    they do depends on the BLAS kernel of the dot product). Here SSCRL's m* (64, 128, 256, 256, 512, 1024, slope
    0.743) against SCRL's (64, 128, 512, 512, 512, 1024, the same slope 13/17.5) must judge a difference of exactly
    0 and the verdict INCONCLUSIVE, and so must two slopes one ulp apart, whatever the platform's rounding."""
    log_n = np.log(2.0 ** np.arange(4, 10, dtype=np.float64))
    first = slope_bounds(log_n, _on_grid([6, 7, 8, 8, 9, 10], 41))
    second = slope_bounds(log_n, _on_grid([6, 7, 9, 9, 9, 10], 41))
    assert first.point[0] == pytest.approx(13 / 17.5)
    diff = slope_difference(first, second, 0.9)
    assert diff.point == diff.ci_low == diff.ci_high == 0.0
    lattice = np.full(41, 13 / 17.5)
    one_ulp_above = np.nextafter(lattice, 1.0)
    assert np.all(one_ulp_above - lattice > 0.0)
    rounded = slope_difference(
        SlopeBounds(one_ulp_above, one_ulp_above, one_ulp_above), SlopeBounds(lattice, lattice, lattice), 0.9
    )
    assert rounded.point == rounded.ci_low == rounded.ci_high == 0.0


def _curves(
    exponent: float, grid_n: tuple[int, ...], seeds: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Per n, (S, M) excess-risk curves that reach their plateau 1/n near m = n^exponent: 1/n + m^-1 n^(exponent-1)
    times seed noise of 2%, on m = 2 .. 16 n."""
    curves = []
    for n in grid_n:
        m = 2.0 ** np.arange(1, int(math.log2(16 * n)) + 1)
        mean = 1.0 / n + m**-1.0 * n ** (exponent - 1.0)
        curves.append(mean * (1.0 + 0.02 * rng.standard_normal((seeds, m.size))))
    return curves


def _by_arm(sscrl: float, null_sscrl: float, null2_sscrl: float) -> dict[str, list[np.ndarray]]:
    """Six arms whose m_q grows like n^exponent: SCRL and both null SCRL arms at 0.5, the SSCRL arms as given."""
    rng = np.random.default_rng(17)
    grid_n = (16, 32, 64, 128, 256)
    exponents = {
        "scrl": 0.5,
        "sscrl": sscrl,
        "null-scrl": 0.5,
        "null-sscrl": null_sscrl,
        "null2-scrl": 0.5,
        "null2-sscrl": null2_sscrl,
    }
    return {arm: _curves(exponents[arm], grid_n, 40, rng) for arm in ARMS}


def _judged(sscrl: float, null_sscrl: float, null2_sscrl: float):  # type: ignore[no-untyped-def]
    grid_n = (16, 32, 64, 128, 256)
    grids = [tuple(2**i for i in range(1, int(math.log2(16 * n)) + 1)) for n in grid_n]
    return judge(_by_arm(sscrl, null_sscrl, null2_sscrl), grid_n, grids, 0.995, q=0.1)


def test_dd_passes_beyond_the_null_and_fails_against_it() -> None:
    """If this fails, the rule does not judge the claim arms' slope difference beyond the null arms': SSCRL's
    m_q growing like n^1 against n^0.5 elsewhere must PASS; the same growth in the null arms too must not; a
    claim arm growing slower than its null must FAIL."""
    assert _judged(1.0, 0.5, 0.5).verdict is Verdict.PASS
    assert _judged(1.0, 1.0, 1.0).verdict is not Verdict.PASS
    assert _judged(0.5, 1.0, 1.0).verdict is Verdict.FAIL


def test_the_control_is_a_second_null_in_the_claims_place() -> None:
    """If this fails, the control is not DD with the null2 arms in the claim's place: two null replicates
    alike must give a control near 0 that does not PASS, whatever the claim arms do; and the control must be
    able to FAIL when the second null differs."""
    alike = _judged(1.0, 0.5, 0.5)
    assert alike.control_verdict is not Verdict.PASS and abs(alike.control.point) < 0.1
    assert _judged(1.0, 1.0, 0.5).control_verdict is Verdict.FAIL
    slopes = {arm: SlopeBounds(*(np.full(3, float(i)),) * 3) for i, arm in enumerate(ARMS)}
    claim = difference_of_differences(slopes, CLAIM_TERMS)
    control = difference_of_differences(slopes, CONTROL_TERMS)
    index = {arm: float(i) for i, arm in enumerate(ARMS)}
    assert claim.point[0] == pytest.approx(
        index["sscrl"] - index["scrl"] - index["null-sscrl"] + index["null-scrl"]
    )
    assert control.point[0] == pytest.approx(
        index["null2-sscrl"] - index["null2-scrl"] - index["null-sscrl"] + index["null-scrl"]
    )


def test_the_null_arms_share_their_pairs_and_not_the_claims() -> None:
    """If this fails, a null replicate's two regimes see different pairs, or the claim's pairs, or the second
    null replicate (the control) the first one's."""

    class Seeds:
        def seed_for(self, *key: object) -> int:
            return zlib.crc32(repr(key).encode())

    params = {arm: _cell_params(Seeds(), arm, 64, 3, (2, 4)) for arm in ARMS}  # type: ignore[arg-type]
    assert params["null-sscrl"]["regime"] == "sscrl" and params["null-scrl"]["regime"] == "scrl"
    assert params["scrl"]["pair_seed"] == params["sscrl"]["pair_seed"]
    assert (
        params["null-scrl"]["pair_seed"] == params["null-sscrl"]["pair_seed"] != params["scrl"]["pair_seed"]
    )
    assert params["null2-scrl"]["pair_seed"] == params["null2-sscrl"]["pair_seed"]
    assert params["null2-scrl"]["pair_seed"] not in {
        params["null-scrl"]["pair_seed"],
        params["scrl"]["pair_seed"],
    }


def test_every_arm_ends_at_sixteen_n() -> None:
    """If this fails, the arms' grids end at different m_max(n), or SSCRL (m* ~ n) can be right-censored by the
    grid's end by construction (docs/claims/C6.md, revision 5: m = 2 .. 16 n at every fidelity)."""
    for fidelity in Fidelity:
        for n, grid in zip(PLANS[fidelity]["n"], m_grids(fidelity), strict=True):
            assert (
                grid[0] == 2 and grid[-1] == 16 * n and all(b == 2 * a for a, b in itertools.pairwise(grid))
            )


@pytest.mark.parametrize("regime", ["independent", "shared"])
def test_the_line_fit_minimises_the_risk_over_c(regime: str) -> None:
    """If this fails, the null class's fit is not the minimiser of L_hat(c <x, y>) over |c| <= radius: checked
    against a dense grid of c (float64 brute force) and, at a small radius, on the boundary."""
    truth = CircleTruth(kappa=4.0, kappa0=0.0, tau=0.5)
    sample = draw_sample(truth, 30, 256, regime, torch.Generator().manual_seed(7))  # type: ignore[arg-type]
    grid = np.linspace(-4.0, 4.0, 801)
    risk = sample.risk(truth.tau)
    values = [risk.value(float(c) * LINE) for c in grid]
    best = float(grid[int(np.argmin(values))])
    fit = fit_on_line(sample, truth.tau, LINE, 4.0)
    assert fit.converged and not fit.constrained
    assert float(fit.theta @ LINE / (LINE @ LINE)) == pytest.approx(best, abs=0.011)
    edge = fit_on_line(sample, truth.tau, LINE, 0.5)
    assert edge.constrained and float(edge.theta @ LINE / (LINE @ LINE)) == pytest.approx(0.5)


def test_the_null_truth_has_the_null_class_ideal_score() -> None:
    """If this fails, s* of the null truth is not in the class s = c <x, y> (the control would be misspecified)."""
    truth = CircleTruth(kappa=4.0, kappa0=0.0, tau=0.5)
    ideal = truth.ideal_parameters()
    torch.testing.assert_close(ideal, 2.0 * LINE)
    assert truth.excess_risk(2.0 * LINE) == pytest.approx(0.0, abs=1e-12)
    assert truth.excess_risk(1.5 * LINE) > 0.0


def test_excess_risk_is_zero_at_s_star_and_matches_a_quadrature_of_l_minus_l_star() -> None:
    """If this fails, the closed-form tau E_x KL(p+_x || q_s,x) disagrees with L(s) - L* computed independently
    (a 2-D trapezoid rule over anchor and candidate angles with the model's own densities, L* = -tau E KL)."""
    assert TRUTH.excess_risk(TRUTH.ideal_parameters()) == pytest.approx(0.0, abs=1e-12)
    theta = TRUTH.ideal_parameters() + torch.tensor([0.3, -0.2, 0.1, 0.4, 0.0, -0.5], dtype=torch.float64)
    lifted = FAMILY.matrix(theta)
    model = TRUTH.model()
    angles = 2 * math.pi * torch.arange(400, dtype=torch.float64) / 400
    points = torch.stack([torch.cos(angles), torch.sin(angles)], dim=-1)
    anchor_weight = torch.exp(model.log_anchor_density(points)) / 400
    scores = (points @ lifted[:2] + lifted[2]) @ points.T  # s(x_a, y_b) = x^T W y + b^T y
    negative_weight = torch.exp(model.log_negative_density(points)) / 400
    log_partition = torch.logsumexp(scores / TRUTH.tau + torch.log(negative_weight), dim=1)
    positive_weight = torch.exp(model.log_positive_density(points[:, None, :], points[None, :, :])) / 400
    risk = (anchor_weight * (TRUTH.tau * log_partition - (positive_weight * scores).sum(dim=1))).sum()
    optimal = -TRUTH.tau * model.mean_kl()
    assert TRUTH.excess_risk(theta) == pytest.approx(float(risk) - optimal, rel=1e-9)


@pytest.mark.parametrize(("m", "radius"), [(64, 6.0), (1, 1.0)])
def test_ball_fit_meets_the_kkt_conditions(m: int, radius: float) -> None:
    """If this fails, the projected Newton fit is not the minimiser over the ball: stationarity
    grad + lam theta = 0 with lam >= 0, |theta| <= radius, and lam = 0 unless the ball binds."""
    sample: Sample = draw_sample(TRUTH, 40, m, "independent", torch.Generator().manual_seed(5))
    fit = fit_in_ball(sample, TRUTH.tau, radius)
    grad = sample.risk(TRUTH.tau).derivatives(fit.theta).gradient
    assert fit.converged and fit.multiplier >= 0.0
    assert float(fit.theta.norm()) <= radius * (1 + 1e-9)
    assert float((grad + fit.multiplier * fit.theta).norm()) <= 1e-6
    assert fit.constrained == (m == 1)
    if fit.constrained:
        assert float(fit.theta.norm()) == pytest.approx(radius, rel=1e-8)
