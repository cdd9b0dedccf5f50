"""The report of the m*(n) experiment: two figures and a Markdown page of tables.

- ``curves.png``: the primary metric against m/n (%), one panel per arm, one line per (regime, n) with the 95%
  Student-t interval over seeds, the backbone's own score dashed, [A]'s m* = 0.4 n as a vertical line;
- ``mstar.png``: m*(n)/n against n per (arm, regime), censored points as triangles pointing the way the bound
  goes, [A]'s 0.4 as a horizontal line;
- the Markdown: m*(n) per (metric, arm, regime, n) with plateau, tol, interval, m*/n beside 0.4, the curve's rise,
  the seed sd and the seeds the seed rule asks for; the slopes of log m* on log n beside 1/2 and 1; the difference
  slope(SSCRL) - slope(SCRL) per arm; the convergence check; the cost per step and the anchor pairs per second
  per (arm, regime, n), the cells' total wall time and the runs that computed them; the pairwise overlap of SCRL's
  sets against m / C; the means per m.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from crl._vocab import REGIME_LABELS
from crl.experiments.mstar.design import DataName, Grid, grid_cells
from crl.experiments.mstar.experiment import ArmOverlap
from crl.experiments.mstar.summary import LEVEL, METRICS, Curve, Summary
from crl.stats.saturation import SaturationInterval

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["A_RATIO", "markdown_report", "render_figures"]

A_RATIO = 0.4
"""[A]'s finding in its CLIP experiment: m* = 0.4 n."""

_MARKERS = "os^Dv<>p"
_CENSOR_MARKERS = {"none": "o", "left": "v", "right": "^"}


def _errors(curve: Curve) -> list[list[float]]:
    """Error-bar lengths below and above each mean (0 where the interval is undefined)."""
    below = [
        mean - low if math.isfinite(low) else 0.0 for mean, low in zip(curve.means, curve.lows, strict=True)
    ]
    above = [
        high - mean if math.isfinite(high) else 0.0
        for mean, high in zip(curve.means, curve.highs, strict=True)
    ]
    return [below, above]


def render_figures(summary: Summary, data: DataName, out: Path, *, title: str) -> tuple[Path, Path]:
    """Write ``out/curves.png`` and ``out/mstar.png`` (module docstring); returns their paths."""
    # matplotlib is slow to import: loaded only when a figure is drawn, not when the commands start
    import matplotlib

    matplotlib.use("Agg")
    # pyplot only after choosing the non-interactive Agg backend, so that no display is needed
    import matplotlib.pyplot as plt

    metric = METRICS[data][0]
    curves = [c for c in summary.curves if c.metric == metric and c.m]
    arms = sorted({c.arm for c in curves})
    out.mkdir(parents=True, exist_ok=True)
    columns = min(3, max(1, len(arms)))
    rows = -(-max(1, len(arms)) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(7.0 * columns, 4.2 * rows), squeeze=False)
    for axis in axes.flat[len(arms) :]:
        axis.set_visible(False)
    for axis, arm in zip(axes.flat, arms, strict=False):
        for index, curve in enumerate(c for c in curves if c.arm == arm):
            axis.errorbar(
                [100.0 * m / curve.n for m in curve.m],
                curve.means,
                yerr=_errors(curve),
                fmt="-" if curve.regime == "shared" else "--",
                marker=_MARKERS[index % len(_MARKERS)],
                capsize=2,
                label=f"{REGIME_LABELS[curve.regime]} n = {curve.n}",
            )
        if metric in summary.baseline:
            axis.axhline(summary.baseline[metric], color="black", linestyle=":", label="backbone, no head")
        axis.axvline(100 * A_RATIO, color="grey", linewidth=0.8, label="[A]'s m* = 0.4 n")
        axis.set_xscale("log")
        axis.set_xlabel("m / n (%)")
        axis.set_ylabel(metric)
        axis.set_title(arm, fontsize=9)
        axis.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    curves_path = _save(figure, title, out / "curves.png")
    figure, axis = plt.subplots(figsize=(6.0, 4.2))
    for arm in arms:
        for regime in ("shared", "independent"):
            found = [c for c in curves if c.arm == arm and c.regime == regime and c.saturation is not None]
            if not found:
                continue
            ratios = [c.saturation.saturation.m_star / c.n for c in found if c.saturation is not None]
            line = axis.plot(
                [c.n for c in found], ratios, "-" if regime == "shared" else "--", linewidth=0.8
            )[0]
            for curve, ratio in zip(found, ratios, strict=True):
                assert curve.saturation is not None
                marker = _CENSOR_MARKERS[curve.saturation.saturation.censoring]
                axis.plot([curve.n], [ratio], marker, color=line.get_color())
            line.set_label(f"{arm} {REGIME_LABELS[regime]}")
    axis.axhline(A_RATIO, color="grey", linewidth=0.8, label="[A]: 0.4")
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("n")
    axis.set_ylabel(f"m*(n) / n ({metric}; triangles: censored bounds)")
    axis.legend(fontsize=6)
    return curves_path, _save(figure, title, out / "mstar.png")


