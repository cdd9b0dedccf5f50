"""The advisor's figure: the pilot's cells and its answer, the same as advice.json holds.

Drawn on matplotlib's Agg canvas (no pyplot, no display). Left: the mean held-out error of each pilot cell (and
check cell) with +- 2 standard errors, against n, one marker per m. Right: D_hat with its calibrated interval,
D_back, and the measured D of the check cells when present (Welch 95%), beside the zero line; the title is the
answer's sentence.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from crl.advise.answer import Answer
from crl.advise.local import Cell, CellMean

__all__ = ["draw_answer"]


def draw_answer(answer: Answer, means: Mapping[Cell, CellMean], path: str | Path, *, metric: str) -> Path:
    """Write the PNG to ``path`` and return it; ``means`` holds every cell run (pilot and check)."""
    figure = Figure(figsize=(10.0, 5.2))
    FigureCanvasAgg(figure)
    cells_axes, answer_axes = figure.subplots(1, 2, gridspec_kw={"width_ratios": (3, 2)})
    for m in sorted({m for _, m in means}):
        row = sorted((n, mean) for (n, mm), mean in means.items() if mm == m)
        cells_axes.errorbar(
            [n for n, _ in row],
            [mean.mean for _, mean in row],
            yerr=[2 * mean.se for _, mean in row],
            marker="o",
            capsize=3,
            label=f"m = {m:,}",
        )
    cells_axes.set(xscale="log", xlabel="n (training pairs)", ylabel=f"held-out {metric} (mean +- 2 se)")
    cells_axes.legend(fontsize=7, frameon=False)
    estimate = answer.estimate
    rows = [
        ("D_hat (one step back)", estimate.d_hat, answer.low, answer.high, "tab:red"),
        ("D_back (two steps back)", estimate.d_back, estimate.d_back, estimate.d_back, "tab:gray"),
    ]
    if answer.check is not None:
        rows.append(
            ("measured D (check cells)", answer.check.value, answer.check.low, answer.check.high, "k")
        )
    for position, (_, value, low, high, colour) in enumerate(rows):
        answer_axes.errorbar(
            [value], [position], xerr=[[value - low], [high - value]], fmt="o", color=colour, capsize=4
        )
    answer_axes.axvline(0.0, color="k", linewidth=0.8)
    answer_axes.set_yticks(range(len(rows)), [row[0] for row in rows], fontsize=8)
    answer_axes.set(xlabel="D = gain of doubling m - gain of doubling n", ylim=(-0.7, len(rows) - 0.3))
    figure.suptitle("\n".join(textwrap.wrap(answer.sentence, 150)), fontsize=7.5)
    figure.tight_layout(rect=(0.0, 0.0, 1.0, 0.86))
    target = Path(path)
    figure.savefig(target, dpi=120)
    return target
