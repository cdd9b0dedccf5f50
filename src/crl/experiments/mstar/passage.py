"""The real-data m*(n) read by the first-passage point m_q at fixed tolerances, and [A]'s shape (docs/claims/C6_real.md,
"m_q at fixed tolerances").

Everything is descriptive at :data:`LEVEL` = 95%, from the stored cells, by :mod:`crl.stats.saturation`:

- per (arm, regime, n, metric) and q in :data:`TOLERANCES` (1, 2, 5% of the plateau; primary 5%): m_q, the
  smallest m at which the seed-mean curve comes within q |P| of its plateau P (the mean at the two largest grid m),
  interpolated log-log between grid points and censored at the grid's ends; its interval is the delete-one-seed
  jackknife Student-t interval of log m_q on S - 1 degrees of freedom, back-transformed (an end that censoring
  leaves open is infinite);
- per (arm, regime, metric, q): the least-squares slope of log m_q on log n over the seeds finished at every cell
  of the arm, censored points as half-lines, with its jackknife interval; per (arm, metric, q) the difference
  slope(SSCRL) - slope(SCRL) likewise;
- [A]'s shape per (arm, regime, n, metric): the share of the plateau reached, mean(m) / P, at m/n = 1, 10, 40, 70
  and 100% (log-linear interpolation in m between grid points), beside [A]'s CLIP figure (5, 53, 99, 100, 100%),
  and whether the curve is steep to 40% and flat from 40% (share at 40% >= 95% and at 10% <= 80%).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crl._vocab import REGIME_LABELS, Regime
from crl.experiments.mstar.design import DataName, Grid
from crl.experiments.mstar.summary import METRICS, Table, complete_seeds, metric_table, seed_matrix
from crl.stats.saturation import (
    CENSOR_NAMES,
    JackknifeBounds,
    SlopeBounds,
    combine_slopes,
    jackknife_bounds,
    jackknife_weights,
    passage_interval,
    passage_slopes,
    passages_by_n,
)
from crl.sweep import CellRecord

__all__ = [
    "CLIP_SHARES",
    "LEVEL",
    "PRIMARY_Q",
    "SHARE_POINTS",
    "TOLERANCES",
    "PassagePoint",
    "PassageSlope",
    "Shape",
    "passage_markdown",
    "passage_points",
    "passage_slopes_of",
    "render_passage_figure",
    "shapes",
    "table_sections",
]

LEVEL = 0.95
TOLERANCES = (0.01, 0.02, 0.05)
PRIMARY_Q = 0.05
"""Registered before the recomputation (docs/claims/C6_real.md)."""
SHARE_POINTS = (0.01, 0.10, 0.40, 0.70, 1.00)
CLIP_SHARES = (0.05, 0.53, 0.99, 1.00, 1.00)
"""[A]'s CLIP figure read at m/n = 1, 10, 40, 70, 100%: the share of the plateau reached."""


@dataclass(frozen=True)
class PassagePoint:
    """m_q of one (arm, regime, n, metric) curve at tolerance q, with its jackknife interval over ``seeds``."""

    arm: str
    regime: Regime
    n: int
    metric: str
    q: float
    m_q: float
    low: float
    high: float
    censoring: str
    seeds: int


@dataclass(frozen=True)
class PassageSlope:
    """The slope of log m_q on log n of one (arm, regime or "SSCRL - SCRL", metric, q) with its jackknife
    interval; ``censored`` counts the (n) points censored on the data."""

    arm: str
    regime: str
    metric: str
    q: float
    statistic: JackknifeBounds
    censored: int


@dataclass(frozen=True)
class Shape:
    """[A]'s shape of one curve: the share of the plateau at each m/n of :data:`SHARE_POINTS`."""

    arm: str
    regime: Regime
    n: int
    metric: str
    shares: tuple[float, ...]

    @property
    def steep_then_flat(self) -> bool:
        """Share at 40% >= 95% and share at 10% <= 80% (CLIP: 99% and 53%)."""
        return self.shares[2] >= 0.95 and self.shares[1] <= 0.80


def passage_points(table: Table, metric: str, q: float) -> list[PassagePoint]:
    """m_q with its jackknife interval for every curve of ``table`` with at least 3 grid m and 3 seeds."""
    found = []
    for (arm, regime, n), by_m in sorted(table.items()):
        ms, values = seed_matrix(by_m, complete_seeds(by_m))
        if len(ms) < 3 or values.shape[0] < 3:
            continue
        passages = passages_by_n([ms], [values], jackknife_weights(values.shape[0]), q)
        interval = passage_interval(passages, 0, LEVEL)
        found.append(
            PassagePoint(
                arm,
                regime,
                n,
                metric,
                q,
                math.exp(interval.point),
                math.exp(interval.ci_low),
                math.exp(interval.ci_high),
                CENSOR_NAMES[int(passages.censor[0, 0])],
                int(values.shape[0]),
            )
        )
    return found


