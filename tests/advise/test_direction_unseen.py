"""Check 6 (studies/advisor_direction_unseen.py): the points, the answer as crl advise gives it, the stated p_m,
the Brier targets against a brute-force loop, and the flipped control that makes a non-committal answer
uninformative."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from crl.advise.answer import Q, recommendation_of
from crl.advise.local import local_estimate, pilot_points, truth_points
from crl.advise.reliability import p_right
from studies import advisor_direction_unseen as check6


def _errors(n: int, m: int, level: dict[tuple[int, int], float], spread: float = 0.002) -> check6.Errors:
    """Four seed runs per cell: the cell's level plus fixed offsets (so each cell has a standard error)."""
    offsets = (-1.5 * spread, -0.5 * spread, 0.5 * spread, 1.5 * spread)
    cells = (*pilot_points(n, m), *truth_points(n, m), (n, m))
    return {cell: [level.get(cell, 0.5) + o for o in offsets] for cell in cells}


def test_point_ms_are_the_powers_of_two_from_4_to_half_n() -> None:
    """At N = 8,000: 4 ... 2,048 (10 points); at 2,000: 4 ... 512 (8); at 16,000: 4 ... 4,096 (11)."""
    assert check6.point_ms(8000) == tuple(2**k for k in range(2, 12))
    assert len(check6.point_ms(2000)) == 8
    assert check6.point_ms(16000)[-1] == 4096 and len(check6.point_ms(16000)) == 11


