"""Means with standard errors of replicates."""

import math

from numpy.typing import ArrayLike

from crl._vocab import Estimate
from crl.stats._validate import as_finite_1d


def mean_se(values: ArrayLike) -> Estimate:
    """Mean and standard error of replicates: ``mean = sum v / n``, ``se = sd(v, ddof=1) / sqrt(n)``.

    Args:
        values: at least two finite numbers.

    Raises:
        ValueError: if fewer than two values are given or any is not finite.
    """
    v = as_finite_1d("values", values)
    if v.size < 2:
        raise ValueError(f"values has {v.size} entries; pass at least 2 replicates to estimate an error.")
    return Estimate(float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size)), int(v.size))