def passage_slopes_of(table: Table, metric: str, q: float) -> list[PassageSlope]:
    """Per arm, each regime's slope of log m_q on log n over the n it holds with at least 3 m, and the regimes'
    difference where both hold the same n, each on the seeds finished at every cell it reads (a regime's own seeds
    for its slope, the seeds both finished for the difference; a slope with fewer than 2 n or 3 common seeds is left
    out)."""
    found = []
    for arm in sorted({key[0] for key in table}):
        regimes = sorted({key[1] for key in table if key[0] == arm}, reverse=True)
        held = {
            regime: sorted(key[2] for key in table if key[:2] == (arm, regime) and len(table[key]) >= 3)
            for regime in regimes
        }
        slopes: dict[Regime, tuple[SlopeBounds, int]] = {}
        for regime in regimes:
            fitted = _regime_slopes(table, arm, [regime], held[regime], q)
            if fitted is not None:
                slopes[regime] = fitted[regime]
                bounds, censored = fitted[regime]
                found.append(
                    PassageSlope(
                        arm, REGIME_LABELS[regime], metric, q, jackknife_bounds(bounds, LEVEL), censored
                    )
                )
        if {"shared", "independent"} <= set(slopes) and held["shared"] == held["independent"]:
            paired = _regime_slopes(table, arm, ["shared", "independent"], held["shared"], q)
            if paired is not None:
                difference = combine_slopes([(1.0, paired["shared"][0]), (-1.0, paired["independent"][0])])
                found.append(
                    PassageSlope(arm, "SSCRL - SCRL", metric, q, jackknife_bounds(difference, LEVEL), -1)
                )
    return found


def _regime_slopes(
    table: Table, arm: str, regimes: Sequence[Regime], ns: Sequence[int], q: float
) -> dict[Regime, tuple[SlopeBounds, int]] | None:
    """Each of ``regimes``' slope of log m_q on log ``ns`` with its censored-n count, on the seeds finished at every
    one of their cells (None with fewer than 2 n, a cell of fewer than 3 seeds, or fewer than 3 common seeds)."""
    keys = [(arm, regime, n) for regime in regimes for n in ns]
    if len(ns) < 2 or any(key not in table or len(table[key]) < 3 for key in keys):
        return None
    common = sorted(set.intersection(*(set(complete_seeds(table[key])) for key in keys)))
    if len(common) < 3:
        return None
    rows = jackknife_weights(len(common))
    log_n = np.log(np.asarray(ns, dtype=np.float64))
    found = {}
    for regime in regimes:
        matrices = [seed_matrix(table[(arm, regime, n)], common) for n in ns]
        passages = passages_by_n([ms for ms, _ in matrices], [v for _, v in matrices], rows, q)
        found[regime] = (passage_slopes(log_n, passages), int(np.count_nonzero(passages.censor[0])))
    return found


def _share_at(ms: Sequence[int], means: np.ndarray, m: float) -> float:
    """The mean at ``m``, log-linear in m between grid points (the nearest end outside the grid)."""
    return float(np.interp(math.log(m), np.log(np.asarray(ms, dtype=np.float64)), means))


def shapes(table: Table, metric: str) -> list[Shape]:
    """[A]'s shape (module docstring) of every curve with at least 3 grid m."""
    found = []
    for (arm, regime, n), by_m in sorted(table.items()):
        ms, values = seed_matrix(by_m, complete_seeds(by_m))
        if len(ms) < 3 or values.shape[0] < 1:
            continue
        means = values.mean(axis=0)
        plateau = float(means[-2:].mean())
        shares = tuple(_share_at(ms, means, max(1.0, f * n)) / plateau for f in SHARE_POINTS)
        found.append(Shape(arm, regime, n, metric, shares))
    return found


