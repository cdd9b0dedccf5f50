"""The m*(N) predictor of ``crl advise --mstar`` against closed forms (docs/advisor_mstar.md)."""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crl.advise import mstar
from crl.stats.saturation import censored_slope, line_prediction, passages_by_n

N_FULL = 16_000


def power_law_errors(
    slope: float, scale: float, *, seeds: int = 4, noise: float = 0.01
) -> dict[tuple[int, int], dict[int, float]]:
    """err(n, m) = P (1 + c_n / m) below the two largest m, P at them, c_n = scale (n / 1000)^slope; seeds spread
    by factors (1 + e_s) with sum e_s = 0, so every seed mean is exact. The relative gap is c_n / m, log-linear in
    log m, so m_q = c_n / q exactly while c_n / q is below the third-largest grid m, and its band average is
    c_n / (geometric centre of the band) = 20 c_n."""
    plateau = 0.3
    spread = noise * np.linspace(-1.0, 1.0, seeds)
    errors: dict[tuple[int, int], dict[int, float]] = {}
    for n in mstar.mstar_ns(N_FULL):
        c_n = scale * (n / 1000) ** slope
        grid = mstar.m_grid(n)
        for j, m in enumerate(grid):
            gap = 0.0 if j >= len(grid) - 2 else c_n / m
            errors[(n, m)] = {s: plateau * (1.0 + gap * (1.0 + spread[s])) for s in range(seeds)}
    return errors


def test_the_pilot_grid_is_the_registered_one() -> None:
    """If this fails, the pilot trains other cells than docs/advisor_mstar.md registers."""
    assert mstar.mstar_ns(16_000) == (1000, 2000, 4000)
    assert mstar.m_grid(1000) == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000)
    assert mstar.m_grid(1024) == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
    with pytest.raises(ValueError, match=r"n_train"):
        mstar.mstar_ns(400)


def test_a_power_law_m_star_is_recovered_exactly() -> None:
    """If this fails, m_band, its slope or the line to N, 2N and 4N are not the closed form 20 c_n, b and
    20 scale (x / 1000)^b."""
    slope, scale = 0.7, 2.0
    prediction = mstar.predict_mstar(power_law_errors(slope, scale), N_FULL)
    for pilot in prediction.pilots:
        assert pilot.m_band.value == pytest.approx(20 * scale * (pilot.n / 1000) ** slope, rel=1e-9)
        assert pilot.fixed[0.05].value == pytest.approx(pilot.m_band.value, rel=1e-9)
        assert pilot.fixed[0.01].value == pytest.approx(5 * pilot.m_band.value, rel=1e-9)
    assert prediction.slope.value == pytest.approx(slope, abs=1e-9)
    for n, interval in prediction.at.items():
        assert interval.value == pytest.approx(20 * scale * (n / 1000) ** slope, rel=1e-9)
        assert interval.low < interval.value < interval.high
        assert interval.censoring == ""
    assert prediction.growth_per_doubling().value == pytest.approx(2**slope)


def test_the_growth_reversed_control_predicts_the_mirror_slope() -> None:
    """If this fails, the registered negative control does not reverse the growth it must get wrong."""
    errors = power_law_errors(0.7, 2.0)
    control = mstar.predict_mstar(errors, N_FULL, reverse_growth=True)
    assert control.slope.value == pytest.approx(-0.7, abs=1e-9)
    truth = 20 * 2.0 * 16**0.7
    assert control.at[N_FULL].value < truth / 2


def test_a_pilot_that_never_saturates_predicts_nothing() -> None:
    """If this fails, a pilot whose error still falls at m = n gives m* finite bounds: each pilot n is only a lower
    bound, and the line through lower bounds at three n bounds neither end of its extrapolation to N."""
    errors = {
        (n, m): {s: (1.0 + 0.01 * s) / m for s in range(4)}
        for n in mstar.mstar_ns(N_FULL)
        for m in mstar.m_grid(n)
    }
    prediction = mstar.predict_mstar(errors, N_FULL)
    assert all(p.m_band.censoring == "right-censored" for p in prediction.pilots)
    assert math.isinf(prediction.at[N_FULL].high) and prediction.at[N_FULL].low == 0.0
    assert prediction.at[N_FULL].censoring == "censored on both sides"


