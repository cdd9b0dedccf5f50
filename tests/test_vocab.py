"""The shared vocabulary: defined once, used the same way everywhere.

If these fail, a module grew its own copy of a shared word (and the copies can drift apart), or an estimate's
interval differs from scipy's.
"""

import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from crl._vocab import FORMS, KERNEL_FORMS, REGIMES, Estimate

SRC = Path(__file__).resolve().parents[1] / "src" / "crl"


def test_tuples_follow_the_literals() -> None:
    assert FORMS == ("infonce", "dcl", "gcl")
    assert REGIMES == ("shared", "independent")
    assert set(KERNEL_FORMS) < set(FORMS), "the kernel forms are a deliberate subset of the loss forms"


@pytest.mark.parametrize(
    "pattern",
    [
        r"^Form\s*=",
        r"^Regime\s*=",
        r"^KernelForm\s*=",
        r"^FORMS\b.*=",
        r"^REGIMES\b.*=",
        r"^class Estimate\b",
        r"^class MeanSE\b",
        r"^def _?check_tau\(",
    ],
)
def test_each_word_is_defined_in_one_module(pattern: str) -> None:
    regex = re.compile(pattern, re.MULTILINE)
    owners = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if regex.search(p.read_text()))
    assert len(owners) <= 1, (
        f"{pattern!r} is defined in {owners}; define it once (crl/_vocab.py, crl/_validate.py)"
    )


def test_estimate_intervals_match_scipy() -> None:
    values = np.array([0.3, 0.9, 1.4, 0.2, 0.8])
    est = Estimate(float(values.mean()), float(values.std(ddof=1) / math.sqrt(values.size)), values.size)
    t_low, t_high = scipy_stats.t.interval(0.9, values.size - 1, loc=est.mean, scale=est.se)
    z_low, z_high = scipy_stats.norm.interval(0.9, loc=est.mean, scale=est.se)
    assert est.t_ci(0.9) == pytest.approx((t_low, t_high), rel=1e-12)
    assert est.normal_ci(0.9) == pytest.approx((z_low, z_high), rel=1e-12)
    assert est.t_ci(0.9)[1] > est.normal_ci(0.9)[1], "Student-t must be wider than normal at n = 5"


def test_t_interval_needs_two_replicates() -> None:
    with pytest.raises(ValueError, match="n >= 2"):
        Estimate(1.0, 0.0, 1).t_ci()
