"""Figures as data: claims describe what to draw (:class:`FigureSpec`); :mod:`crl.report` draws it."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from crl.stats import SlopeFit

Scale = Literal["linear", "log", "symlog"]
"""An axis scale: ``"symlog"`` is logarithmic away from 0 and linear near it, for values that span decades and
reach 0 (or below), which a linear axis crams near 0 and a log axis cannot show."""


@dataclass(frozen=True)
class Points:
    """A measured series of a figure: points with optional interval bars and an optional fitted power law.

    ``control`` marks the negative control's series: the report draws it with open markers beneath the claim's
    and names it "control: ..." in the legend.
    """

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    y_low: tuple[float, ...] | None = None
    y_high: tuple[float, ...] | None = None
    fit: SlopeFit | None = None
    control: bool = False


@dataclass(frozen=True)
class Curve:
    """A theoretical curve of a figure: a bound (``kind="bound"``) or a predicted law (``kind="theory"``)."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    kind: Literal["bound", "theory"] = "bound"


@dataclass(frozen=True)
class FigureSpec:
    """Everything needed to draw one figure; the report renders it to ``<claim>_<name>.png``.

    Attributes:
        name: file-name stem, letters, digits, ``-`` and ``_`` only.
        title: the figure's title.
        x_label: x-axis label (name the symbol, e.g. ``"m (negatives per anchor)"``).
        y_label: y-axis label.
        points: measured series (the claim's and usually the control's).
        curves: bounds or predicted curves, drawn as lines.
        reference_slopes: theory slopes, drawn as dotted lines through the first series' geometric centre.
        log_x: logarithmic x axis.
        log_y: logarithmic y axis.
        x_scale: the x axis's scale when set, overriding ``log_x`` (e.g. ``"symlog"``).
        y_scale: the y axis's scale when set, overriding ``log_y``.

    Curves with the same kind and points are drawn once (their labels joined), so that identical bounds do not
    stack up in the legend.
    """

    name: str
    title: str
    x_label: str
    y_label: str
    points: tuple[Points, ...]
    curves: tuple[Curve, ...] = ()
    reference_slopes: tuple[float, ...] = ()
    log_x: bool = True
    log_y: bool = True
    x_scale: Scale | None = None
    y_scale: Scale | None = None

    @property
    def xscale(self) -> Scale:
        """The x axis's scale: ``x_scale``, else log or linear by ``log_x``."""
        return self.x_scale or ("log" if self.log_x else "linear")

    @property
    def yscale(self) -> Scale:
        """The y axis's scale: ``y_scale``, else log or linear by ``log_y``."""
        return self.y_scale or ("log" if self.log_y else "linear")

    def __post_init__(self) -> None:
        if not self.name or not all(ch.isascii() and (ch.isalnum() or ch in "-_") for ch in self.name):
            raise ValueError(
                f"figure name={self.name!r} must be non-empty ASCII letters, digits, '-' or '_'."
            )
        if not self.points and not self.curves:
            raise ValueError(f"figure {self.name!r} has no points and no curves; give it something to draw.")


def points(
    label: str,
    x: ArrayLike,
    y: ArrayLike,
    *,
    y_err: ArrayLike | None = None,
    y_low: ArrayLike | None = None,
    y_high: ArrayLike | None = None,
    fit: SlopeFit | None = None,
    control: bool = False,
) -> Points:
    """A :class:`Points` series from arrays; bars from a symmetric ``y_err`` or from ``y_low``/``y_high``.

    ``control=True`` marks the negative control's series (drawn beneath the claim's, labelled as the control).

    Raises:
        ValueError: on mismatched lengths, non-finite values, or both ``y_err`` and ``y_low``/``y_high``.
    """
    gx, gy = _floats(f"{label}: x", x), _floats(f"{label}: y", y)
    _same_length(label, gx, gy)
    if y_err is not None and (y_low is not None or y_high is not None):
        raise ValueError(f"{label}: give either y_err or y_low/y_high, not both.")
    if (y_low is None) != (y_high is None):
        raise ValueError(f"{label}: give y_low and y_high together.")
    low = high = None
    if y_err is not None:
        err = _floats(f"{label}: y_err", y_err)
        _same_length(label, gx, err)
        low, high = (
            tuple(a - e for a, e in zip(gy, err, strict=True)),
            tuple(a + e for a, e in zip(gy, err, strict=True)),
        )
    elif y_low is not None and y_high is not None:
        low, high = _floats(f"{label}: y_low", y_low), _floats(f"{label}: y_high", y_high)
        _same_length(label, gx, low)
        _same_length(label, gx, high)
    return Points(label, gx, gy, low, high, fit, control)


def curve(label: str, x: ArrayLike, y: ArrayLike, *, kind: Literal["bound", "theory"] = "bound") -> Curve:
    """A :class:`Curve` from arrays (finite values, equal lengths)."""
    gx, gy = _floats(f"{label}: x", x), _floats(f"{label}: y", y)
    _same_length(label, gx, gy)
    return Curve(label, gx, gy, kind)


def loglog_figure(
    name: str,
    title: str,
    x_label: str,
    y_label: str,
    *series: Points,
    theory_slope: float | None = None,
    bounds: Sequence[Curve] = (),
    y_scale: Scale | None = None,
) -> FigureSpec:
    """A log-log figure: measured series with their fitted lines, the theory's slope and/or bound curves.

    ``y_scale="symlog"`` keeps values <= 0 on the figure (a log axis leaves them out and counts them).
    """
    slopes = () if theory_slope is None else (float(theory_slope),)
    return FigureSpec(name, title, x_label, y_label, tuple(series), tuple(bounds), slopes, y_scale=y_scale)


def bound_figure(
    name: str,
    title: str,
    x_label: str,
    y_label: str,
    *series: Points,
    bound: Curve,
    log_x: bool = False,
    log_y: bool = False,
    x_scale: Scale | None = None,
    y_scale: Scale | None = None,
) -> FigureSpec:
    """A scatter-against-bound figure (e.g. C2's ``E* - E(s)`` vs ``L(s) - L*`` under ``sqrt(2x/tau)``).

    Where values span decades from near 0, pass ``x_scale``/``y_scale`` ``"symlog"`` (or ``"log"``).
    """
    return FigureSpec(
        name, title, x_label, y_label, tuple(series), (bound,), (), log_x, log_y, x_scale, y_scale
    )


def _floats(name: str, values: ArrayLike) -> tuple[float, ...]:
    """``values`` as a tuple of finite floats."""
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(array)):
        raise ValueError(
            f"{name} contains NaN/inf; figures show finite values only (drop or fix those points)."
        )
    return tuple(float(v) for v in array)


def _same_length(label: str, reference: tuple[float, ...], other: tuple[float, ...]) -> None:
    """Raise ``ValueError`` unless ``other`` has as many values as ``reference``."""
    if len(other) != len(reference):
        raise ValueError(f"{label}: got {len(other)} values for {len(reference)} x values; pass one per x.")
