"""Draws a claim's :class:`~crl.claims.FigureSpec` to PNG on matplotlib's Agg canvas (no pyplot, no display).

A log-log figure shows each measured series with its interval bars and its fitted power law (a dashed line;
the slope and its CI are in the series' legend entry), the theory's slope as a dotted line through the first
series' centre, and bound curves as solid lines; a scatter-against-bound figure is the same drawing on linear,
log or symlog axes. Points are drawn above every line; a control's series has open markers beneath the
claim's; identical curves are drawn once. The legend sits outside the axes, so that it covers no data. Every
figure carries its run id in a footnote and in the PNG's metadata, so it can be traced to the run that made it.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import SymmetricalLogLocator
from numpy.typing import NDArray

from crl import __version__
from crl.claims.base import Curve, FigureSpec, Points

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
_CURVE_STYLE = {
    "bound": {"color": "tab:red", "linestyle": "-"},
    "theory": {"color": "0.35", "linestyle": "-."},
}
_Z_CURVE, _Z_FIT, _Z_CONTROL, _Z_CLAIM = 1.5, 2.0, 3.0, 4.0


@dataclass(frozen=True)
class _MergedCurve:
    """Curves with the same kind and points, drawn as one line under their joined labels."""

    curve: Curve
    labels: tuple[str, ...]


def render_figure(spec: FigureSpec, path: Path, *, run_id: str) -> Path:
    """Draw ``spec`` to the PNG file ``path`` (parent folders are created) and return ``path``.

    The footnote names crl's version and the run; it is also the PNG's ``Description`` metadata. Points that
    a logarithmic axis cannot show (values <= 0) are left out and counted in the footnote, never dropped
    silently (a symlog axis shows them).
    """
    figure = Figure(figsize=(10.0, 4.8), dpi=110)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    hidden = 0
    for index, series in enumerate(spec.points):
        hidden += _draw_points(axes, series, index, spec)
    if spec.reference_slopes and spec.points:
        _draw_reference_slopes(axes, spec.points[0], spec.reference_slopes, spec)
    for merged in merge_curves(spec.curves):
        hidden += _draw_curve(axes, merged, spec)
    _set_scale(axes, "x", spec.xscale, _values(spec, "x"))
    _set_scale(axes, "y", spec.yscale, _values(spec, "y"))
    axes.set_xlabel(spec.x_label)
    axes.set_ylabel(spec.y_label)
    axes.set_title(spec.title, fontsize=11)
    axes.grid(alpha=0.3, which="both")
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    footnote = f"crl {__version__}, run {run_id}"
    if hidden:
        footnote += f"; {hidden} value(s) <= 0 not shown on the log axes"
    figure.text(0.01, 0.01, footnote, fontsize=7, color="0.4")
    figure.tight_layout(rect=(0.0, 0.03, 1.0, 1.0))
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {"Software": f"crl {__version__}", "Description": footnote}
    figure.savefig(path, format="png", bbox_inches="tight", metadata=metadata)
    return path


def merge_curves(curves: Sequence[Curve]) -> list[_MergedCurve]:
    """The curves with identical kind, x and y merged into one, keeping their distinct labels in order."""
    merged: dict[tuple[str, tuple[float, ...], tuple[float, ...]], list[Curve]] = {}
    for item in curves:
        merged.setdefault((item.kind, item.x, item.y), []).append(item)
    return [
        _MergedCurve(group[0], tuple(dict.fromkeys(item.label for item in group)))
        for group in merged.values()
    ]


def series_label(series: Points) -> str:
    """The legend entry of a series: "control: " before a control's label, and the fitted slope with its CI."""
    label = series.label
    if series.control and not label.lower().startswith("control"):
        label = f"control: {label}"
    if series.fit is not None:
        fit = series.fit
        label += f" (fit slope {fit.slope:.3f} [{fit.ci_low:.3f}, {fit.ci_high:.3f}] at {fit.ci_level:.5g})"
    return label


def _draw_points(axes: Axes, series: Points, index: int, spec: FigureSpec) -> int:
    """Plot one measured series (with bars and fitted line); return how many points the log axes hide."""
    color = f"C{index % 10}"
    x, y = np.asarray(series.x), np.asarray(series.y)
    shown = _visible(x, y, spec)
    bars = None
    if series.y_low is not None and series.y_high is not None:
        low, high = np.asarray(series.y_low), np.asarray(series.y_high)
        bars = np.clip(np.vstack([y - low, high - y])[:, shown], 0.0, None)
    axes.errorbar(
        x[shown],
        y[shown],
        yerr=bars,
        fmt=_MARKERS[index % len(_MARKERS)],
        ms=6 if series.control else 4,
        mfc="none" if series.control else color,
        capsize=3,
        color=color,
        label=series_label(series),
        zorder=_Z_CONTROL if series.control else _Z_CLAIM,
    )
    if series.fit is not None and np.any(shown):
        grid = _line_grid(x[shown], spec.xscale == "log")
        axes.plot(grid, series.fit.predict(grid), "--", color=color, linewidth=1.2, zorder=_Z_FIT)
    return int(np.sum(~shown))


