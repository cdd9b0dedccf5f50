"""The advisor's answer at the user's (N, M): which doubling, by how much, how sure, what it covers, at what cost.

From the local pilot's estimate (:mod:`crl.advise.local`): the direction is always the sign of D_hat (> 0: double
m); its size is stated with the calibrated interval D_hat +- q sqrt(se_a^2 + se_b^2 + drift^2) when that interval
excludes 0 (``decided``), otherwise the answer is "too close to call at this pilot's precision" with both gains.
q is :data:`Q`, calibrated out of sample on the committed m*(n) grids at S = 4 seeds (docs/advisor_calibration.md,
``python -m studies.advisor_calibration``).

The cost beside each option is read one step back, where the gains were measured: at the base (N/2, M/2),
doubling m trains (N/2, M), doubling n trains (N, M/2); each costs its processed samples
(:func:`crl.advise.pilot.cell_samples`) minus the base's, and the gain per million extra processed samples reads
the answer per unit of compute.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from crl.advise.local import LocalEstimate, MeasuredDifference

__all__ = ["Q_SEEDS", "Answer", "OptionCost", "Q", "answer_of"]

Q = 6.81
"""The interval's multiplier: the smallest q holding 90% of the measured D on the three committed grids (48 points,
6.803 rounded up); each grid left out in turn gave 6.03-7.13 (docs/advisor_calibration.md)."""

Q_SEEDS = 4
"""The seeds per cell at which :data:`Q` was calibrated (the committed grids' 4)."""


@dataclass(frozen=True)
class OptionCost:
    """What a doubling at the base costs: the processed samples of the base cell and of the doubled one.

    Attributes:
        option: ``"m"`` or ``"n"``.
        base_samples: processed samples of the base cell (N/2, M/2).
        samples: processed samples of the doubled cell.
        gain: the error it lowered (the measured gain at the base).
    """

    option: str
    base_samples: int
    samples: int
    gain: float

    @property
    def ratio(self) -> float:
        """samples / base_samples."""
        return self.samples / self.base_samples

    @property
    def gain_per_million(self) -> float:
        """gain per million extra processed samples (NaN when the doubling costs nothing extra)."""
        extra = self.samples - self.base_samples
        return self.gain / (extra / 1e6) if extra > 0 else float("nan")


@dataclass(frozen=True)
class Answer:
    """The answer at (N, M) (module docstring).

    Attributes:
        estimate: the pilot's estimate (D_hat, D_back, drift, standard errors, gains).
        q: the interval's multiplier; seeds: the runs per cell.
        low, high: the interval D_hat +- q scale.
        decided: the interval excludes 0.
        covers: what the answer is about (the head on locked features, or the whole model).
        costs: the two options' costs at the base.
        check: the measured D at (N, M) from the check cells (``--check``), or None.
    """

    estimate: LocalEstimate
    q: float
    seeds: int
    low: float
    high: float
    decided: bool
    covers: str
    costs: tuple[OptionCost, OptionCost]
    check: MeasuredDifference | None = None

    @property
    def double(self) -> str:
        """``"m"`` or ``"n"``: the doubling that gained more (m at a tie of exactly 0 would be arbitrary: n)."""
        return "m" if self.estimate.d_hat > 0 else "n"

    @property
    def sentence(self) -> str:
        """The answer in one sentence (module docstring)."""
        e = self.estimate
        base = f"({e.n // 2:,}, {e.m // 2:,})"
        gains = f"doubling m gained {e.gain_m:+.4f}, doubling n {e.gain_n:+.4f}"
        interval = f"D = {e.d_hat:+.4f}, calibrated interval {self.low:+.4f} to {self.high:+.4f}"
        which = "more negatives (m)" if self.double == "m" else "more data (n)"
        if self.decided:
            return (
                f"Double {self.double}: one step back, at (n, m) = {base}, {gains} in held-out error, so {which} "
                f"gains {abs(e.d_hat):.4f} more ({interval}, which excludes 0; {self.seeds} seeds per cell); this "
                f"covers {self.covers}."
            )
        return (
            f"Too close to call at this pilot's precision, leaning to doubling {self.double}: one step back, at "
            f"(n, m) = {base}, {gains} in held-out error ({interval}, which contains 0; {self.seeds} seeds per "
            f"cell); this covers {self.covers}."
        )

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able dict: the sentence first, the decision, the estimate, the costs and the check."""
        return {
            "sentence": self.sentence,
            "double": self.double,
            "decided": self.decided,
            "d_hat": self.estimate.d_hat,
            "low": self.low,
            "high": self.high,
            "q": self.q,
            "seeds": self.seeds,
            "covers": self.covers,
            "estimate": {**asdict(self.estimate), "drift": self.estimate.drift, "scale": self.estimate.scale},
            "costs": [
                {**asdict(cost), "ratio": cost.ratio, "gain_per_million_samples": cost.gain_per_million}
                for cost in self.costs
            ],
            "check": None if self.check is None else {**asdict(self.check), "decisive": self.check.decisive},
        }


def answer_of(
    estimate: LocalEstimate,
    *,
    seeds: int,
    covers: str,
    costs: tuple[OptionCost, OptionCost],
    q: float = Q,
    check: MeasuredDifference | None = None,
) -> Answer:
    """The answer from the pilot's estimate at multiplier ``q`` (module docstring).

    Raises:
        ValueError: if q is not positive.
    """
    if not q > 0:
        raise ValueError(f"q = {q} must be > 0")
    low, high = estimate.interval(q)
    return Answer(estimate, q, seeds, low, high, low > 0 or high < 0, covers, costs, check)
