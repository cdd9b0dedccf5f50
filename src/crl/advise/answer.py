"""The advisor's answer at the user's (N, M): what to do first, then what the pilot measured, against what
baseline, at what cost, and what it covers.

From the local pilot's estimate (:mod:`crl.advise.local`), with gain = err(base) - err(doubled) (> 0: the doubling
lowered the held-out error), the recommendation comes first:

- "Neither doubling helps here" when both gains are <= 0 (both doublings raised the error, or left it alone);
- else "Double m" / "Double n" by the sign of D_hat = gain_m - gain_n when the calibrated interval
  D_hat +- q sqrt(se_a^2 + se_b^2 + drift^2) excludes 0 (``decided``);
- else "Too close to call at this pilot's precision, leaning to doubling m (or n)".

Beside a direction (not beside "neither") the answer states how often a direction of its strength was right on the
committed grids: p_right = Phi(C z), z = |D_hat| / scale (:mod:`crl.advise.reliability`), in words to a tenth
("right about 7 times in 10 at this strength on the committed grids").

Then every change in the metric with its direction in words ("doubling m raised the held-out error by 0.029"),
as the error change err(doubled) - err(base) = -gain with +- 2 standard errors (sqrt(se_base^2 + se_doubled^2)),
and D with its calibrated interval; then the :class:`~crl.advise.heldout.Baseline` beside the pilot's cells
(on locked features the zero-shot identity map); then the scope (:class:`Scope`: the advisor is made for heads
on locked features, LiT-style). q is :data:`Q`, calibrated out of sample on the committed m*(n) grids at S = 4
seeds (docs/advisor_calibration.md, ``python -m studies.advisor_calibration``).

The cost beside each option is read one step back, where the gains were measured: at the base (N/2, M/2),
doubling m trains (N/2, M), doubling n trains (N, M/2); each costs its processed samples
(:func:`crl.advise.pilot.cell_samples`) minus the base's, and the gain per million extra processed samples reads
the answer per unit of compute.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from crl.advise.heldout import Baseline
from crl.advise.local import LocalEstimate, MeasuredDifference
from crl.advise.reliability import chance_words, p_right, strength

__all__ = [
    "Q_SEEDS",
    "Answer",
    "OptionCost",
    "Q",
    "Recommendation",
    "Scope",
    "answer_of",
    "double_of",
    "error_change",
    "recommendation_of",
]

Q = 6.81
"""The interval's multiplier: the smallest q holding 90% of the measured D on the three committed grids (48 points,
6.803 rounded up); each grid left out in turn gave 6.03-7.13 (docs/advisor_calibration.md)."""

Q_SEEDS = 4
"""The seeds per cell at which :data:`Q` was calibrated (the committed grids' 4)."""

Recommendation = Literal["m", "n", "neither"]
"""What the answer recommends: double m, double n, or neither."""


def double_of(estimate: LocalEstimate) -> Literal["m", "n"]:
    """The doubling that gained more by the sign of D_hat = gain_m - gain_n: ``"m"`` when D_hat > 0, else ``"n"``
    (m at a tie of exactly 0 would be arbitrary: n)."""
    return "m" if estimate.d_hat > 0 else "n"


def recommendation_of(estimate: LocalEstimate) -> Recommendation:
    """``"neither"`` when both gains at the base are <= 0 (gain_m <= 0 and gain_n <= 0: neither doubling lowered
    the error), else :func:`double_of`."""
    if estimate.gain_m <= 0 and estimate.gain_n <= 0:
        return "neither"
    return double_of(estimate)


@dataclass(frozen=True)
class Scope:
    """What the answer covers, and whether that is the advisor's scope, heads on locked features (LiT-style).

    Attributes:
        covers: the model the answer is about, in words (e.g. "a linear head on frozen minilm features of wordnet").
        locked: the model is a head on locked features (the scope its q was calibrated in).
    """

    covers: str
    locked: bool

    @property
    def sentence(self) -> str:
        """The scope in one sentence."""
        where = (
            "inside that scope"
            if self.locked
            else "outside it, where the interval's coverage and the direction's chance are not known"
        )
        return (
            f"Scope: crl advise is made for heads on locked features (LiT-style); this answer covers {self.covers}, "
            f"{where}."
        )


def error_change(gain: float, se: float, option: str, *, first: bool = True) -> str:
    """A gain in words, its direction explicit: gain > 0 "doubling m lowered the held-out error by |gain|", gain < 0
    "raised", 0 "left it unchanged", then the error change -gain with +- 2 se (``first``: the clause opens the
    sentence's list, else "doubling n" reads "it")."""
    subject = "the held-out error" if first else "it"
    verb = "lowered" if gain > 0 else "raised" if gain < 0 else "left"
    size = f" by {abs(gain):.4f}" if gain != 0 else " unchanged"
    change = -gain if gain != 0 else 0.0
    return (
        f"doubling {option} {verb} {subject}{size} (error change {change:+.4f}, +-2 se {change - 2 * se:+.4f} to "
        f"{change + 2 * se:+.4f})"
    )


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
    def gain_per_million(self) -> float | None:
        """gain per million extra processed samples; None when the doubling costs nothing extra (fixed per-anchor
        sets whose union already spans every candidate embed no more rows when m doubles)."""
        extra = self.samples - self.base_samples
        return self.gain / (extra / 1e6) if extra > 0 else None

    @property
    def per_million_words(self) -> str:
        """The error change per million extra processed samples in words (< 0 lowers the error), or that the
        doubling costs no extra processed samples."""
        if self.gain_per_million is None:
            return "no extra processed samples"
        return f"{-self.gain_per_million:+.3g} per million extra samples"


@dataclass(frozen=True)
class Answer:
    """The answer at (N, M) (module docstring).

    Attributes:
        estimate: the pilot's estimate (D_hat, D_back, drift, standard errors, gains).
        q: the interval's multiplier; seeds: the runs per cell.
        low, high: the interval D_hat +- q scale.
        decided: the interval excludes 0.
        scope: what the answer covers, and whether that is a head on locked features.
        costs: the two options' costs at the base.
        baseline: what the cells are read against (on locked features the zero-shot identity map).
        cell_errors: (lowest, highest) mean held-out error of the pilot's cells.
        check: the measured D at (N, M) from the check cells (``--check``), or None.
    """

    estimate: LocalEstimate
    q: float
    seeds: int
    low: float
    high: float
    decided: bool
    scope: Scope
    costs: tuple[OptionCost, OptionCost]
    baseline: Baseline
    cell_errors: tuple[float, float]
    check: MeasuredDifference | None = None

    @property
    def double(self) -> str:
        """:func:`double_of` the estimate: ``"m"`` or ``"n"``."""
        return double_of(self.estimate)

    @property
    def recommendation(self) -> Recommendation:
        """:func:`recommendation_of` the estimate: "neither", else :attr:`double`."""
        return recommendation_of(self.estimate)

    @property
    def strength(self) -> float:
        """z = |D_hat| / scale (:func:`crl.advise.reliability.strength`)."""
        return strength(self.estimate)

    @property
    def p_right(self) -> float | None:
        """Phi(C z), the chance that the direction is right (:func:`crl.advise.reliability.p_right`); None when
        the recommendation is "neither" (no direction is recommended)."""
        return None if self.recommendation == "neither" else p_right(self.strength)

    @property
    def sentence(self) -> str:
        """The answer, recommendation first (module docstring)."""
        return " ".join(
            (self._recommendation(), self._measured(), self._against_baseline(), self.scope.sentence)
        )

    def _recommendation(self) -> str:
        if self.p_right is None:
            return "Neither doubling helps here: both raised the held-out error (or left it unchanged)."
        which = "more negatives" if self.double == "m" else "more data"
        chance = f"{which}; {chance_words(self.p_right)} at this strength on the committed grids"
        if self.decided:
            return f"Double {self.double} ({chance})."
        return f"Too close to call at this pilot's precision, leaning to doubling {self.double} ({chance})."

    def _measured(self) -> str:
        e = self.estimate
        base = f"({e.n // 2:,}, {e.m // 2:,})"
        m_change = error_change(e.gain_m, e.se_gain_m, "m")
        n_change = error_change(e.gain_n, e.se_gain_n, "n", first=False)
        holds = "excludes" if self.decided else "contains"
        return (
            f"One step back, at (n, m) = {base}, {m_change} and {n_change}; D = gain_m - gain_n = {e.d_hat:+.4f}, "
            f"calibrated interval {self.low:+.4f} to {self.high:+.4f}, which {holds} 0 ({self.seeds} seeds per cell)."
        )

    def _against_baseline(self) -> str:
        low, high = self.cell_errors
        reference = self.baseline.error
        relation = (
            "all worse than the baseline"
            if low > reference
            else "all better than the baseline"
            if high < reference
            else "the baseline lies among them"
        )
        return (
            f"Baseline: {self.baseline.label} scores {reference:.4f}; the pilot's cells {low:.4f} to {high:.4f}, "
            f"{relation}."
        )

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able dict: the sentence first, the recommendation, the decision, the direction's strength and
        chance, the estimate, the baseline, the scope, the costs and the check."""
        return {
            "sentence": self.sentence,
            "recommendation": self.recommendation,
            "double": self.double,
            "decided": self.decided,
            "strength": self.strength,
            "p_right": self.p_right,
            "d_hat": self.estimate.d_hat,
            "low": self.low,
            "high": self.high,
            "q": self.q,
            "seeds": self.seeds,
            "error_change": {"m": -self.estimate.gain_m, "n": -self.estimate.gain_n},
            "baseline": asdict(self.baseline),
            "cell_errors": list(self.cell_errors),
            "scope": asdict(self.scope),
            "estimate": {
                **asdict(self.estimate),
                "drift": self.estimate.drift,
                "scale": self.estimate.scale,
                "se_gain_m": self.estimate.se_gain_m,
                "se_gain_n": self.estimate.se_gain_n,
            },
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
    scope: Scope,
    costs: tuple[OptionCost, OptionCost],
    baseline: Baseline,
    cell_errors: tuple[float, float],
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
    decided = low > 0 or high < 0
    return Answer(estimate, q, seeds, low, high, decided, scope, costs, baseline, cell_errors, check)
