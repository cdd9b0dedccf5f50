"""Tests of claims C1 and C2's building blocks, against closed forms and float64 references.

C1 and C2 are theorems of [A] for every s, so their verdicts test crl's estimators; these tests check the pieces
the verdicts rest on: C1's family and its part (b) count, C2's scores, bound, adversarial search and tau sweep.
"""

import math

import numpy as np
import pytest
import torch
from scipy import stats as scipy_stats

from crl.claims import Verdict, verdict_no_violations
from crl.claims._random_scores import (
    ADVERSARIAL_TIE,
    _merge_ties,
    adversarial_table,
    calibration_ratio,
    finite_point,
    ring_law,
    rotation_score,
    swapped_ideal_table,
)
from crl.claims.budget import part_level
from crl.claims.c01_fisher import CLAIM as C1
from crl.claims.c01_fisher import FAMILY_GRID, RHO, TAU, family_score, family_violations
from crl.claims.c02_calibration import CLAIM as C2
from crl.claims.c02_calibration import _sweep_point, sqrt_bound
from crl.risk import finite_auc, finite_optimal_auc, ideal_feature_score
from crl.synthetic import GaussianTwoTower, VMFUniform


def test_claims_declare_their_parts_and_what_they_test() -> None:
    """If this fails, C1/C2 lost the number of parts pre-registered in docs/claims (3 and 1) or their evidence."""
    assert (C1.parts, C2.parts) == (3, 1)
    assert "crl's estimators" in C1.evidence
    assert "tightness" in C2.evidence


# ---- C1 ------------------------------------------------------------------------------------------------------------


def test_family_contains_the_ideal_score() -> None:
    """If this fails, C1's family s_c does not contain s* at c = rho^2 (its argmin L would not be s*)."""
    truth = GaussianTwoTower(4, RHO)
    ideal = ideal_feature_score(truth, TAU)
    assert ideal is not None
    x, y = truth.sample(64, torch.Generator().manual_seed(0))
    member = family_score(RHO * RHO)
    assert torch.allclose(
        member(x[:, None, :], y[None, :, :]), ideal(x[:, None, :], y[None, :, :]), atol=1e-12
    )
    assert member.curvature == pytest.approx(ideal.curvature)


def _family(gain: float, se: float, at: float = 0.72) -> dict[str, object]:
    """A part (b) summary: argmin L at c = 0.36, E(c) - E(c_L) = ``gain`` at c = ``at`` (0 elsewhere)."""
    gains = [gain if c == at else 0.0 for c in FAMILY_GRID]
    return {"argmin_risk": 0.36, "auc_gain": gains, "auc_gain_se": [se] * len(FAMILY_GRID)}


def family_verdict(summary: dict[str, object], level: float) -> Verdict:
    """C1(b)'s verdict as C1.run forms it: PASS iff :func:`family_violations` counts none beyond MC error."""
    return verdict_no_violations(family_violations(summary, level))


@pytest.mark.parametrize("parts", [3, 1])
def test_family_rule_is_a_count_at_the_given_level(parts: int) -> None:
    """If this fails, C1(b) is not 'no E(c) - E(c_L) above k paired se', k Bonferroni over the 8 other c at the
    level it is given (the claim's per-part level, and the same for its control)."""
    level = part_level(parts)
    k = float(scipy_stats.norm.isf((1.0 - level) / (len(FAMILY_GRID) - 1)))
    se = 1e-3
    assert family_verdict(_family((k - 0.01) * se, se), level) is Verdict.PASS
    assert family_verdict(_family((k + 0.01) * se, se), level) is Verdict.FAIL
    count = family_violations(_family((k + 0.01) * se, se), level)
    assert (count.n, count.k, count.ci_level) == (len(FAMILY_GRID) - 1, pytest.approx(k), level)
    # c_L itself is not compared (its gain is 0 by construction), and an exact tie (se = 0) is no violation.
    assert family_verdict(_family(1.0, se, at=0.36), level) is Verdict.PASS
    assert family_verdict(_family(0.0, 0.0), level) is Verdict.PASS


