"""The shared words of crl, defined once: loss forms, regimes of negatives, an estimate.

Every layer (objectives, negatives, metrics, training, claims) imports these names from here; the checks of
arguments (a temperature, a count, a choice among these words) live in :mod:`crl._validate`, the one floor below.

- ``Form``: the per-anchor contrastive loss. With Delta_j = s(x, y'_j) - s(x, y) and m negatives,
  ``infonce`` = log(1 + sum_j exp(Delta_j/tau)), ``dcl`` = log sum_j exp(Delta_j/tau),
  ``gcl`` = tau log((1/m) sum_j exp(Delta_j/tau)) ([A]'s L_hat).
- ``KernelForm``: the subset of forms that [B]'s learned-kernel risks use (InfoNCE's R and DCL's R~); [B]
  has no tau-scaled log-mean-exp, so ``gcl`` is deliberately not a kernel form.
- ``Regime``: ``shared`` (SSCRL: one set of m negatives for all n anchors) or ``independent`` (SCRL: each
  anchor its own m negatives).
- ``Estimate``: a mean with its standard error over ``n`` independent replicates, with the normal interval
  (Monte-Carlo draws, where n is large) and the Student-t interval (replicates over few seeds) as two named
  methods.
"""

import typing
from dataclasses import dataclass
from typing import Literal

from scipy import stats as scipy_stats

from crl._validate import check_level

Form = Literal["infonce", "dcl", "gcl"]
KernelForm = Literal["infonce", "dcl"]
Regime = Literal["shared", "independent"]

FORMS: tuple[str, ...] = typing.get_args(Form)
KERNEL_FORMS: tuple[str, ...] = typing.get_args(KernelForm)
REGIMES: tuple[str, ...] = typing.get_args(Regime)
REGIME_LABELS: dict[str, str] = {"shared": "SSCRL", "independent": "SCRL"}
"""The regimes' names in [A], for displayed text only (keys, cell parameters and arguments use ``Regime``)."""


@dataclass(frozen=True)
class Estimate:
    """A mean of ``n`` independent replicates with its standard error ``se = sd(ddof=1) / sqrt(n)``.

    An exact computation is an ``Estimate`` with ``se = 0`` and ``n = 1``.

    Attributes:
        mean: the point estimate (the mean of the replicates).
        se: its standard error; 0.0 for an exact computation.
        n: number of replicates averaged.
    """

    mean: float
    se: float
    n: int

    def normal_ci(self, level: float = 0.95) -> tuple[float, float]:
        """Normal interval ``mean -/+ z_{(1+level)/2} se``: for Monte-Carlo means over many draws.

        Raises:
            ValueError: if ``level`` is not in (0, 1).
        """
        half = float(scipy_stats.norm.ppf(0.5 + check_level("level", level) / 2.0)) * self.se
        return self.mean - half, self.mean + half

    def t_ci(self, level: float = 0.95) -> tuple[float, float]:
        """Student-t interval ``mean -/+ t_{n-1, (1+level)/2} se``: for means over few replicates (seeds).

        Raises:
            ValueError: if ``level`` is not in (0, 1) or ``n < 2`` (no degrees of freedom).
        """
        check_level("level", level)
        if self.n < 2:
            raise ValueError(f"a Student-t interval needs n >= 2 replicates; this estimate has n={self.n}.")
        half = float(scipy_stats.t.ppf(0.5 + level / 2.0, self.n - 1)) * self.se
        return self.mean - half, self.mean + half