def test_too_few_seeds_name_the_option() -> None:
    """If this fails, a two-seed pilot gives a traceback or an interval on one degree of freedom."""
    with pytest.raises(ValueError, match="--seeds"):
        mstar.predict_mstar(power_law_errors(0.5, 2.0, seeds=2), N_FULL)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-3.0, 3.0), min_size=3, max_size=6),
    st.floats(0.0, 12.0),
)
def test_the_line_equals_a_float64_least_squares_fit(values: list[float], log_x: float) -> None:
    """If this fails, line_prediction is not the least-squares line of log m on log n read at log x."""
    log_n = np.log(1000.0 * 2.0 ** np.arange(len(values)))
    passages = passages_by_n(
        [[1.0, 2.0, 4.0]] * len(values),
        [np.ones((3, 3))] * len(values),
        np.full((1, 3), 1 / 3),
        0.05,
    )
    log_m = np.asarray(values)[None, :]
    found = line_prediction(
        log_n, type(passages)(log_m, np.zeros_like(passages.censor), passages.plateau), log_x
    )
    slope, intercept = np.polyfit(log_n, values, 1)
    assert found.point[0] == pytest.approx(intercept + slope * log_x, abs=1e-9)
    assert censored_slope(log_n, log_m, np.zeros((1, len(values)), dtype=np.int64)).point[0] == pytest.approx(
        slope, abs=1e-9
    )


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-3.0, 3.0), min_size=3, max_size=6),
    st.floats(0.0, 12.0),
    st.sampled_from([0.0, 0.5, 1.0, 0.3]),
    st.booleans(),
)
def test_a_share_of_the_line_is_the_weighted_log_mean_of_the_line_and_the_largest_ns_point(
    values: list[float], log_x: float, reach: float, reverse: bool
) -> None:
    """If this fails, check 5's predictor (reach 1/2) is not the geometric mean of check 2's line and the no-growth
    answer at the largest log n, in either pairing of the n (the control reverses it)."""
    log_n = np.log(1000.0 * 2.0 ** np.arange(len(values)))[:: -1 if reverse else 1]
    log_m = np.asarray(values)[None, :]
    passages = passages_by_n(
        [[1.0, 2.0, 4.0]] * len(values), [np.ones((3, 3))] * len(values), np.full((1, 3), 1 / 3), 0.05
    )
    found = line_prediction(
        log_n, type(passages)(log_m, np.zeros_like(passages.censor), passages.plateau), log_x, reach
    )
    slope, intercept = np.polyfit(log_n, values, 1)
    anchor = values[int(np.argmax(log_n))]
    assert found.point[0] == pytest.approx(
        (1 - reach) * anchor + reach * (intercept + slope * log_x), abs=1e-9
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.floats(-3.0, 3.0), min_size=3, max_size=3), min_size=4, max_size=6))
def test_half_the_slope_moves_no_more_under_deleting_a_seed_than_the_line_or_the_anchor(
    rows: list[list[float]],
) -> None:
    """If this fails, check 5's predictor (reach 1/2) has a larger delete-one-seed move than both answers it averages:
    rows are jackknife rows (row 0 the data), and its move is bounded by the larger of theirs."""
    log_n = np.log(np.array([500.0, 1000.0, 2000.0]))
    log_m = np.asarray(rows)
    passages = passages_by_n([[1.0, 2.0, 4.0]] * 3, [np.ones((3, 3))] * 3, np.full((1, 3), 1 / 3), 0.05)
    rowed = type(passages)(log_m, np.zeros(log_m.shape, dtype=np.int64), np.zeros(log_m.shape))
    x = math.log(16_000.0)
    half, line, flat = (line_prediction(log_n, rowed, x, reach).point for reach in (0.5, 1.0, 0.0))
    moves = [np.max(np.abs(p[1:] - p[0])) for p in (half, line, flat)]
    assert moves[0] <= max(moves[1], moves[2]) + 1e-9


def test_the_pilot_moves_down_a_doubling_until_it_costs_at_most_10_percent() -> None:
    """If this fails, a pilot dearer than 10% of the grid at N runs, or a cheap enough one is refused."""
    shares = {(1000, 2000, 4000): 0.153, (500, 1000, 2000): 0.04}
    assert mstar.choose_pilot(16_000, shares.__getitem__) == ((500, 1000, 2000), 0.04)
    assert mstar.choose_pilot(16_000, lambda ns: 0.08) == ((1000, 2000, 4000), 0.08)
    with pytest.raises(ValueError, match="more than 10%"):
        mstar.choose_pilot(16_000, lambda ns: 0.2)
    with pytest.raises(ValueError, match="n_train"):
        mstar.choose_pilot(400, lambda ns: 0.01)


def test_the_answer_states_the_batch_for_shared_and_the_count_per_anchor_otherwise() -> None:
    """If this fails, the answer does not say m* in the user's words for their regime."""
    prediction = mstar.predict_mstar(power_law_errors(0.7, 2.0), N_FULL)
    shared = mstar.answer_lines(prediction, shared=True, scope="a linear head")
    per_anchor = mstar.answer_lines(prediction, shared=False, scope="a linear head")
    assert "batch" in shared[0] and "16,000" in shared[0]
    assert "per anchor" in per_anchor[0]
    assert any("multiplies m* by 1.62" in line for line in shared)
    trust = next(line for line in shared if line.startswith("How far to trust it"))
    assert "seed noise" in trust and f"--mstar-truth {N_FULL}" in trust


def test_an_undetermined_prediction_is_not_stated_as_a_number() -> None:
    """If this fails, the answer states a count the pilot did not pin down (GCIDE's SSCRL pilot at N = 8,000 gave
    'at most 220,000 [0, 159,000,000]')."""
    assert mstar.determined(mstar.Interval(1_841.0, 691.0, math.inf, ""))
    assert mstar.span(mstar.Interval(1_841.0, 691.0, math.inf, "")) == pytest.approx((1_841 / 691) ** 2)
    assert not mstar.determined(mstar.Interval(220_000.0, 0.0, 1.59e8, "left-censored"))
    assert not mstar.determined(mstar.Interval(10.0, 0.0, math.inf, ""))
    assert not mstar.determined(mstar.Interval(100.0, 5.0, 600.0, ""))
    assert mstar.determined(mstar.Interval(100.0, 20.0, 600.0, ""))
    prediction = mstar.predict_mstar(power_law_errors(0.7, 2.0), N_FULL)
    wide = dataclasses.replace(prediction, at={N_FULL: mstar.Interval(300.0, 1.0, 5_000.0, "")})
    line = mstar.answer_lines(wide, shared=True, scope="a linear head")[0]
    assert "not determined by this pilot" in line and "300" not in line.split("(")[0]


def test_the_plateau_is_the_seed_mean_at_the_two_largest_m() -> None:
    errors = {
        (64, 1): {0: 0.9, 1: 0.7},
        (64, 32): {0: 0.5, 1: 0.3},
        (64, 64): {0: 0.2, 1: 0.4},
        (32, 32): {0: 9.0},
    }
    assert mstar.plateau_error(errors, 64) == pytest.approx((0.5 + 0.3 + 0.2 + 0.4) / 4)
