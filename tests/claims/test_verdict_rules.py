"""The three-outcome rules of docs/theory.md section 7: equivalence, upper bound, lower bound; bound slack.

If these fail, a rule could pass a wide interval (a rule that cannot fail), fail a precise true rate, or let an
uninformative bound check look like evidence.
"""

import numpy as np
import pytest

from crl.claims.verdict import (
    Statistic,
    Verdict,
    slack_label,
    verdict_above,
    verdict_at_most,
    verdict_equivalent,
)
from crl.stats import bound_violations


def _ci(low: float, high: float) -> Statistic:
    return Statistic("slope", (low + high) / 2, low, high, 0.999)


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (-1.05, -0.95, Verdict.PASS),
        (-1.1, -0.9, Verdict.PASS),
        (-1.3, -0.95, Verdict.INCONCLUSIVE),
        (-2.0, 0.0, Verdict.INCONCLUSIVE),
        (-0.6, -0.4, Verdict.FAIL),
        (-1.5, -1.2, Verdict.FAIL),
    ],
)
def test_equivalence(low: float, high: float, expected: Verdict) -> None:
    assert verdict_equivalent(_ci(low, high), -1.0, 0.1) == expected


def test_a_precise_true_rate_keeps_passing_and_a_wide_interval_never_passes() -> None:
    for half in (0.05, 0.01, 1e-6):
        assert verdict_equivalent(_ci(-1.0 - half, -1.0 + half), -1.0) == Verdict.PASS
    assert verdict_equivalent(_ci(-5.0, 3.0), -1.0) == Verdict.INCONCLUSIVE


@pytest.mark.parametrize("delta", [0.0, -0.1, float("inf"), True])
def test_equivalence_needs_a_positive_margin(delta: float) -> None:
    with pytest.raises(ValueError, match="delta="):
        verdict_equivalent(_ci(-1.0, -1.0), -1.0, delta)


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [(-1.2, -0.95, Verdict.PASS), (-1.0, -0.85, Verdict.INCONCLUSIVE), (-0.8, -0.5, Verdict.FAIL)],
)
def test_upper_bound(low: float, high: float, expected: Verdict) -> None:
    assert verdict_at_most(_ci(low, high), -0.9) == expected


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [(1.1, 1.5, Verdict.PASS), (0.9, 1.2, Verdict.INCONCLUSIVE), (0.5, 0.8, Verdict.FAIL)],
)
def test_lower_bound(low: float, high: float, expected: Verdict) -> None:
    assert verdict_above(_ci(low, high), 1.0) == expected


def test_slack_is_the_largest_ratio_to_a_finite_positive_bound() -> None:
    count = bound_violations(np.array([0.01, 0.3, 5.0]), np.array([1.0, 1.0, np.inf]))
    assert count.slack == pytest.approx(0.3) and count.informative and count.holds
    assert slack_label(count) == "slack 0.3"


def test_a_bound_with_huge_slack_is_labelled_not_informative() -> None:
    count = bound_violations(np.array([1e-4, 2e-3]), np.array([1.0, 1.0]))
    assert count.slack == pytest.approx(2e-3) and not count.informative
    assert slack_label(count).endswith("holds, not informative")
    assert "not informative" in Statistic.from_violations("violations", count).detail
