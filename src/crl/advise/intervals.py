"""Intervals over seed replicates: Student-t of a mean, and the jackknife's delete-one-seed form.

Both use Student-t with S - 1 degrees of freedom over S seed replicates (crl's rule for few seeds; a percentile
bootstrap over fewer than 30 seeds undercovers); on the log scale for positive scale quantities.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from crl.stats import jackknife_se

__all__ = ["Interval", "Intervals", "replicate_interval", "t_interval"]


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided interval at ``level`` (e.g. 0.9 for a 90% interval)."""

    estimate: float
    low: float
    high: float
    level: float

    def contains(self, value: float) -> bool:
        """Whether ``low <= value <= high``."""
        return self.low <= value <= self.high

    def as_dict(self) -> dict[str, float]:
        """``{"estimate", "low", "high", "level"}``."""
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "level": self.level}


def t_interval(values: ArrayLike, level: float, *, log: bool = False, extra_var: float = 0.0) -> Interval:
    """Student-t interval of the mean of S replicates: ``mean +- t_{S-1,(1+level)/2} sqrt(sd^2/S + extra_var)``.

    With ``log``, the interval is computed on log(values) and mapped back (a geometric mean with a multiplicative
    interval). ``extra_var`` adds a variance on the same scale (e.g. the noise of a measured mean).

    Raises:
        ValueError: for fewer than two values, non-finite values, or non-positive values with ``log``.
    """
    v = np.asarray(values, dtype=float)
    if v.size < 2 or not np.isfinite(v).all():
        raise ValueError(f"values must be at least two finite replicates, got {v.tolist()}")
    if log:
        if (v <= 0).any():
            raise ValueError(f"values must be > 0 for a log-scale interval, got {v.tolist()}")
        v = np.log(v)
    half = stats.t.ppf((1 + level) / 2, v.size - 1) * math.sqrt(v.var(ddof=1) / v.size + extra_var)
    centre = float(v.mean())
    ends = [centre, centre - float(half), centre + float(half)]
    if log:
        ends = [math.exp(e) for e in ends]
    return Interval(ends[0], ends[1], ends[2], level)


Intervals = Literal["jackknife", "per_seed"]
"""How intervals over seeds are formed (module docstring)."""


def replicate_interval(
    centre: float | None,
    replicates: list[float],
    level: float,
    *,
    method: Intervals,
    log: bool,
    extra_var: float,
) -> Interval:
    """``centre +- t_{S-1} sqrt(k var(replicates) + extra_var)``: per seed, the mean of S fits with k = 1/S; jackknife,
    the full fit with the delete-one-seed variance, k = (S-1)^2/S. Log scale when ``log``."""
    values = np.asarray(replicates, dtype=float)
    if log and ((values <= 0).any() or (centre is not None and centre <= 0)):
        raise ValueError(f"values must be > 0 for a log-scale interval, got {values.tolist()}")
    if not np.isfinite(values).all():
        raise ValueError(f"replicate values must be finite, got {values.tolist()}")
    if log:
        values = np.log(values)
    seeds = values.size
    if method == "per_seed" or centre is None:
        return t_interval(np.exp(values) if log else values, level, log=log, extra_var=extra_var)
    middle = math.log(centre) if log else centre
    spread = jackknife_se(values) ** 2 + extra_var
    half = float(stats.t.ppf((1 + level) / 2, seeds - 1)) * math.sqrt(spread)
    ends = [middle, middle - half, middle + half]
    if log:
        ends = [math.exp(e) for e in ends]
    return Interval(ends[0], ends[1], ends[2], level)