def test_a_point_is_crl_advises_answer_and_the_welch_truth_in_float64() -> None:
    """D_hat, the interval at q, the recommendation and p_m are the product's; the measured D and its Welch interval
    agree with scipy's Welch t-test on the two truth cells."""
    n, m = 8000, 64
    level = {(n, m // 2): 0.40, (n // 2, m): 0.45, (n // 2, m // 2): 0.50, (2 * n, m): 0.38, (n, 2 * m): 0.36}
    errors = _errors(n, m, level)
    errors[(2 * n, m)] = [0.37, 0.38, 0.385, 0.39]
    row = check6.row_at(errors, n, m)
    assert row is not None
    estimate = local_estimate(errors, n, m)
    assert row.d_hat == pytest.approx(0.40 - 0.45)
    assert (row.low, row.high) == pytest.approx(estimate.interval(Q))
    assert row.recommendation == recommendation_of(estimate) == "n"
    assert row.p_m == pytest.approx(1 - p_right(abs(row.d_hat) / estimate.scale))
    more_data, more_negatives = (np.asarray(errors[c], dtype=np.float64) for c in truth_points(n, m))
    assert row.measured == pytest.approx(more_data.mean() - more_negatives.mean())
    welch = stats.ttest_ind(more_data, more_negatives, equal_var=False)
    interval = welch.confidence_interval(0.95)
    assert (row.measured_low, row.measured_high) == pytest.approx((interval.low, interval.high))
    assert row.decisive and not row.both_raised


def test_neither_states_one_half_and_its_next_step_is_read_at_n_m() -> None:
    """Both gains <= 0 at the base: "neither", p_m = 1/2; both_raised reads err(2N, M), err(N, 2M) against err(N, M)."""
    n, m = 4000, 16
    level = {(n, m // 2): 0.55, (n // 2, m): 0.52, (n // 2, m // 2): 0.50, (2 * n, m): 0.62, (n, 2 * m): 0.61}
    row = check6.row_at(_errors(n, m, level), n, m)
    assert row is not None and row.recommendation == "neither"
    assert row.p_m == 0.5
    assert row.both_raised


def test_a_point_with_a_missing_cell_is_not_measured() -> None:
    """A point whose cell lacks its runs gives None (reported as not measured, never filled)."""
    n, m = 4000, 16
    errors = _errors(n, m, {})
    del errors[(2 * n, m)]
    assert check6.row_at(errors, n, m) is None


def _row(
    d_hat: float, measured: float, chance: float, recommendation: str = "", width: float = 0.01
) -> check6.Row:
    """A row with the given D_hat, measured D (decisive: a tight interval), stated chance and recommendation."""
    recommendation = recommendation or ("m" if d_hat > 0 else "n")
    return check6.Row(
        8000,
        64,
        d_hat,
        d_hat - 0.05,
        d_hat + 0.05,
        recommendation,
        1.0,
        chance,
        measured,
        measured - width,
        measured + width,
        False,
    )


def test_brier_scores_equal_a_brute_force_loop() -> None:
    """The stated, constant and flipped Brier scores are mean (p - y)^2 over the decisive points, in a plain loop."""
    rows = [
        _row(0.02, 0.03, 0.9),
        _row(-0.02, -0.03, 0.8),
        _row(0.01, -0.03, 0.6),
        _row(0.0, 0.001, 0.5, width=0.01),
    ]
    score = check6.score_group(rows, 0, 0.216, 0.973)
    decisive = rows[:3]
    assert score.decisive == 3 and score.points == 4
    y = [1.0 if r.measured > 0 else 0.0 for r in decisive]
    p = [r.p_m for r in decisive]
    assert score.brier_stated == pytest.approx(sum((a - b) ** 2 for a, b in zip(p, y, strict=True)) / 3)
    assert score.brier_always_m == pytest.approx(sum((1 - b) ** 2 for b in y) / 3)
    assert score.brier_always_n == pytest.approx(sum(b**2 for b in y) / 3)
    assert score.brier_flipped == pytest.approx(sum((1 - a - b) ** 2 for a, b in zip(p, y, strict=True)) / 3)
    assert score.brier_climatological == pytest.approx(sum((0.216 - b) ** 2 for b in y) / 3)
    assert score.right == 2 and score.always_m_right == 1


def test_a_confident_right_answer_passes_and_its_flipped_control_fails() -> None:
    """Right at 11 of 12 decisive points with chances near 1: Brier below both constants; the flipped answer fails."""
    rows = [_row(0.02, 0.03, 0.99) for _ in range(6)] + [_row(-0.02, -0.03, 0.99) for _ in range(5)]
    rows.append(_row(0.02, -0.03, 0.7))
    score = check6.score_group(rows, 0, 0.216, 0.973)
    assert score.brier_judged and score.brier_met and score.control_fails
    assert check6._brier_verdict(score) == "met"


def test_a_confident_wrong_answer_fails_target_1() -> None:
    """Right at 6 of 12 with chances near 1, against always m right at 10 of 12: FAILED."""
    rows = [_row(0.02, 0.03, 0.99) for _ in range(6)] + [_row(0.02, -0.03, 0.99) for _ in range(2)]
    rows += [_row(-0.02, 0.03, 0.99) for _ in range(4)]
    score = check6.score_group(rows, 0, 0.216, 0.973)
    assert score.brier_judged and not score.brier_met
    assert check6._brier_verdict(score) == "**FAILED**"


def test_an_answer_that_says_neither_everywhere_is_not_informative() -> None:
    """p_m = 1/2 at every point scores 0.25 and beats constants on an even mix, but its flip scores the same: the
    control does not fail, so target 1 is reported as not informative, never met."""
    rows = [_row(0.02, 0.03, 0.99, "neither") for _ in range(6)] + [
        _row(-0.02, -0.03, 0.99, "neither") for _ in range(6)
    ]
    score = check6.score_group(rows, 0, 0.216, 0.973)
    assert score.brier_stated == pytest.approx(0.25) and score.brier_met
    assert not score.control_fails
    assert check6._brier_verdict(score).startswith("not informative")


@pytest.mark.parametrize(
    ("decisive", "brier_judged", "direction_judged"),
    [(9, False, False), (10, True, False), (14, True, False), (15, True, True)],
)
def test_target_1_is_judged_from_10_decisive_points_and_target_2_from_15(
    decisive: int, brier_judged: bool, direction_judged: bool
) -> None:
    """The thresholds at their edges; an undecided point (its interval holds 0) does not count."""
    rows = [_row(0.02, 0.03, 0.99) for _ in range(decisive)] + [_row(0.02, 0.0, 0.99, width=0.01)]
    score = check6.score_group(rows, 0, 0.216, 0.973)
    assert score.decisive == decisive and score.points == decisive + 1
    assert score.brier_judged is brier_judged and score.direction_judged is direction_judged
    assert (check6._brier_verdict(score) == "inconclusive") is not brier_judged


def test_target_2_needs_80_percent_and_strictly_more_than_the_better_constant() -> None:
    """12 right of 15 (80%) against a constant right at 11 meets it; a tie with the constant, or 11 of 15, does not."""
    right = [_row(0.02, 0.03, 0.99) for _ in range(8)] + [_row(-0.02, -0.03, 0.99) for _ in range(4)]
    wrong = [_row(-0.02, 0.03, 0.99) for _ in range(3)]
    score = check6.score_group(right + wrong, 0, 0.216, 0.973)
    assert (score.right, score.decisive, score.always_m_right, score.better_constant) == (12, 15, 11, 11)
    assert score.direction_met
    tie = check6.score_group([_row(-0.02, -0.03, 0.99) for _ in range(15)], 0, 0.216, 0.973)
    assert tie.right == tie.better_constant == 15 and not tie.direction_met
    short = check6.score_group(right[:-1] + wrong + [_row(0.02, -0.03, 0.99)], 0, 0.216, 0.973)
    assert short.right == 11 and not short.direction_met


def test_target_3_counts_every_point_not_only_the_decisive() -> None:
    """Coverage: the measured D inside [low, high] at >= 80% of all points (4 of 5 meets, 3 of 5 fails)."""
    inside = [_row(0.02, 0.03, 0.99) for _ in range(3)] + [_row(0.02, 0.0, 0.99, width=0.01)]
    outside = _row(0.02, 0.5, 0.99)
    assert check6.score_group([*inside, outside], 0, 0.216, 0.973).coverage_met
    assert not check6.score_group([*inside[1:], outside, outside], 0, 0.216, 0.973).coverage_met


def test_the_bootstrap_interval_is_paired_with_the_better_constant() -> None:
    """The interval is of the per-point differences (p - y)^2 - (c - y)^2 with c the better constant, so an answer that
    equals that constant at every point gives [0, 0]."""
    rows = [_row(-0.02, -0.03, 1.0) for _ in range(8)] + [_row(-0.02, 0.03, 1.0) for _ in range(3)]
    score = check6.score_group(rows, 0, 0.216, 0.973)
    assert score.brier_stated == pytest.approx(score.brier_always_n)
    assert score.difference_interval == pytest.approx((0.0, 0.0))


def test_bootstrap_interval_is_seeded_and_exact_for_a_constant() -> None:
    """A constant difference gives itself at both ends; the same seed gives the same interval."""
    assert check6.bootstrap_interval([0.1] * 7) == pytest.approx((0.1, 0.1))
    values = [0.3, -0.2, 0.05, 0.0, -0.1]
    first = check6.bootstrap_interval(values, draws=500)
    assert first == check6.bootstrap_interval(values, draws=500)
    assert first[0] <= np.mean(values) <= first[1]


def test_merged_errors_refuse_a_cell_in_two_folders_and_skip_short_cells(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two folders of one regime merge; a cell held twice is refused by name; a cell lacking a seed is left out."""
    folders = {
        "a": SimpleNamespace(
            folder=Path("a"), regime="shared", errors={(2000, 4): {100: 0.1, 101: 0.2, 102: 0.3, 103: 0.4}}
        ),
        "b": SimpleNamespace(folder=Path("b"), regime="shared", errors={(4000, 4): {100: 0.1, 101: 0.2}}),
        "c": SimpleNamespace(folder=Path("c"), regime="shared", errors={(2000, 4): {100: 0.1}}),
        "d": SimpleNamespace(folder=Path("d"), regime="independent", errors={}),
    }
    monkeypatch.setattr(check6, "load_truth", lambda folder: folders[str(folder)])
    assert check6.merged_errors([Path("a"), Path("b")]) == {(2000, 4): [0.1, 0.2, 0.3, 0.4]}
    with pytest.raises(ValueError, match=r"\(2000, 4\).*second folder"):
        check6.merged_errors([Path("a"), Path("c")])
    with pytest.raises(ValueError, match="more than one regime"):
        check6.merged_errors([Path("a"), Path("d")])


def test_the_groups_are_the_registered_96_points() -> None:
    """GCIDE: N = 8,000 and 16,000 (21 per regime); CJK: 2,000, 4,000, 8,000 (27 per regime)."""
    counts = [sum(len(check6.point_ms(n)) for n in group.ns) for group in check6.GROUPS]
    assert counts == [21, 21, 27, 27]


def test_a_perfect_constant_fails_target_1_by_rule_and_says_why() -> None:
    """Every decisive point favours n: always n scores 0, so even an answer right everywhere fails target 1 (the
    registered strict comparison); the verdict names that cause."""
    rows = [_row(-0.02, -0.03, 0.999) for _ in range(12)]
    score = check6.score_group(rows, 0, 0.216, 0.973)
    assert score.right == 12 and score.brier_always_n == 0.0 and score.constant_perfect
    assert not score.brier_met
    assert check6._brier_verdict(score).startswith("**FAILED** (a constant is right at every decisive point")
