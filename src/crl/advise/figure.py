"""The advisor's figure: predicted held-out error contours over (n, m), the pilot and check cells, and m*(n).

Drawn on matplotlib's Agg canvas (no pyplot, no display), log-log axes: filled contours of the fitted surface's
prediction, the pilot cells (dots), the check cells when present (squares), the user's (n, m) (a star) and,
when the advice is supported, the curve m*(n) with its interval band (a withheld answer draws no m*).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from crl.advise.advice import Advice
from crl.advise.heldout import RATE_METRICS
from crl.advise.surface import SurfaceFit, SurfaceParams

__all__ = ["draw_advice"]


def _m_star_curve(fit: SurfaceFit, n_grid: np.ndarray, tol: float) -> np.ndarray:
    """(3, len(n_grid)): m*(n) estimate, low and high."""
    rows = []
    for n in n_grid:

        def m_star(params: SurfaceParams, n: float = float(n)) -> float:
            return params.saturation(n, tol * float(params.plateau(n)))

        interval = fit.quantity(m_star)
        rows.append((interval.estimate, interval.low, interval.high))
    return np.array(rows).T


def draw_advice(
    fit: SurfaceFit,
    advice: Advice,
    path: str | Path,
    *,
    pilot: Sequence[tuple[int, int]],
    checks: Sequence[tuple[int, int]] = (),
    metric: str = "error",
) -> Path:
    """Write the PNG to ``path`` and return it."""
    points = [*pilot, *checks, (advice.n, advice.m)]
    n_lo, n_hi = min(p[0] for p in points) / 1.5, max(p[0] for p in points) * 2.5
    top = max(p[1] for p in points)
    m_lo, m_hi = 1.0, (max(top, advice.m_star.high) if advice.supported else top) * 2.0
    n_grid, m_grid = np.geomspace(n_lo, n_hi, 80), np.geomspace(m_lo, m_hi, 80)
    observed = [cell[2] for cell in fit.cells]
    low, high = 0.8 * min(observed), 1.5 * max(observed)
    if metric in RATE_METRICS:
        high = max(min(high, 1.0), max(observed))
    surface = np.clip(fit.predicted_surface(n_grid[None, :], m_grid[:, None]), low, high)
    figure = Figure(figsize=(7.5, 6.0))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    filled = axes.contourf(
        n_grid, m_grid, surface, levels=np.geomspace(low, high, 15), norm=LogNorm(low, high), cmap="viridis"
    )
    figure.colorbar(filled, ax=axes, label=f"predicted held-out {metric}", format="%.3g")
    if advice.supported:
        curve = _m_star_curve(fit, n_grid[::4], advice.tolerance)
        axes.plot(n_grid[::4], curve[0], color="magenta", linewidth=2, label="m*(n)")
        axes.fill_between(
            n_grid[::4],
            curve[1],
            curve[2],
            color="magenta",
            alpha=0.15,
            label=f"m* {advice.m_star.level:.0%} interval",
        )
    axes.scatter(*zip(*pilot, strict=True), color="tab:red", edgecolor="k", zorder=4, label="pilot cells")
    if checks:
        axes.scatter(
            *zip(*checks, strict=True),
            marker="s",
            color="tab:orange",
            edgecolor="k",
            zorder=4,
            label="check cells",
        )
    axes.scatter(
        [advice.n], [advice.m], marker="*", s=250, color="gold", edgecolor="k", zorder=5, label="your (n, m)"
    )
    axes.set(xscale="log", yscale="log", xlim=(n_lo, n_hi), ylim=(m_lo, m_hi), xlabel="n (training pairs)")
    axes.set_ylabel("m (negatives)")
    figure.suptitle("crl advise: predicted held-out error over (n, m), clipped to the pilot's range")
    axes.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=3, fontsize=7, frameon=False)
    target = Path(path)
    figure.savefig(target, dpi=120)
    return target
