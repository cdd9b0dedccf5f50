"""From a fitted surface to advice at the user's n: m*(n), the gains of doubling m or n, and a recommendation.

Saturation (C6's definition on the fitted surface): ``m*(n)`` is the smallest m with ``err(n, m) - F(n) <= tol``,
the tolerance relative to the plateau: ``tol = max(rel_tol, t_{S-1} sigma / sqrt(S)) F(n)``, i.e. 1% of the plateau
or the half-width of the plateau's interval as S pilot seeds measure it (sigma: one run's relative seed noise),
whichever is larger. Then ``m* = (b (n/n0)^delta / tol_rel)^(1/alpha)`` per seed, Student-t on log m*.

[A]'s bounds give the rate in m at which the gap closes at least: 1 (SCRL) and 1/2 (SSCRL). The fitted alpha is
compared with it as an upper-bound rule on the slope -alpha (delta 0.1): "at least as fast" when alpha's lower
end is >= r - 0.1, "slower" when its upper end is < r - 0.1, else inconclusive. The held-out error is not the gap
itself, so this is a comparison, not a verdict.

The global advice (m*(n) and where the user's m stands against it) is withheld (``supported = False``, with the
reasons and the pilot to add) when a fit did not converge, the fit misses a pilot cell by more than 5% and 3
standard errors, alpha or delta ends on its bound in the full fit (the gain from m is not resolved), the user's n
lies more than 16x beyond the largest pilot n, or m*'s interval spans more than a factor 4.

The local answer is the question a pilot can support without m*: at the user's (n, m), does doubling m or doubling
n lower the error more? Its quantity is the difference of the two doubling gains,
``D = [err(n, m) - err(n, 2m)] - [err(n, m) - err(2n, m)] = err(2n, m) - err(n, 2m)`` (D > 0: doubling m gains
more), with its interval at the fit's level. Its support rule (frozen in docs/advisor.md before its validation):
every fit converged, no material misfit (the rule above), 2n at most 16x the largest pilot n, the three points
inside the pilot's range of m/n (m/n >= its smallest, 2m/n <= its largest: the surface is not extrapolated in m/n),
and D's interval excludes 0. Otherwise it is withheld with its reasons, and its fields carry no estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from crl._vocab import Regime
from crl.advise.surface import Interval, SurfaceFit, SurfaceParams

__all__ = [
    "ANSWER_FIELDS",
    "LOCAL_FIELDS",
    "RATE_BOUNDS",
    "Advice",
    "advise",
    "parameter_flags",
    "relative_tolerance",
]

ANSWER_FIELDS: tuple[str, ...] = ("m_star", "m_star_over_n", "m_star_exponent")
"""The fields of the global answer; withheld, it writes them as null."""

LOCAL_FIELDS: tuple[str, ...] = ("error_now", "gain_double_m", "gain_double_n", "gain_difference")
"""The fields of the local answer (doubling m or n at the user's point); withheld, it writes them as null."""

_MAX_EXPONENT_WIDTH = 2.0
_MAX_FACTOR = 100.0

RATE_BOUNDS: dict[str, float] = {"independent": 1.0, "shared": 0.5}
"""[A]'s rate in m of the gap bound: SCRL tau e^{8B/tau}/m (Thm 4.5), SSCRL 1/sqrt m (Thm 4.6)."""

_RATE_MARGIN = 0.1
_MAX_MISFIT = 0.05
_MAX_EXTRAPOLATION = 16.0
_MAX_SPREAD = 4.0


@dataclass(frozen=True)
class Advice:
    """What the pilot says at the user's n (module docstring). Intervals are at the fit's level.

    Attributes:
        n: the user's n; m: the user's current m.
        plateau: F(n), the error with unlimited negatives.
        error_now: the predicted error at (n, m).
        tolerance: the relative tolerance of m*.
        m_star: m*(n); m_star_over_n: m*/n ([A] saw about 0.4 for CLIP).
        m_star_exponent: delta/alpha, the growth of m* with n (theory: 1/2 SCRL, 1 SSCRL).
        gain_double_m: err(n, m) - err(n, 2m); gain_double_n: err(n, m) - err(2n, m).
        gain_difference: D = err(2n, m) - err(n, 2m) (> 0: doubling m gains more).
        model: the model the advice covers (a head on locked features advises that head, not its backbone).
        alpha: the fitted rate in m; rate_bound: the regime's bound; rate_comparison: the comparison's outcome.
        parameters: every parameter's interval.
        max_residual: the largest relative residual of the fit at a pilot cell; extrapolation: n / largest pilot n.
        supported: whether the fit supports the global recommendation; problems and suggestions: why not, what
            to add.
        recommendation: the plain-language global advice.
        local_supported, local_problems, local_answer: the local answer's support, why it is withheld, and its
            words.
        flags: per parameter, what makes its interval implausible (:func:`parameter_flags`; empty: nothing).
    """

    n: int
    m: int
    regime: str
    plateau: Interval
    error_now: Interval
    tolerance: float
    m_star: Interval
    m_star_over_n: Interval
    m_star_exponent: Interval
    gain_double_m: Interval
    gain_double_n: Interval
    gain_difference: Interval
    model: str
    alpha: Interval
    rate_bound: float
    rate_comparison: str
    parameters: dict[str, Interval]
    max_residual: float
    extrapolation: float
    supported: bool
    problems: tuple[str, ...]
    suggestions: tuple[str, ...]
    recommendation: str
    flags: dict[str, tuple[str, ...]]
    local_supported: bool
    local_problems: tuple[str, ...]
    local_answer: str

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able dict (intervals as ``{"estimate", "low", "high", "level"}``); a withheld global answer
        writes the :data:`ANSWER_FIELDS` as null, a withheld local one the :data:`LOCAL_FIELDS`: an unsupported
        answer carries no point estimate."""
        out: dict[str, Any] = {}
        for key, value in vars(self).items():
            if (key in ANSWER_FIELDS and not self.supported) or (
                key in LOCAL_FIELDS and not self.local_supported
            ):
                out[key] = None
            elif key == "flags":
                out[key] = {name: list(reasons) for name, reasons in value.items()}
            elif isinstance(value, Interval):
                out[key] = value.as_dict()
            elif key == "parameters":
                out[key] = {name: interval.as_dict() for name, interval in value.items()}
            else:
                out[key] = list(value) if isinstance(value, tuple) else value
        return out


def relative_tolerance(fit: SurfaceFit, rel_tol: float) -> float:
    """``max(rel_tol, t_{S-1,(1+level)/2} sigma / sqrt(S))`` (module docstring)."""
    seeds = len(fit.seeds)
    half = stats.t.ppf((1 + fit.level) / 2, seeds - 1) * fit.cell_noise / math.sqrt(seeds)
    return max(rel_tol, float(half))


def _saturation(params: SurfaceParams, n: float, tol_rel: float) -> float:
    return params.saturation(n, tol_rel * float(params.plateau(n)))


def parameter_flags(name: str, interval: Interval, *, on_bound: bool) -> tuple[str, ...]:
    """What makes a surface parameter's interval implausible, as short phrases (empty: nothing):

    - an end that is not finite; a zero width (every jackknife fit agrees exactly: pinned, not measured);
    - the full fit ended on the parameter's bound (``on_bound``);
    - the floor ``a`` (an error rate) with a lower end below 0;
    - a scale (``c``, ``b``, log-scale intervals) spanning more than a factor of 100, or an exponent (``beta``,
      ``delta``, ``alpha``) an interval wider than 2 (the theory's rates are 1/2 and 1).
    """
    flags = []
    if not (math.isfinite(interval.low) and math.isfinite(interval.high)):
        flags.append("an infinite end")
    elif interval.high - interval.low <= 1e-12 * max(1.0, abs(interval.estimate)):
        flags.append("zero width (pinned, not measured)")
    if on_bound:
        flags.append("ended on the fit's bound")
    if name == "a" and interval.low < 0:
        flags.append("below 0 (an error floor)")
    if name in ("c", "b") and interval.low > 0 and interval.high > _MAX_FACTOR * interval.low:
        flags.append(f"spans more than {_MAX_FACTOR:.0f}x")
    if name in ("beta", "delta", "alpha") and interval.high - interval.low > _MAX_EXPONENT_WIDTH:
        flags.append(f"wider than {_MAX_EXPONENT_WIDTH:g} in the exponent")
    return tuple(flags)


def _rate_comparison(alpha: Interval, bound: float, *, on_bound: bool) -> str:
    if on_bound:
        return f"not resolved against the bound's m^-{bound:g} (alpha ended on the fit's bound)"
    if alpha.low >= bound - _RATE_MARGIN:
        return f"at least as fast as the bound's m^-{bound:g}"
    if alpha.high < bound - _RATE_MARGIN:
        return f"slower than the bound's m^-{bound:g}"
    return f"inconclusive against the bound's m^-{bound:g} (interval too wide)"


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def _unconverged(fit: SurfaceFit) -> str | None:
    """How many surface fits did not converge, when any did, else None."""
    failed = sum(not ok for ok in fit.converged)
    return f"{failed} of the {len(fit.converged)} surface fits did not converge" if failed else None


def _misfit(fit: SurfaceFit, residuals: np.ndarray) -> str | None:
    """The worst pilot cell when the surface misses it by more than 5% and 3 standard errors, else None."""
    standard_error = fit.cell_noise / math.sqrt(len(fit.seeds))
    worst = int(np.argmax(np.abs(residuals)))
    if abs(residuals[worst]) <= max(_MAX_MISFIT, 3 * standard_error):
        return None
    n, m, _ = fit.cells[worst]
    return f"bad fit: the surface misses the pilot cell n = {n:g}, m = {m:g} by {100 * abs(residuals[worst]):.1f}%"


def _problems(
    fit: SurfaceFit, m_star: Interval, extrapolation: float, residuals: np.ndarray, pilot_m_max: int
) -> tuple[list[str], list[str]]:
    problems, suggestions = [], []
    unconverged = _unconverged(fit)
    if unconverged:
        problems.append(unconverged)
        suggestions.append("add seeds and check the pilot cells for failed runs")
    misfit = _misfit(fit, residuals)
    if misfit:
        problems.append(misfit)
        suggestions.append("add pilot cells between the existing n and m (the form may not hold here)")
    bounded = [name for name in ("delta", "alpha") if name in fit.at_bound[0]]
    if bounded:
        problems.append(
            f"the gain from m is not resolved: {' and '.join(bounded)} ended on the fit's bounds (the error drops "
            "between two pilot m and is flat elsewhere, or does not fall with m at all)"
        )
        suggestions.append(
            "add m/n fractions between the pilot's where the error drops (e.g. --fractions "
            "0.01,0.02,0.05,0.1,0.4,1); if they are there already, the error does not fall with m as a power law "
            "and more data is the spend"
        )
    if extrapolation > _MAX_EXTRAPOLATION:
        problems.append(f"the user's n is {extrapolation:.0f}x the largest pilot n (at most 16x is trusted)")
        suggestions.append("raise --budget so the pilot reaches at least n / 8")
    if m_star.high > _MAX_SPREAD * m_star.low:
        problems.append(
            f"m* is too uncertain: its interval [{_fmt(m_star.low)}, {_fmt(m_star.high)}] spans more than 4x"
        )
        suggestions.append(f"double the seeds (--seeds {2 * len(fit.seeds)})")
        if pilot_m_max < m_star.high <= 100 * pilot_m_max:
            suggestions.append(f"add pilot m up to about {_fmt(m_star.high)} (--max-m or larger fractions)")
    return problems, suggestions


def _local_problems(
    fit: SurfaceFit,
    residuals: np.ndarray,
    difference: Interval,
    n: int,
    m: int,
    pilot_n_max: int,
    pilot_m_over_n: tuple[float, float],
) -> list[str]:
    """Why the local answer is withheld (empty: supported): the frozen rule of the module docstring."""
    problems = []
    doubled_extrapolation = 2 * n / pilot_n_max
    low, high = pilot_m_over_n
    if m / n < low * (1 - 1e-9) or 2 * m / n > high * (1 + 1e-9):
        problems.append(
            f"m/n = {_fmt(m / n)} and 2m/n = {_fmt(2 * m / n)} leave the pilot's m/n range [{_fmt(low)}, "
            f"{_fmt(high)}] (add fractions that reach them)"
        )
    unconverged = _unconverged(fit)
    if unconverged:
        problems.append(unconverged)
    misfit = _misfit(fit, residuals)
    if misfit:
        problems.append(misfit)
    if doubled_extrapolation > _MAX_EXTRAPOLATION:
        problems.append(f"2n is {doubled_extrapolation:.0f}x the largest pilot n (at most 16x is trusted)")
    if difference.low <= 0.0 <= difference.high:
        problems.append(
            f"the two gains are not told apart: the interval of their difference, [{_fmt(difference.low)}, "
            f"{_fmt(difference.high)}], contains 0 (add seeds)"
        )
    return problems


def _local_answer(advice: dict[str, Any], problems: list[str]) -> str:
    n, m = advice["n"], advice["m"]
    if problems:
        return (
            f"At n = {n}, m = {m} the pilot cannot tell whether doubling m or n gains more: "
            + "; ".join(problems)
            + "."
        )
    gain_m, gain_n, difference = advice["gain_double_m"], advice["gain_double_n"], advice["gain_difference"]
    level = f"{100 * difference.level:.0f}%"
    better = "doubling m (more negatives)" if difference.estimate > 0 else "doubling n (more data)"
    return (
        f"At n = {n}, m = {m}, {better} lowers the error more: doubling m gains {_fmt(gain_m.estimate)} ({level}: "
        f"{_fmt(gain_m.low)} to {_fmt(gain_m.high)}), doubling n {_fmt(gain_n.estimate)} ({_fmt(gain_n.low)} to "
        f"{_fmt(gain_n.high)}); the difference is {_fmt(difference.estimate)} ({_fmt(difference.low)} to "
        f"{_fmt(difference.high)})."
    )


def _recommendation(advice: dict[str, Any]) -> str:
    n, m, m_star = advice["n"], advice["m"], advice["m_star"]
    level = f"{100 * m_star.level:.0f}%"
    star = f"m* = {_fmt(m_star.estimate)} ({level}: {_fmt(m_star.low)} to {_fmt(m_star.high)})"
    if m >= m_star.high:
        head = (
            f"At n = {n} your m = {m} already reaches the plateau ({star}): "
            "more negatives will not help, only more data does."
        )
    elif m < m_star.low:
        head = (
            f"At n = {n}, increase m from {m} to about {_fmt(m_star.estimate)} ({star}); "
            "beyond it, only more data helps."
        )
    else:
        head = (
            f"At n = {n} your m = {m} is within the interval of {star}: near the plateau; "
            "more data is the safer spend."
        )
    return head


def advise(
    fit: SurfaceFit,
    *,
    n: int,
    m: int,
    regime: Regime,
    pilot_n_max: int,
    pilot_m_max: int,
    pilot_m_over_n: tuple[float, float],
    rel_tol: float = 0.01,
    model: str = "the model of the pilot's config",
) -> Advice:
    """The advice at the user's (n, m) from the pilot's fit (module docstring); ``pilot_m_over_n`` is the smallest
    and largest m/n of the pilot's cells, ``model`` names what the advice covers."""
    if n < 1 or m < 1:
        raise ValueError(f"n = {n} and m = {m} must be >= 1")
    tol = relative_tolerance(fit, rel_tol)
    m_star = fit.quantity(lambda p: _saturation(p, n, tol))
    parameters = fit.parameter_intervals()
    extrapolation = n / pilot_n_max
    residuals = fit.residuals()
    problems, suggestions = _problems(fit, m_star, extrapolation, residuals, pilot_m_max)
    fields: dict[str, Any] = {
        "n": n,
        "m": m,
        "regime": regime,
        "plateau": fit.quantity(lambda p: p.plateau(n)),
        "error_now": fit.predict(n, m),
        "tolerance": tol,
        "m_star": m_star,
        "m_star_over_n": fit.quantity(lambda p: _saturation(p, n, tol) / n),
        "m_star_exponent": fit.quantity(lambda p: p.delta / p.alpha, log=False),
        "gain_double_m": fit.quantity(lambda p: p.error(n, m) - p.error(n, 2 * m), log=False),
        "gain_double_n": fit.quantity(lambda p: p.error(n, m) - p.error(2 * n, m), log=False),
        "gain_difference": fit.quantity(lambda p: p.error(2 * n, m) - p.error(n, 2 * m), log=False),
        "model": model,
        "alpha": parameters["alpha"],
        "rate_bound": RATE_BOUNDS[regime],
        "rate_comparison": _rate_comparison(
            parameters["alpha"], RATE_BOUNDS[regime], on_bound="alpha" in fit.at_bound[0]
        ),
        "parameters": parameters,
        "max_residual": float(np.abs(residuals).max()),
        "extrapolation": extrapolation,
        "supported": not problems,
        "problems": tuple(problems),
        "suggestions": tuple(suggestions),
        "flags": {
            name: parameter_flags(name, interval, on_bound=name in fit.at_bound[0])
            for name, interval in parameters.items()
        },
    }
    if problems:
        text = "The pilot cannot support a recommendation on m*: " + "; ".join(problems) + ". To fix: "
        fields["recommendation"] = text + "; ".join(suggestions) + "."
    else:
        fields["recommendation"] = _recommendation(fields)
    local = _local_problems(fit, residuals, fields["gain_difference"], n, m, pilot_n_max, pilot_m_over_n)
    fields.update(
        local_supported=not local, local_problems=tuple(local), local_answer=_local_answer(fields, local)
    )
    return Advice(**fields)
