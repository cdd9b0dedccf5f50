"""The report of the Fashion-MNIST m*(n) experiment: a figure of the curves and a Markdown table of m*(n).

The figure has one panel per metric: the metric against m/n (%) with one line per (regime, n), error bars the
95% Student-t interval over seeds, and the raw-pixel baseline as a horizontal dashed line. The table lists per
(metric, regime, n) the plateau, tol, m* with its censoring and seed-resampling interval, m*/n beside [A]'s 0.4,
the gain from the smallest m to 40% with its interval, and whether the curve is steep to 40% and flat after.
"""

from __future__ import annotations

import math
from pathlib import Path

from crl._vocab import REGIME_LABELS
from crl.experiments.fashion_mstar import METRICS, Curve, ExperimentGrid
from crl.experiments.mstar import SaturationInterval

__all__ = ["A_RATIO", "markdown_report", "render_curves"]

A_RATIO = 0.4
"""[A]'s finding in its CLIP experiment: m* = 0.4 n."""

_LABELS = {"knn_accuracy": "kNN accuracy (k = 20, cosine)", "recall_at_1": "two-view recall@1"}


def render_curves(curves: list[Curve], baseline: dict[str, float], path: Path, *, title: str) -> Path:
    """Draw the curves (metric vs m/n, one line per regime and n) with the pixel baseline; write a PNG."""
    # matplotlib is slow to import: loaded only when a figure is drawn, not when the commands start
    import matplotlib

    matplotlib.use("Agg")
    # pyplot only after choosing the non-interactive Agg backend, so that no display is needed
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(METRICS), figsize=(6.0 * len(METRICS), 4.2), squeeze=False)
    for axis, metric in zip(axes[0], METRICS, strict=True):
        for index, curve in enumerate(c for c in curves if c.metric == metric and c.m):
            fractions = [100.0 * m / curve.n for m in curve.m]
            errors = [
                [
                    mean - low if math.isfinite(low) else 0.0
                    for mean, low in zip(curve.means, curve.lows, strict=True)
                ],
                [
                    high - mean if math.isfinite(high) else 0.0
                    for mean, high in zip(curve.means, curve.highs, strict=True)
                ],
            ]
            style = "-" if curve.regime == "shared" else "--"
            axis.errorbar(
                fractions,
                curve.means,
                yerr=errors,
                fmt=style,
                marker="os^Dv"[index % 5],
                capsize=3,
                label=f"{REGIME_LABELS[curve.regime]} n = {curve.n}",
            )
        if metric in baseline:
            axis.axhline(baseline[metric], color="black", linestyle=":", label="raw centred pixels")
        axis.axvline(100 * A_RATIO, color="grey", linewidth=0.8, label="[A]'s m* = 0.4 n")
        axis.set_xlabel("m / n (%)")
        axis.set_ylabel(_LABELS[metric])
        axis.legend(fontsize=7)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _m_star_text(found: SaturationInterval, n: int) -> tuple[str, str, str]:
    """(m*, its interval, m*/n) as table cells, with the censoring written out."""
    saturation = found.saturation
    prefix = {"none": "", "left": "<= ", "right": ">= "}[saturation.censoring]
    high = "inf" if math.isinf(found.high) else f"{found.high:g}"
    return (
        f"{prefix}{saturation.m_star:g}",
        f"[{found.low:g}, {high}]",
        f"{prefix}{saturation.m_star / n:.2f}",
    )


def markdown_report(
    curves: list[Curve], baseline: dict[str, float], grid: ExperimentGrid, *, run_id: str, commit: str
) -> str:
    """The m*(n) table and the curve means as Markdown, named by the run id and the commit."""
    lines = [
        f"Run `{run_id}` at commit `{commit}`; grid n = {list(grid.ns)}, m/n = {list(grid.fractions)}, "
        f"{grid.seeds} seeds, budget {grid.budget} anchors per run.",
        "",
        "| metric | regime | n | plateau | tol | m* | m* interval | m*/n ([A]: 0.4) | gain m_1 -> 0.4 n [95% CI] "
        "| steep | flat | failed |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for curve in curves:
        label = REGIME_LABELS[curve.regime]
        if curve.saturation is None:
            lines.append(
                f"| {curve.metric} | {label} | {curve.n} | (too few cells) | | | | | | | | {curve.failed} |"
            )
            continue
        m_star, interval, ratio = _m_star_text(curve.saturation, curve.n)
        gain = (
            "" if curve.gain is None else f"{curve.gain[0]:+.4f} [{curve.gain[1]:+.4f}, {curve.gain[2]:+.4f}]"
        )
        lines.append(
            f"| {curve.metric} | {label} | {curve.n} | {curve.saturation.saturation.plateau:.4f} | "
            f"{curve.saturation.saturation.tol:.4f} | {m_star} | {interval} | {ratio} | {gain} | "
            f"{curve.steep} | {curve.flat} | {curve.failed} |"
        )
    lines += ["", "Means over seeds (95% Student-t interval) per m:", ""]
    lines += ["| metric | regime | n | m | m/n | mean | interval |", "|---|---|---|---|---|---|---|"]
    for curve in curves:
        label = REGIME_LABELS[curve.regime]
        for m, mean, low, high in zip(curve.m, curve.means, curve.lows, curve.highs, strict=True):
            lines.append(
                f"| {curve.metric} | {label} | {curve.n} | {m} | {m / curve.n:.2f} | {mean:.4f} | "
                f"[{low:.4f}, {high:.4f}] |"
            )
    if baseline:
        lines += [
            "",
            "Raw centred pixels: "
            + ", ".join(f"{key} {value:.4f}" for key, value in sorted(baseline.items())),
        ]
    return "\n".join(lines) + "\n"
