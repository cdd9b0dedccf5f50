"""Tests of claims C1-C4: each quick run ends PASS with its negative control FAIL, and their building blocks."""

import math

import numpy as np
import pytest
import torch

from crl.claims import Verdict
from crl.claims.base import Statistic
from crl.claims.c01_fisher import RHO, TAU, family_score, family_verdict
from crl.claims.c02_calibration import ring_law, rotation_score, sqrt_bound, swapped_ideal_table
from crl.claims.c03_scrl_inner import fixed_score as c3_score
from crl.claims.c04_sscrl_fluctuation import _flat_verdict, _squared_deviations
from crl.metrics.risk import finite_auc, finite_optimal_auc, ideal_feature_score
from crl.synthetic import GaussianTwoTower, VMFUniform


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


def test_family_verdict_threshold() -> None:
    """If this fails, C1(b)'s rule is not 'shortfall <= 3 paired se'."""
    assert family_verdict({"auc_shortfall": 0.0, "auc_shortfall_se": 0.0}) is Verdict.PASS
    assert family_verdict({"auc_shortfall": 0.29, "auc_shortfall_se": 0.1}) is Verdict.PASS
    assert family_verdict({"auc_shortfall": 0.31, "auc_shortfall_se": 0.1}) is Verdict.FAIL


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


def test_c3_score_is_bounded_as_stated() -> None:
    """If this fails, C3's score exceeds the bound B = 0.25 its rule and [A]'s constant use."""
    x = torch.nn.functional.normalize(torch.randn(1000, 3, dtype=torch.float64), dim=1)
    y = torch.nn.functional.normalize(torch.randn(1000, 3, dtype=torch.float64), dim=1)
    assert float(c3_score()(x, y).abs().max()) <= 0.25


def test_squared_deviations_average_to_the_unbiased_variance() -> None:
    """If this fails, C4's variance replicates are not (v - mean)^2 N/(N-1) (their mean must be var(ddof=1))."""
    values = np.random.default_rng(0).standard_normal(50)
    assert _squared_deviations(values, 0.5).mean() == pytest.approx(0.5 * values.var(ddof=1))


def test_flat_rule() -> None:
    """If this fails, C4's 'SCRL flat' rule is not: CI inside [-0.15, 0.15] PASS, estimate outside FAIL."""
    assert _flat_verdict(Statistic("s", 0.0, -0.1, 0.1)) is Verdict.PASS
    assert _flat_verdict(Statistic("s", 0.1, -0.1, 0.2)) is Verdict.INCONCLUSIVE
    assert _flat_verdict(Statistic("s", -0.3, -0.4, -0.2)) is Verdict.FAIL
