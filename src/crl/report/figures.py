"""Draws a claim's :class:`~crl.claims.FigureSpec` to PNG on matplotlib's Agg canvas (no pyplot, no display).

A log-log figure shows each measured series with its interval bars, the fitted power law as a dashed line
labelled with the slope and its CI, the theory's slope as a dotted line through the first series' centre, and
bound curves as solid lines; a scatter-against-bound figure is the same drawing on linear axes. Every figure
carries its run id in a footnote and in the PNG's metadata, so it can be traced to the run that made it.
"""

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from numpy.typing import NDArray

from crl import __version__
from crl.claims.base import Curve, FigureSpec, Points

_LEGEND_INSIDE_MAX = 5
_CURVE_STYLE = {
    "bound": {"color": "tab:red", "linestyle": "-"},
    "theory": {"color": "0.35", "linestyle": "-."},
}


def render_figure(spec: FigureSpec, path: Path, *, run_id: str) -> Path:
    """Draw ``spec`` to the PNG file ``path`` (parent folders are created) and return ``path``.

    A legend of more than five entries goes to the right of the axes, so that it covers no data. The
    footnote names crl's version and the run; it is also the PNG's ``Description`` metadata. Points that
    a logarithmic axis cannot show (values <= 0) are left out and counted in the footnote, never dropped
    silently.
    """
    figure = Figure(figsize=(6.4, 4.6), dpi=110)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    hidden = 0
    for index, series in enumerate(spec.points):
        hidden += _draw_points(axes, series, f"C{index}", spec)
    if spec.reference_slopes and spec.points:
        _draw_reference_slopes(axes, spec.points[0], spec.reference_slopes, spec.log_x)
    for item in spec.curves:
        hidden += _draw_curve(axes, item, spec)
    axes.set_xscale("log" if spec.log_x else "linear")
    axes.set_yscale("log" if spec.log_y else "linear")
    axes.set_xlabel(spec.x_label)
    axes.set_ylabel(spec.y_label)
    axes.set_title(spec.title, fontsize=11)
    axes.grid(alpha=0.3, which="both")
    if len(axes.get_legend_handles_labels()[0]) > _LEGEND_INSIDE_MAX:
        figure.set_size_inches(10.0, 4.8)
        axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    else:
        axes.legend(fontsize=8)
    footnote = f"crl {__version__}, run {run_id}"
    if hidden:
        footnote += f"; {hidden} value(s) <= 0 not shown on the log axes"
    figure.text(0.01, 0.01, footnote, fontsize=7, color="0.4")
    figure.tight_layout(rect=(0.0, 0.03, 1.0, 1.0))
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {"Software": f"crl {__version__}", "Description": footnote}
    figure.savefig(path, format="png", bbox_inches="tight", metadata=metadata)
    return path


def _draw_points(axes: Axes, series: Points, color: str, spec: FigureSpec) -> int:
    """Plot one measured series (with bars and fitted line); return how many points the log axes hide."""
    x, y = np.asarray(series.x), np.asarray(series.y)
    shown = _visible(x, y, spec)
    bars = None
    if series.y_low is not None and series.y_high is not None:
        low, high = np.asarray(series.y_low), np.asarray(series.y_high)
        bars = np.clip(np.vstack([y - low, high - y])[:, shown], 0.0, None)
    axes.errorbar(x[shown], y[shown], yerr=bars, fmt="o", ms=4, capsize=3, color=color, label=series.label)
    if series.fit is not None and np.any(shown):
        fit = series.fit
        grid = _line_grid(x[shown], spec.log_x)
        label = f"{series.label} fit: slope {fit.slope:.3f} [{fit.ci_low:.3f}, {fit.ci_high:.3f}]"
        axes.plot(grid, fit.predict(grid), "--", color=color, linewidth=1.2, label=label)
    return int(np.sum(~shown))


def _draw_reference_slopes(axes: Axes, anchor: Points, slopes: tuple[float, ...], log_x: bool) -> None:
    """Dotted lines ``y0 (x / x0)^slope`` through the geometric centre (x0, y0) of the anchor series."""
    x, y = np.asarray(anchor.x), np.asarray(anchor.y)
    usable = (x > 0) & (y > 0)
    if not np.any(usable):
        return
    x0 = float(np.exp(np.mean(np.log(x[usable]))))
    y0 = float(np.exp(np.mean(np.log(y[usable]))))
    if anchor.fit is not None:
        y0 = float(anchor.fit.predict(x0))
    grid = _line_grid(x[usable], log_x)
    for slope in slopes:
        label = f"theory: slope {slope:g}"
        axes.plot(grid, y0 * (grid / x0) ** slope, ":", color="black", linewidth=1.5, label=label)


def _draw_curve(axes: Axes, item: Curve, spec: FigureSpec) -> int:
    """Plot a bound or theory curve; return how many of its points the log axes hide."""
    x, y = np.asarray(item.x), np.asarray(item.y)
    shown = _visible(x, y, spec)
    style = _CURVE_STYLE[item.kind]
    axes.plot(
        x[shown],
        y[shown],
        linewidth=1.5,
        label=item.label,
        color=style["color"],
        linestyle=style["linestyle"],
    )
    return int(np.sum(~shown))


def _visible(x: NDArray[Any], y: NDArray[Any], spec: FigureSpec) -> NDArray[Any]:
    """Mask of the points the figure's axes can show (positive coordinates on log axes)."""
    shown = np.ones(x.shape, dtype=bool)
    if spec.log_x:
        shown &= x > 0
    if spec.log_y:
        shown &= y > 0
    return shown


def _line_grid(x: NDArray[Any], log_x: bool) -> NDArray[Any]:
    """100 x values spanning the data, evenly spaced on the figure's x axis."""
    low, high = float(np.min(x)), float(np.max(x))
    return np.geomspace(low, high, 100) if log_x and low > 0 else np.linspace(low, high, 100)