# ---- C2: scores and bound --------------------------------------------------------------------------------------------


def test_ring_swap_loses_auc_by_the_swapped_pairs_mass() -> None:
    """If this fails, C2's rank swap is not a swap of each anchor's two best candidates (E* - E formula)."""
    kappa, tau = 0.3, 0.5
    law = ring_law(kappa)
    table = swapped_ideal_table(law, tau)
    ratios = torch.exp(law.log_ratio())
    k = law.anchor_probs.numel()
    # Anchor a's candidates: a itself (ratio r_0) and its two neighbours (both r_1 < r_0, tied); p+ = p r, p- = p.
    # After the swap, a+1 scores at r_0's level and a at r_1's: the pair (a, a+1) flips, -p^2 (r_0 - r_1); the
    # pair (a, a-1) becomes a tie, -p^2 (r_0 - r_1)/2; the changes of (a+1, a-1) cancel. In all 1.5 p^2 (r_0 - r_1).
    expected = 1.5 * float((ratios[0, 0] - ratios[0, 1]) / k / k)
    assert finite_optimal_auc(law) - finite_auc(law, table) == pytest.approx(expected, rel=1e-10)
    assert torch.equal(table.sort(dim=1).values, (tau * law.log_ratio()).sort(dim=1).values)


def test_rotation_score_is_the_ideal_score_at_zero_angle() -> None:
    """If this fails, C2's rotation series is not anchored at s* (theta = 0)."""
    truth = VMFUniform(3, 4.0)
    x, y = truth.sample(16, torch.Generator().manual_seed(1))
    ideal = ideal_feature_score(truth, 0.5)
    assert ideal is not None
    assert torch.allclose(rotation_score(0.0, 0.5)(x, y), ideal(x, y), atol=1e-12)


def test_sqrt_bound_and_its_one_sided_error() -> None:
    """If this fails, C2's bound sqrt(2x/tau) or its standard error is wrong (also at x <= 0)."""
    bound, se = sqrt_bound(np.array([0.5, -1e-3, 0.0]), np.array([0.0, 2e-3, 0.0]), np.array([1.0, 0.5, 2.0]))
    assert bound == pytest.approx([1.0, 0.0, 0.0])
    assert se == pytest.approx([0.0, math.sqrt(2 * 1e-3 / 0.5), 0.0])


@pytest.mark.parametrize("kappa", [1e-3, 0.3, 3.0])
def test_the_ratio_of_a_tau_proportional_score_does_not_depend_on_tau(kappa: float) -> None:
    """If this fails, running C2's tau-proportional series at tau = 0.5 only loses information: for s = tau f,
    (L - L*)/tau and E* - E are tau-free, so (E* - E)/sqrt(2x/tau) is the same at every tau."""
    law = ring_law(kappa)
    ratios = []
    for tau in (0.1, 0.5, 2.0):
        point = finite_point(law, swapped_ideal_table(law, tau), tau)
        ratios.append(point["gap"] / math.sqrt(2.0 * point["excess"] / tau))
    assert ratios == pytest.approx([ratios[0]] * 3, rel=1e-9)


def _ring_sweep_reference(tau: float) -> tuple[float, float]:
    """(x, y) of the swapped ring table of kappa = 1 (built at tau = 1) at temperature tau, in float64 loops.

    x = tau sum_i pi_i KL(p+_i || q_i), q_ij = p-_j exp(s_ij/tau)/Z_i; y = 1.5 p^2 (r_0 - r_1) with p = 1/4
    (exact ties; see test_ring_swap_loses_auc_by_the_swapped_pairs_mass). Cosines are exact: 1, 0, -1, 0.
    """
    cosines = [1.0, 0.0, -1.0, 0.0]
    weights = [math.exp(c) for c in cosines]
    plus = [w / sum(weights) for w in weights]
    log_ratio = [math.log(4.0 * q) for q in plus]
    scores = [
        log_ratio[1],
        log_ratio[0],
        log_ratio[2],
        log_ratio[3],
    ]  # anchor 0: its own and offset-1 swapped
    z = sum(0.25 * math.exp(s / tau) for s in scores)
    kl = sum(
        p * (math.log(p) - math.log(0.25 * math.exp(s / tau) / z)) for p, s in zip(plus, scores, strict=True)
    )
    return tau * kl, 1.5 / 16.0 * 4.0 * (plus[0] - plus[1])


