"""The registered validation's figure per data set: each point's prediction beside its measured truth.

    .venv/bin/python -m studies.advisor_validation_figure --data fashion   # docs/figures/advisor_validation_fashion.png

Reads ``results/advisor_validation/DATA/score.json`` (written by ``python -m studies.advisor_validation score``);
computes nothing. Against M (log axis): D_hat with its calibrated interval (red) and the measured D with its Welch
95% interval (black, filled when decisive), the zero line; the title gives the coverage and the direction counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from studies.arguments import OneLineParser, json_object, numbers_of, rows_of

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


SCORE_FIELDS = ("points_scored", "points", "covered", "agree", "decisive", "always_m", "always_n")
"""The counts :func:`draw` reads of a score.json."""
ROW_FIELDS = ("m", "d_hat", "low", "high", "measured", "measured_low", "measured_high", "decisive")
"""The numbers :func:`draw` reads of each of its rows."""


def read_score(path: Path, data: str) -> dict:
    """The score.json at ``path`` (of data set ``data``), holding what :func:`draw` reads.

    Raises:
        ValueError: naming the file (and the row and field) when it is missing or malformed, and the step that
            writes it.
    """
    made_by = f"python -m studies.advisor_validation score --data {data}"
    score = json_object(path, made_by)
    numbers_of(score, SCORE_FIELDS, str(path), made_by)
    rows_of(score, "rows", ROW_FIELDS, path, made_by)
    return {"data": data, **score}


def main(argv: Sequence[str] | None = None) -> None:
    parser = OneLineParser(
        prog="python -m studies.advisor_validation_figure", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--data", required=True)
    args = parser.parse_args(argv)
    try:
        score = read_score(ROOT / "results" / "advisor_validation" / args.data / "score.json", args.data)
    except ValueError as error:
        parser.error(str(error))
    print(draw(score, ROOT / "docs" / "figures" / f"advisor_validation_{args.data}.png"))


if __name__ == "__main__":
    main()
