"""What a claim's rule judges: measured statistics with their intervals, and the verdicts of the usual rules."""

import enum
from dataclasses import dataclass

from crl._vocab import Estimate
from crl.stats import RateFit, SlopeFit, ViolationCount


class Verdict(enum.StrEnum):
    """Outcome of a pre-registered rule.

    ``ERROR`` is set by `crl verify` when a claim's ``run`` raised; claims never return it.
    """

    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"
    ERROR = "ERROR"


@dataclass(frozen=True)
class Statistic:
    """A measured statistic with its confidence interval.

    Attributes:
        name: what it is, e.g. ``"slope of L - E L_hat vs m"``.
        value: the point estimate.
        ci_low: lower end of the interval.
        ci_high: upper end of the interval.
        ci_level: nominal coverage, e.g. 0.95.
        detail: how the interval was obtained (method, points, resamples).
        nonnegative: the quantity cannot be negative (a KL divergence, a variance): the report shows its
            interval clipped at 0, saying so; the verdict judges the interval as computed.
    """

    name: str
    value: float
    ci_low: float
    ci_high: float
    ci_level: float = 0.95
    detail: str = ""
    nonnegative: bool = False

    @classmethod
    def from_slope(cls, name: str, fit: SlopeFit) -> "Statistic":
        """The slope of a :class:`~crl.stats.SlopeFit` with its bootstrap interval."""
        detail = f"{fit.method}, {fit.n_points} points, {fit.n_boot} resamples, {_misfit_text(fit)}"
        return cls(name, fit.slope, fit.ci_low, fit.ci_high, fit.ci_level, detail)

    @classmethod
    def from_rate(cls, name: str, fit: RateFit) -> "Statistic":
        """The rate r of a :class:`~crl.stats.RateFit` with its interval; the detail gives model and misfit."""
        detail = f"{fit.n_points} points, {fit.describe()}"
        return cls(name, fit.exponent, fit.ci_low, fit.ci_high, fit.ci_level, detail)

    @classmethod
    def from_violations(cls, name: str, count: ViolationCount) -> "Statistic":
        """Violations beyond MC error, with a one-sided Clopper-Pearson upper bound on their mean count."""
        detail = (
            f"{count.count_beyond_mc_error} of {count.n} beyond {count.k:.2f} se ({count.count} raw); "
            f"one-sided {count.ci_level:g} upper bound on the expected count; {slack_label(count)}"
        )
        upper = count.n * count.rate_upper
        return cls(name, float(count.count_beyond_mc_error), 0.0, upper, count.ci_level, detail)

    @classmethod
    def from_mean(
        cls, name: str, estimate: Estimate, level: float = 0.95, *, nonnegative: bool = False
    ) -> "Statistic":
        """A mean with its Student-t interval; ``nonnegative`` marks a mean of non-negative values."""
        low, high = estimate.t_ci(level)
        detail = f"mean of {estimate.n}, se {estimate.se:.3g}"
        return cls(name, estimate.mean, low, high, level, detail, nonnegative)

    def contains(self, value: float) -> bool:
        """Whether ``ci_low <= value <= ci_high``."""
        return self.ci_low <= value <= self.ci_high


def verdict_equivalent(statistic: Statistic, target: float, delta: float = 0.1) -> Verdict:
    """An equivalence rule for a claimed value r (a rate): is the CI inside the band [r - delta, r + delta]?

    PASS when the whole interval lies inside the band, FAIL when the interval and the band are disjoint,
    INCONCLUSIVE otherwise (the data cannot tell; docs/theory.md section 7). Unlike "the CI contains r",
    this cannot be passed by a wide interval, and a true rate measured ever more precisely keeps passing.

    Raises:
        ValueError: if ``delta`` is not a finite number > 0.
    """
    _check_delta(delta)
    low, high = target - delta, target + delta
    if low <= statistic.ci_low and statistic.ci_high <= high:
        return Verdict.PASS
    if statistic.ci_high < low or statistic.ci_low > high:
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE


def verdict_rate(fit: RateFit, target: float, delta: float = 0.1) -> tuple[Verdict, str]:
    """The rate rule: INCONCLUSIVE when neither the power law nor the two-term model fits the window
    (:attr:`RateFit.misfit`), else :func:`verdict_equivalent` of r against ``target``.

    Returns:
        The verdict and its reason (``""`` unless INCONCLUSIVE).
    """
    if fit.misfit:
        return Verdict.INCONCLUSIVE, f"misfit: {fit.describe()}"
    verdict = verdict_equivalent(Statistic.from_rate("rate", fit), target, delta)
    if verdict is Verdict.INCONCLUSIVE:
        return verdict, (
            f"CI [{fit.ci_low:.4g}, {fit.ci_high:.4g}] of r overlaps the band [{target - delta:.4g}, "
            f"{target + delta:.4g}] without lying inside it: too wide"
        )
    return verdict, ""


def verdict_at_most(statistic: Statistic, bound: float) -> Verdict:
    """An upper-bound rule ("at least as fast as r": bound = r + delta): PASS when the CI's upper end is
    <= bound, FAIL when its lower end is > bound, INCONCLUSIVE otherwise."""
    if statistic.ci_high <= bound:
        return Verdict.PASS
    if statistic.ci_low > bound:
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE


def verdict_above(statistic: Statistic, threshold: float) -> Verdict:
    """A lower-bound rule (e.g. a ratio's CI above 1, a difference's above 0): PASS when the CI's lower end is
    > threshold, FAIL when its upper end is < threshold, INCONCLUSIVE otherwise."""
    if statistic.ci_low > threshold:
        return Verdict.PASS
    if statistic.ci_high < threshold:
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE


def slack_label(count: ViolationCount) -> str:
    """How much a bound check says: ``"slack 0.36"``, or ``"slack 0.0015: holds, not informative"`` below 0.1."""
    if count.slack is None:
        return "slack undefined (no finite bound > 0)"
    text = f"slack {count.slack:.3g}"
    return text if count.informative or not count.holds else f"{text}: holds, not informative"


def verdict_no_violations(count: ViolationCount) -> Verdict:
    """The rule "zero violations beyond MC error": PASS if there are none, FAIL otherwise."""
    return Verdict.PASS if count.holds else Verdict.FAIL


def combine_verdicts(*verdicts: Verdict) -> Verdict:
    """All parts of a rule must hold: ERROR, else FAIL, else INCONCLUSIVE if any part is so, else PASS."""
    if not verdicts:
        raise ValueError("combine_verdicts needs at least one verdict.")
    for worst in (Verdict.ERROR, Verdict.FAIL, Verdict.INCONCLUSIVE):
        if worst in verdicts:
            return worst
    return Verdict.PASS


def _check_delta(delta: float) -> None:
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0.0 < delta < float("inf"):
        raise ValueError(f"delta={delta!r} must be a finite number > 0 (docs/theory.md: 0.1 unless stated).")


def _misfit_text(fit: SlopeFit) -> str:
    """The misfit of a power-law fit as effect sizes: largest relative residual and chi2/dof."""
    text = f"max relative residual {fit.max_relative_residual:.3g}"
    ratio = fit.chi2_per_dof
    return text if ratio is None else f"{text}, chi2/dof {ratio:.3g}"