def _bounded(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def passage_markdown(records: Sequence[CellRecord], data: DataName, grid: Grid, *, source: str) -> str:
    """The m_q tables at every q of :data:`TOLERANCES`, the slopes and [A]'s shape, as a Markdown section."""
    lines = [
        "## m_q at fixed tolerances, and [A]'s shape",
        "",
        f'From {source}; docs/claims/C6_real.md, "m_q at fixed tolerances" (primary q = {PRIMARY_Q:g}). '
        f"Intervals at {LEVEL:g}: delete-one-seed jackknife Student-t over the seeds finished at every m "
        "(S - 1 degrees of freedom); an end printed inf or -inf is one that censoring leaves open "
        "(`>=`: right-censored at the second-largest grid m; `<=`: left-censored at the smallest).",
    ]
    for metric in METRICS[data]:
        table, _ = metric_table(records, data, grid, metric)
        lines += table_sections(table, metric)
    return "\n".join(lines) + "\n"


def table_sections(table: Table, metric: str) -> list[str]:
    """The m_q table and slopes at every q of :data:`TOLERANCES`, then [A]'s shape, of one metric's table (Markdown
    lines)."""
    lines = []
    for q in TOLERANCES:
        lines += _passage_section(table, metric, q)
    return lines + _shape_section(table, metric)


def _passage_section(table: Table, metric: str, q: float) -> list[str]:
    points = passage_points(table, metric, q)
    primary = " (primary)" if q == PRIMARY_Q else ""
    lines = [
        "",
        f"### {metric}, q = {q:g}{primary}",
        "",
        "| arm | regime | n | m_q [95% CI] | m_q / n | seeds |",
        "|---|---|---|---|---|---|",
    ]
    for p in points:
        mark = {"right-censored": ">=", "left-censored": "<="}.get(p.censoring, "")
        lines.append(
            f"| {p.arm} | {REGIME_LABELS[p.regime]} | {p.n} | {mark}{p.m_q:.3g} [{_bounded(p.low)}, "
            f"{_bounded(p.high)}] | {p.m_q / p.n:.3g} | {p.seeds} |"
        )
    lines += [
        "",
        "| arm | slope of log m_q on log n | estimate [95% CI] | bounds on the data | censored n | seeds |",
        "|---|---|---|---|---|---|",
    ]
    for s in passage_slopes_of(table, metric, q):
        stat = s.statistic
        censored = "" if s.censored < 0 else str(s.censored)
        lines.append(
            f"| {s.arm} | {s.regime} | {stat.point:.3g} [{_bounded(stat.ci_low)}, {_bounded(stat.ci_high)}] | "
            f"[{_bounded(stat.bound_low)}, {_bounded(stat.bound_high)}] | {censored} | {stat.seeds} |"
        )
    return lines


def _shape_section(table: Table, metric: str) -> list[str]:
    header = " | ".join(f"{f:.0%}" for f in SHARE_POINTS)
    clip = " | ".join(f"{share:.0%}" for share in CLIP_SHARES)
    lines = [
        "",
        f"### {metric}: share of the plateau reached at m/n (as [A] reads its CLIP figure)",
        "",
        f"| arm | regime | n | {header} | steep to 40%, flat after |",
        "|---|---|---|" + "---|" * len(SHARE_POINTS) + "---|",
        f"| [A]'s CLIP | SSCRL | 5.6M-14M | {clip} | yes |",
    ]
    for shape in shapes(table, metric):
        shares = " | ".join(f"{share:.0%}" for share in shape.shares)
        flag = "yes" if shape.steep_then_flat else "no"
        lines.append(f"| {shape.arm} | {REGIME_LABELS[shape.regime]} | {shape.n} | {shares} | {flag} |")
    return lines


def render_passage_figure(
    records: Sequence[CellRecord], data: DataName, grid: Grid, path: Path, *, title: str
) -> Path:
    """``path``: m_q(n)/n of the in-sample arm's primary metric against n, one panel per q of
    :data:`TOLERANCES`, SSCRL solid and SCRL dashed, with the jackknife intervals as bars and censored points as
    triangles; [A]'s 0.4 as a horizontal line."""
    # matplotlib is slow to import: loaded only when a figure is drawn, not when the commands start
    import matplotlib

    matplotlib.use("Agg")
    # pyplot only after choosing the non-interactive Agg backend, so that no display is needed
    import matplotlib.pyplot as plt

    metric = METRICS[data][0]
    table, _ = metric_table(records, data, grid, metric)
    figure, axes = plt.subplots(1, len(TOLERANCES), figsize=(5.0 * len(TOLERANCES), 4.0), squeeze=False)
    for axis, q in zip(axes[0], TOLERANCES, strict=True):
        points = [p for p in passage_points(table, metric, q) if p.arm == "in_sample"]
        for regime, style in (("shared", "-o"), ("independent", "--s")):
            mine = [p for p in points if p.regime == regime]
            if not mine:
                continue
            ns = [p.n for p in mine]
            ratios = [p.m_q / p.n for p in mine]
            below = [(p.m_q - p.low) / p.n if math.isfinite(p.low) else 0.0 for p in mine]
            above = [(p.high - p.m_q) / p.n if math.isfinite(p.high) else 0.0 for p in mine]
            line = axis.errorbar(
                ns, ratios, yerr=[below, above], fmt=style, capsize=2, label=REGIME_LABELS[regime]
            )
            for p, ratio in zip(mine, ratios, strict=True):
                if p.censoring:
                    marker = "^" if p.censoring == "right-censored" else "v"
                    axis.plot([p.n], [ratio], marker, color=line.lines[0].get_color(), markersize=9)
        axis.axhline(0.4, color="grey", linewidth=0.8, label="[A]: 0.4")
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("n")
        axis.set_ylabel(f"m_q / n ({metric})")
        axis.set_title(f"q = {q:g}" + (" (primary)" if q == PRIMARY_Q else ""), fontsize=9)
        axis.legend(fontsize=7)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