@pytest.mark.parametrize("tau", [0.05, 1.0, 20.0])
def test_tau_sweep_ring_point_matches_the_float64_reference(tau: float) -> None:
    """If this fails, C2's fixed-score tau sweep (ring) does not compute L - L* and E* - E of one fixed table."""
    point = _sweep_point("ring", tau, 0, torch.Generator().manual_seed(0))
    x, y = _ring_sweep_reference(tau)
    assert point["excess"] == pytest.approx(x, rel=1e-10)
    assert point["gap"] == pytest.approx(y, rel=1e-10)
    assert point["excess_se"] == point["gap_se"] == 0.0


# ---- C2: the adversarial search ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b", "delta"), [(0.5, 0.6, 1e-3), (0.2, 0.7, 0.5), (0.9, 0.95, 2.0)])
def test_calibration_ratio_matches_the_two_item_closed_form(a: float, b: float, delta: float) -> None:
    """If this fails, the search's float64 ratio is wrong: with p- = (a, 1 - a), p+ = (b, 1 - b), b > a, and the
    ranking inverted (t = (0, delta)), E* - E = b - a and the bound is sqrt(2 KL(p+ || q_t))."""
    params = np.log([b, 1 - b, a, 1 - a, 1.0, math.exp(delta)])
    z = a + (1 - a) * math.exp(delta)
    q = (a / z, (1 - a) * math.exp(delta) / z)
    kl = b * math.log(b / q[0]) + (1 - b) * math.log((1 - b) / q[1])
    assert calibration_ratio(params, 2) == pytest.approx((b - a) / math.sqrt(2 * kl), rel=1e-12)
    assert calibration_ratio(np.log([b, 1 - b, a, 1 - a, 1.0, 1.0 + 1e-8]), 2) == pytest.approx(
        0.5 * (b - a) / math.sqrt(2 * (b * math.log(b / a) + (1 - b) * math.log((1 - b) / (1 - a)))), rel=1e-6
    )


@pytest.mark.parametrize(("items", "seed"), [(2, 0), (3, 1), (4, 2)])
def test_adversarial_tables_agree_with_crl_estimators_and_respect_the_bound(items: int, seed: int) -> None:
    """If this fails, crl's exact x and y of a searched table disagree with the search's own float64 ratio, or the
    search went past [A]'s bound; with 2 items the ratio (b - a)/sqrt(2 KL(b || a)) is below 1/2 (Pinsker) and
    the search must get close to it."""
    found = adversarial_table(items, seed, TAU)
    point = finite_point(found.law, found.table, TAU)
    ratio = point["gap"] / math.sqrt(2.0 * point["excess"] / TAU)
    assert ratio == pytest.approx(found.search_ratio, rel=1e-9)
    assert 0.45 < ratio < 1.0
    if items == 2:
        assert 0.49 < ratio <= 0.5


def test_merge_ties_makes_scores_within_the_margin_equal() -> None:
    """If this fails, the search can end on an inversion by a rounding error that crl counts as a tie."""
    scores = np.array([0.3, 1.0, 0.3 + ADVERSARIAL_TIE / 2, -2.0, 1.0 + 10 * ADVERSARIAL_TIE])
    merged = _merge_ties(scores)
    assert merged[0] == merged[2] == pytest.approx(0.3 + ADVERSARIAL_TIE / 4)
    assert list(merged[[1, 3, 4]]) == list(scores[[1, 3, 4]])
