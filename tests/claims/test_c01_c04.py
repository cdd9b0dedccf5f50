"""Tests of claims C3 and C4's building blocks (C1 and C2: tests/claims/test_c01_c02.py)."""

import numpy as np
import pytest
import torch

from crl.claims import Verdict
from crl.claims.base import Statistic
from crl.claims.c03_scrl_inner import fixed_score as c3_score
from crl.claims.c04_sscrl_fluctuation import _flat_verdict, _squared_deviations


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
