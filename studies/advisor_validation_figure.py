"""The registered validation's figure per data set: each point's prediction beside its measured truth.

    .venv/bin/python -m studies.advisor_validation_figure --data fashion   # docs/figures/advisor_validation_fashion.png

Reads ``results/advisor_validation/DATA/score.json`` (written by ``python -m studies.advisor_validation score``);
computes nothing. Against M (log axis): D_hat with its calibrated interval (red) and the measured D with its Welch
95% interval (black, filled when decisive), the zero line; the title gives the coverage and the direction counts.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

ROOT = Path(__file__).resolve().parents[1]


def draw(score: dict, path: Path) -> Path:
    """Write the PNG of one data set's score to ``path``."""
    rows = score["rows"]
    figure = Figure(figsize=(9.0, 4.5))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for row in rows:
        m = row["m"]
        axes.errorbar(
            [m / 1.06],
            [row["d_hat"]],
            yerr=[[row["d_hat"] - row["low"]], [row["high"] - row["d_hat"]]],
            fmt="o",
            color="tab:red",
            capsize=2,
        )
        axes.errorbar(
            [m * 1.06],
            [row["measured"]],
            yerr=[[row["measured"] - row["measured_low"]], [row["measured_high"] - row["measured"]]],
            fmt="o",
            mfc="k" if row["decisive"] else "w",
            color="k",
            capsize=2,
        )
    axes.axhline(0.0, color="k", linewidth=0.8)
    axes.set(
        xscale="log", xlabel="M (the user's m) at N", ylabel="D = gain of doubling m - gain of doubling n"
    )
    axes.plot([], [], "o", color="tab:red", label="D_hat, calibrated interval (prediction)")
    axes.plot([], [], "o", color="k", label="measured D, Welch 95% (filled: decisive)")
    axes.legend(fontsize=8, frameon=False)
    axes.set_title(
        f"{score['data']}: {score['points_scored']} of {score['points']} points scored; coverage "
        f"{score['covered']}/{score['points_scored']}; direction {score['agree']}/{score['decisive']} decisive "
        f"(always m {score['always_m']}, always n {score['always_n']})",
        fontsize=9,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return path


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    args = parser.parse_args(argv)
    score = json.loads(
        (ROOT / "results" / "advisor_validation" / args.data / "score.json").read_text("utf-8")
    )
    print(draw(score, ROOT / "docs" / "figures" / f"advisor_validation_{args.data}.png"))


if __name__ == "__main__":
    main()
