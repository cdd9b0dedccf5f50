"""The local doubling pilot: its cells, D_hat and the drift against a hand computation, q's calibration against a
brute-force search (the answer's sentence: test_answer.py)."""

import math
import statistics

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from crl.advise.local import (
    LocalEstimate,
    calibrate_q,
    cell_mean,
    check_point,
    local_estimate,
    measured_difference,
    pilot_points,
    required_q,
    truth_points,
)


def _errors(n: int, m: int) -> dict[tuple[int, int], list[float]]:
    """Four runs per cell of an error that falls with n and m, plus a seed pattern that differs by cell."""
    cells = (*pilot_points(n, m), *truth_points(n, m))
    return {
        (a, b): [1 / math.log(a) + 1 / math.sqrt(b) + 0.001 * ((a + 3 * b + s) % 5) for s in range(4)]
        for a, b in cells
    }


def test_the_cells_are_one_and_two_halvings_back() -> None:
    assert pilot_points(16000, 160) == ((16000, 80), (8000, 160), (8000, 80), (8000, 40), (4000, 80))
    assert truth_points(16000, 160) == ((32000, 160), (16000, 320))


@pytest.mark.parametrize(
    ("n", "m", "message"),
    [
        (16000, 162, r"m = 162: .* multiple of 4"),
        (16000, 0, r"m = 0: .* multiple of 4 and >= 4"),
        (16002, 160, r"n = 16002: .* multiple of 4"),
        (200, 8, r"n = 200: .* N/4 >= 64"),
        (1000, 504, r"m = 504 > n/2 = 500"),
    ],
)
def test_a_point_the_pilot_cannot_halve_is_named_with_the_fix(n: int, m: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_point(n, m)


def test_estimate_against_a_hand_computation() -> None:
    errors = _errors(16000, 160)
    estimate = local_estimate(errors, 16000, 160)
    mean = {cell: statistics.fmean(values) for cell, values in errors.items()}
    assert estimate.d_hat == pytest.approx(mean[(16000, 80)] - mean[(8000, 160)])
    assert estimate.d_back == pytest.approx(mean[(8000, 40)] - mean[(4000, 80)])
    assert estimate.gain_m == pytest.approx(mean[(8000, 80)] - mean[(8000, 160)])
    assert estimate.gain_n == pytest.approx(mean[(8000, 80)] - mean[(16000, 80)])
    assert estimate.gain_m - estimate.gain_n == pytest.approx(estimate.d_hat)
    assert estimate.se_base == pytest.approx(statistics.stdev(errors[(8000, 80)]) / 2)
    se_a = statistics.stdev(errors[(16000, 80)]) / 2
    se_b = statistics.stdev(errors[(8000, 160)]) / 2
    assert (estimate.se_a, estimate.se_b) == pytest.approx((se_a, se_b))
    drift = abs(estimate.d_hat - estimate.d_back)
    assert estimate.scale == pytest.approx(math.sqrt(se_a**2 + se_b**2 + drift**2))
    assert estimate.interval(2.0) == pytest.approx(
        (estimate.d_hat - 2 * estimate.scale, estimate.d_hat + 2 * estimate.scale)
    )


def test_a_missing_cell_or_a_single_run_is_refused() -> None:
    errors = _errors(16000, 160)
    del errors[(4000, 80)]
    with pytest.raises(KeyError, match=r"\(4000, 80\)"):
        local_estimate(errors, 16000, 160)
    with pytest.raises(ValueError, match="at least 2 per cell"):
        cell_mean([0.5])


def test_measured_difference_is_welchs_interval() -> None:
    """Against scipy's Welch t-test: the interval excludes 0 exactly when p < 0.05."""
    from scipy import stats

    errors = {(32000, 160): [0.30, 0.31, 0.29, 0.305], (16000, 320): [0.32, 0.33, 0.325, 0.335]}
    errors.update({cell: [0.5, 0.6] for cell in pilot_points(16000, 160)})
    measured = measured_difference(errors, 16000, 160)
    test = stats.ttest_ind(errors[(32000, 160)], errors[(16000, 320)], equal_var=False)
    assert measured.value == pytest.approx(statistics.fmean(errors[(32000, 160)]) - 0.3275)
    assert measured.decisive == (test.pvalue < 0.05)
    ci = test.confidence_interval(0.95)
    assert (measured.low, measured.high) == pytest.approx((ci.low, ci.high))


def _estimate(d_hat: float, scale: float) -> LocalEstimate:
    return LocalEstimate(
        n=16000,
        m=160,
        d_hat=d_hat,
        d_back=d_hat,
        se_a=scale,
        se_b=0.0,
        se_base=0.0,
        gain_m=0.0,
        gain_n=0.0,
    )


@given(
    points=st.lists(
        st.tuples(st.floats(-1, 1), st.floats(1e-3, 1), st.floats(-1, 1)), min_size=1, max_size=30
    ),
    coverage=st.sampled_from([0.5, 0.8, 0.9, 1.0]),
)
@example(points=[(0.0, 0.001, 1.0), (0.0, 0.0010000000000000002, 1.0)], coverage=0.8)
def test_calibrated_q_is_the_smallest_reaching_the_coverage(points: list, coverage: float) -> None:
    """Against a brute-force search over the candidate q (each point's own required q): the smallest candidate
    whose intervals hold at least the coverage. The reference's interval test carries a relative tolerance of
    1e-12, so a candidate within it of q counts as q (the example: required q 1000 and 999.9999999999998)."""
    estimates = [_estimate(d, s) for d, s, _ in points]
    truths = [t for _, _, t in points]
    q = calibrate_q(estimates, truths, coverage)

    def held(candidate: float) -> int:
        pairs = zip(estimates, truths, strict=True)
        return sum(abs(t - e.d_hat) <= candidate * e.scale * (1 + 1e-12) for e, t in pairs)

    candidates = sorted(required_q(e, t) for e, t in zip(estimates, truths, strict=True))
    brute = min(c for c in candidates if held(c) >= coverage * len(points) - 1e-9)
    assert brute <= q <= brute * (1 + 1e-12)


def test_required_q_at_a_zero_scale() -> None:
    assert required_q(_estimate(0.1, 0.0), 0.1) == 0.0
    assert required_q(_estimate(0.1, 0.0), 0.2) == math.inf