def _draw_reference_slopes(axes: Axes, anchor: Points, slopes: tuple[float, ...], spec: FigureSpec) -> None:
    """Dotted lines ``y0 (x / x0)^slope`` through the geometric centre (x0, y0) of the anchor series."""
    x, y = np.asarray(anchor.x), np.asarray(anchor.y)
    usable = (x > 0) & (y > 0)
    if not np.any(usable):
        return
    x0 = float(np.exp(np.mean(np.log(x[usable]))))
    y0 = float(np.exp(np.mean(np.log(y[usable]))))
    if anchor.fit is not None:
        y0 = float(anchor.fit.predict(x0))
    grid = _line_grid(x[usable], spec.xscale == "log")
    for slope in slopes:
        label = f"theory: slope {slope:g}"
        axes.plot(
            grid, y0 * (grid / x0) ** slope, ":", color="black", linewidth=1.5, label=label, zorder=_Z_FIT
        )


def _draw_curve(axes: Axes, merged: _MergedCurve, spec: FigureSpec) -> int:
    """Plot a bound or theory curve under its joined labels; return how many of its points log axes hide."""
    item = merged.curve
    x, y = np.asarray(item.x), np.asarray(item.y)
    shown = _visible(x, y, spec)
    style = _CURVE_STYLE[item.kind]
    axes.plot(
        x[shown],
        y[shown],
        linewidth=1.5,
        label="; ".join(merged.labels),
        color=style["color"],
        linestyle=style["linestyle"],
        zorder=_Z_CURVE,
    )
    return int(np.sum(~shown))


def _set_scale(axes: Axes, axis: str, scale: str, values: NDArray[Any]) -> None:
    """Set one axis's scale; a symlog axis is linear within the smallest non-zero |value| of the data."""
    setter = axes.set_xscale if axis == "x" else axes.set_yscale
    if scale != "symlog":
        setter(scale)
        return
    magnitudes = np.abs(values[values != 0])
    top = float(magnitudes.max()) if magnitudes.size else 1.0
    threshold = float(magnitudes.min()) if magnitudes.size else 1.0
    linthresh = max(threshold, top * 1e-6)
    setter("symlog", linthresh=linthresh)
    (axes.xaxis if axis == "x" else axes.yaxis).set_major_locator(_OutsideLinearRegion(linthresh))


class _OutsideLinearRegion(SymmetricalLogLocator):
    """A symlog axis's decade ticks without those inside its linear region (0 < |t| < linthresh): there a tick
    sits a fraction of a decade's length from 0 and from the next, so labels such as 10^-7, 0 and -10^-9
    overlapped (C1(a)'s y axis). 0 and every |t| >= linthresh (less rounding) stay."""

    def __init__(self, linthresh: float) -> None:
        super().__init__(linthresh=linthresh, base=10)
        self.threshold = linthresh

    def tick_values(self, vmin: float, vmax: float) -> Sequence[float]:
        """The parent's ticks between ``vmin`` and ``vmax``, those strictly inside the linear region dropped."""
        ticks = super().tick_values(vmin, vmax)
        return [t for t in ticks if t == 0 or abs(t) >= 0.999 * self.threshold]


def _values(spec: FigureSpec, axis: str) -> NDArray[Any]:
    """Every x (or y) value of the figure's points and curves."""
    chunks = [np.asarray(s.x if axis == "x" else s.y, dtype=float) for s in spec.points]
    chunks += [np.asarray(c.x if axis == "x" else c.y, dtype=float) for c in spec.curves]
    return np.concatenate(chunks) if chunks else np.zeros(0)


def _visible(x: NDArray[Any], y: NDArray[Any], spec: FigureSpec) -> NDArray[Any]:
    """Mask of the points the figure's axes can show (positive coordinates on log axes)."""
    shown = np.ones(x.shape, dtype=bool)
    if spec.xscale == "log":
        shown &= x > 0
    if spec.yscale == "log":
        shown &= y > 0
    return shown


def _line_grid(x: NDArray[Any], log_x: bool) -> NDArray[Any]:
    """100 x values spanning the data, evenly spaced on the figure's x axis."""
    low, high = float(np.min(x)), float(np.max(x))
    return np.geomspace(low, high, 100) if log_x and low > 0 else np.linspace(low, high, 100)