def _save(figure: Figure, title: str, path: Path) -> Path:
    """Title the figure, write it to ``path`` as a PNG and close it."""
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    # loaded by render_figures before any figure exists
    import matplotlib.pyplot as plt

    plt.close(figure)
    return path


def _m_star_text(found: SaturationInterval, n: int) -> tuple[str, str, str]:
    """(m*, its interval, m*/n) as table cells, the censoring written as <= or >=."""
    saturation = found.saturation
    prefix = {"none": "", "left": "<= ", "right": ">= "}[saturation.censoring]
    high = "inf" if math.isinf(found.high) else f"{found.high:g}"
    return (
        f"{prefix}{saturation.m_star:g}",
        f"[{found.low:g}, {high}]",
        f"{prefix}{saturation.m_star / n:.3f}",
    )


def _number(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """A Markdown table: the header of ``columns``, its rule, then one line per row of cells."""
    return [_line(columns), "|" + "---|" * len(columns), *(_line(row) for row in rows)]


def _line(cells: Sequence[object]) -> str:
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def _curve_cells(c: Curve) -> list[object]:
    """One curve's cells of the m*(n) table (the empty middle when it has too few cells for m*)."""
    head: list[object] = [c.metric, c.arm, REGIME_LABELS[c.regime], c.n, c.seeds]
    if c.saturation is None:
        return [*head, "(too few cells)", *[""] * 7, c.failed]
    m_star, interval, ratio = _m_star_text(c.saturation, c.n)
    found = c.saturation.saturation
    needed = c.seeds_needed if c.seeds_needed is not None else "flat"
    return [
        *head,
        f"{found.plateau:.4f}",
        f"{found.tol:.4f}",
        m_star,
        interval,
        ratio,
        _number(c.rise),
        _number(c.plateau_sd),
        needed,
        c.failed,
    ]


def _curve_rows(summary: Summary) -> list[str]:
    columns = (
        "metric",
        "arm",
        "regime",
        "n",
        "seeds",
        "plateau",
        "tol",
        "m*",
        "m* interval",
        "m*/n ([A]: 0.4)",
        "rise",
        "seed sd",
        "seeds needed",
        "failed",
    )
    return _table(columns, (_curve_cells(c) for c in summary.curves))


def _slope_rows(summary: Summary) -> list[str]:
    """The slopes per (metric, arm, regime), then the difference of the regimes' slopes per arm."""
    slopes = []
    for s in summary.slopes:
        points = ", ".join(
            f"{m:g}" + ("" if c == "none" else f" ({c})") for m, c in zip(s.m_star, s.censoring, strict=True)
        )
        slopes.append(
            (
                s.metric,
                s.arm,
                REGIME_LABELS[s.regime],
                list(s.ns),
                points,
                s.seeds,
                f"{s.point:.3f}",
                f"[{s.bound_low:.3f}, {s.bound_high:.3f}]",
                f"[{s.ci_low:.3f}, {s.ci_high:.3f}]",
            )
        )
    differences = (
        (
            metric,
            arm,
            f"{d.point:.3f}",
            f"[{d.bound_low:.3f}, {d.bound_high:.3f}]",
            f"[{d.ci_low:.3f}, {d.ci_high:.3f}]",
        )
        for (arm, metric), d in sorted(summary.differences.items())
    )
    ci = f"{LEVEL:.0%} CI"
    return [
        *_table(
            ("metric", "arm", "regime", "n", "m*(n) (censoring)", "seeds", "slope", "bounds on the data", ci),
            slopes,
        ),
        "",
        *_table(("metric", "arm", "slope(SSCRL) - slope(SCRL)", "bounds on the data", ci), differences),
    ]


def _cost_rows(summary: Summary) -> list[str]:
    """The cost table, then the total wall time of the stored cells and the runs that computed them."""
    columns = (
        "arm",
        "regime",
        "n",
        "b",
        "steps",
        "cells",
        "m: smallest, largest",
        "ms per step",
        "pairs/s",
        "cell wall s",
    )
    rows = (
        (
            c.arm,
            REGIME_LABELS[c.regime],
            c.n,
            c.batch,
            c.steps,
            c.cells,
            f"{c.m_low}, {c.m_high}",
            f"{c.ms_low:.1f}, {c.ms_high:.1f}",
            f"{c.pairs_per_s(c.ms_low):,.0f}, {c.pairs_per_s(c.ms_high):,.0f}",
            f"{c.cell_s:.1f}",
        )
        for c in summary.costs
    )
    runs = ", ".join(f"`{run}` ({count})" for run, count in summary.runs.items())
    return [
        *_table(columns, rows),
        "",
        f"The {sum(summary.runs.values())} stored cells took {summary.cell_seconds / 3600:.2f} hours of cell wall "
        f"time in all (summed over cells; workers run side by side). Cells by the run that computed them: {runs}.",
    ]


def _overlap_rows(overlaps: Sequence[ArmOverlap]) -> list[str]:
    """SCRL's pairwise set overlap per (arm, n, m) beside m / C (independent uniform sets)."""
    columns = ("arm", "n", "C", "m", "m / C", "overlap: mean", "min, max", "uniform sets")
    rows = (
        (
            row.arm,
            row.n,
            row.candidates,
            row.m,
            f"{row.m / row.candidates:.4f}",
            f"{row.overlap.mean:.4f}",
            f"{row.overlap.low:.4f}, {row.overlap.high:.4f}",
            f"{row.overlap.expected:.4f}",
        )
        for row in overlaps
    )
    return _table(columns, rows)


def _contrast_rows(summary: Summary) -> list[str]:
    """Arm a - arm b per (metric, regime, n, m), paired by seed, with its interval."""
    columns = ("metric", "arms", "regime", "n", "m", "m/n", "mean difference", "95% interval", "seeds")
    rows = (
        (
            c.metric,
            f"{c.first} - {c.second}",
            REGIME_LABELS[c.regime],
            c.n,
            c.m,
            f"{c.m / c.n:.3f}",
            f"{c.mean:+.4f}",
            f"[{c.low:+.4f}, {c.high:+.4f}]",
            c.seeds,
        )
        for c in summary.contrasts
    )
    return _table(columns, rows)


def _means_rows(summary: Summary) -> list[str]:
    columns = ("metric", "arm", "regime", "n", "m", "m/n", "mean", "95% interval")
    rows = (
        (
            c.metric,
            c.arm,
            REGIME_LABELS[c.regime],
            c.n,
            m,
            f"{m / c.n:.3f}",
            f"{mean:.4f}",
            f"[{low:.4f}, {high:.4f}]",
        )
        for c in summary.curves
        for m, mean, low, high in zip(c.m, c.means, c.lows, c.highs, strict=True)
    )
    return _table(columns, rows)


def markdown_report(
    summary: Summary,
    data: DataName,
    grid: Grid,
    *,
    fidelity: str,
    run_id: str,
    commit: str,
    overlaps: Sequence[ArmOverlap],
) -> str:
    """The tables of the summary and SCRL's set ``overlaps`` as Markdown, named by the run id and the commit
    (module docstring)."""
    lines = [
        f"# m*(n) on {data} ({fidelity})",
        "",
        f"Written by run `{run_id}` at commit `{commit}`, from {sum(summary.runs.values())} stored cells of the "
        f"grid's {len(grid_cells(data, grid))} (the runs that computed them: under Cost). Grid: n = "
        f"{list(grid.ns)}, m/n = {list(grid.fractions)} and m = "
        f"{list(grid.absolute)}, {grid.seeds} seeds, E = {grid.epochs} epochs; disjoint pool ({grid.pool_ratio} n) at "
        f"n = {list(grid.disjoint_ns)}; fixed budget of {grid.budget_anchors} anchors at n = {list(grid.budget_ns)}"
        + (f"; ablation at n = {list(grid.ablation_ns)}" if grid.ablation_ns else "")
        + f". Descriptive, not a verdict: every interval is at {LEVEL:.0%}.",
        "",
        "Seeds the seed rule asks for (the largest over the in-sample curves of the primary metric; flat curves, "
        f"rise < 4% of the plateau, left out): {summary.seeds_rule if summary.seeds_rule is not None else 'none'}.",
        "",
        "Backbone, no head: "
        + (
            ", ".join(f"{k} {v:.4f}" for k, v in sorted(summary.baseline.items()) if k != "status")
            or "not computed"
        ),
        "",
        "## m*(n)",
        "",
        *_curve_rows(summary),
        "",
        "## Slopes of log m* on log n",
        "",
        *_slope_rows(summary),
        "",
        *(
            [
                "## Paired contrasts: arm a - arm b at the same seed, n and m (exact - capped loss; disjoint - "
                "in-sample negatives)",
                "",
                *_contrast_rows(summary),
                "",
            ]
            if summary.contrasts
            else []
        ),
        "## Convergence: the largest |last-epoch change| / loss drop over the cells (converged: < 0.01)",
        "",
        *_table(
            ("arm", "n", "cells", "worst"),
            ((c.arm, c.n, c.cells, f"{c.worst:.4f}") for c in summary.convergence),
        ),
        "",
        "## Cost (medians over seeds; ms per step and pairs/s at the smallest and the largest m)",
        "",
        *_cost_rows(summary),
        "",
        "## SCRL's sets: pairwise overlap |S_i & S_k| / m over 64 anchors of the first seed (1: one shared set)",
        "",
        *_overlap_rows(overlaps),
        "",
        "## Means per m",
        "",
        *_means_rows(summary),
    ]
    return "\n".join(lines) + "\n"
