"""Would the direction answer be right more often if it looked one doubling ahead? (docs/advisor_lookahead.md)

    .venv/bin/python -m studies.advisor_lookahead                 # prints the tables
    .venv/bin/python -m studies.advisor_lookahead --out-md docs/advisor_lookahead.md \
        --out-json docs/advisor_lookahead.json

The pilot's statistic looks one doubling back: D_hat = err(N, M/2) - err(N/2, M) is the gain of doubling m minus
that of doubling n at the base (N/2, M/2), while the answer's target D = err(2N, M) - err(N, 2M) sits at (N, M).
D_back = err(N/2, M/4) - err(N/4, M/2) is the same one step further back. The look-ahead extrapolates the drift
along the diagonal by a share lambda of a step:

    D_ahead(lambda) = D_hat + lambda (D_hat - D_back),

lambda = 0 being the advisor's answer, 1/2 half a step on, 1 a full step (linear in the doubling). A point is
decisive when the measured D's Welch 95% interval excludes 0, and D_ahead(lambda) is right there when its sign is
the measured sign.

Reads only committed JSON, computes no cell. The points: the 117 validation points of
``results/advisor_validation/{fashion,wordnet,cnn,bible}/score.json`` (D_back stored per point) and the calibration
points of docs/advisor_calibration.json whose D_back is in the same grid: D_back at (N, M) is D_hat at
(N/2, M/2) in the same regime (the same two cells), so it is read from that point where the grid has it and
checked against the stored drift |D_hat - D_back|; points without it are left out and counted. Every point was
seen before (docs/advisor.md section 7, docs/advisor_reliability.md): the tables are exploratory and choose no
rule on their own.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from studies.arguments import write_outputs

ROOT = Path(__file__).resolve().parents[1]
CALIBRATION = "docs/advisor_calibration.json"
GRIDS = ("fashion pixels", "wordnet minilm", "fashion cnn")
VALIDATION = ("fashion", "wordnet", "cnn", "bible")
LAMBDAS = (0.0, 0.5, 1.0)
"""The shares of a doubling the look-ahead extrapolates: the advisor's answer, half a step, a full step."""
DRIFT_TOLERANCE = 1e-9
"""|stored drift - |D_hat - D_back|| above this refuses a recovered D_back (the grid is not the pilot's)."""
HEADER = (
    "# Looking one doubling ahead: D_ahead = D_hat + lambda (D_hat - D_back), on the committed points",
    "",
    "Written by `python -m studies.advisor_lookahead --out-md docs/advisor_lookahead.md --out-json "
    "docs/advisor_lookahead.json` from docs/advisor_calibration.json and results/advisor_validation/{fashion,"
    "wordnet,cnn,bible}/score.json (read-only); the method is studies/advisor_lookahead.py. Every point was seen "
    "before: exploratory.",
    "",
)


@dataclass(frozen=True)
class Point:
    """One point: its group, (N, M), the pilot's D_hat and D_back, and the measured D with its decision."""

    group: str
    n: int
    m: int
    d_hat: float
    d_back: float
    measured: float
    decisive: bool

    def ahead(self, share: float) -> float:
        """D_ahead(lambda) = D_hat + lambda (D_hat - D_back)."""
        return self.d_hat + share * (self.d_hat - self.d_back)

    def right(self, share: float) -> bool:
        """sign(D_ahead(lambda)) = sign(D), the measured difference."""
        return (self.ahead(share) > 0) == (self.measured > 0)


def _decisive(row: dict[str, float]) -> bool:
    return row["measured_low"] > 0 or row["measured_high"] < 0


def validation_points(root: Path = ROOT) -> list[Point]:
    """The 117 validation points with their stored D_back."""
    found = []
    for data in VALIDATION:
        path = root / "results" / "advisor_validation" / data / "score.json"
        for row in json.loads(path.read_text(encoding="utf-8"))["rows"]:
            found.append(
                Point(
                    data,
                    int(row["n"]),
                    int(row["m"]),
                    row["d_hat"],
                    row["d_back"],
                    row["measured"],
                    _decisive(row),
                )
            )
    return found


def calibration_points(root: Path = ROOT) -> tuple[list[Point], int]:
    """The calibration points whose D_back is D_hat at (N/2, M/2) in the same grid and regime, and how many had none.

    Raises:
        ValueError: if a recovered D_back disagrees with the stored drift |D_hat - D_back|.
    """
    rows = json.loads((root / CALIBRATION).read_text(encoding="utf-8"))["rows"]
    found: list[Point] = []
    missing = 0
    for grid in GRIDS:
        cells = rows[grid]["cells"]
        d_hat = {(cell["regime"], int(cell["n"]), int(cell["m"])): cell["d_hat"] for cell in cells}
        for cell in cells:
            key = (cell["regime"], int(cell["n"]) // 2, int(cell["m"]) // 2)
            if key not in d_hat:
                missing += 1
                continue
            d_back = d_hat[key]
            if abs(abs(cell["d_hat"] - d_back) - cell["drift"]) > DRIFT_TOLERANCE:
                raise ValueError(
                    f"{grid} {cell['regime']} (n {cell['n']}, m {cell['m']}): D_hat at (n/2, m/2) is {d_back}, "
                    f"but the stored drift {cell['drift']} is not |D_hat - D_back|"
                )
            found.append(
                Point(
                    grid,
                    int(cell["n"]),
                    int(cell["m"]),
                    cell["d_hat"],
                    d_back,
                    cell["measured"],
                    _decisive(cell),
                )
            )
    return found, missing


@dataclass(frozen=True)
class Tally:
    """One group's decisive points and how many each lambda gets right."""

    group: str
    points: int
    decisive: int
    right: dict[float, int]


def tally(group: str, points: Sequence[Point], shares: Sequence[float] = LAMBDAS) -> Tally:
    """Decisive points of ``points`` and, per lambda, those where sign(D_ahead(lambda)) = sign(D)."""
    decisive = [point for point in points if point.decisive]
    return Tally(group, len(points), len(decisive), {s: sum(p.right(s) for p in decisive) for s in shares})


def _groups(points: Sequence[Point]) -> list[str]:
    return list(dict.fromkeys(point.group for point in points))


def tallies(points: Sequence[Point], shares: Sequence[float] = LAMBDAS) -> list[Tally]:
    """One tally per group in order of appearance, then all of them pooled."""
    per_group = [tally(g, [p for p in points if p.group == g], shares) for g in _groups(points)]
    return [*per_group, tally("all", points, shares)]


def _percent(right: int, total: int) -> str:
    return f"{right}/{total} = {100 * right / total:.0f}%" if total else "-"


def _table(title: str, rows: Sequence[Tally], shares: Sequence[float]) -> list[str]:
    heads = " | ".join(f"right at lambda = {s:g}" for s in shares)
    lines = [
        f"### {title}",
        "",
        f"| group | points | decisive | {heads} |",
        "|---|---:|---:|" + "---:|" * len(shares),
    ]
    for row in rows:
        cells = " | ".join(_percent(row.right[s], row.decisive) for s in shares)
        lines.append(f"| {row.group} | {row.points} | {row.decisive} | {cells} |")
    return [*lines, ""]


def losses(rows: Sequence[Tally], shares: Sequence[float]) -> dict[float, list[str]]:
    """Per lambda > 0, the groups (not the pooled row) where it is right at fewer decisive points than lambda = 0."""
    return {
        s: [row.group for row in rows if row.group != "all" and row.right[s] < row.right[0.0]]
        for s in shares
        if s
    }


def report(
    calibration: Sequence[Point], missing: int, validation: Sequence[Point], shares: Sequence[float] = LAMBDAS
) -> tuple[list[str], dict[str, object]]:
    """The two tables, the groups each look-ahead loses, and the JSON document."""
    cal_rows, val_rows = tallies(calibration, shares), tallies(validation, shares)
    lines = [
        _table(
            f"Calibration grids ({len(calibration)} points with D_back in the grid; {missing} without)",
            cal_rows,
            shares,
        ),
        _table(f"Validation ({len(validation)} points)", val_rows, shares),
    ]
    flat = [line for block in lines for line in block]
    lost = losses([*cal_rows[:-1], *val_rows[:-1]], shares)
    flat.append(
        "Where a look-ahead is right at fewer decisive points than the advisor's answer (lambda = 0):"
    )
    flat.append("")
    flat += [f"- lambda = {s:g}: {', '.join(groups) if groups else 'nowhere'}" for s, groups in lost.items()]
    document: dict[str, object] = {
        "lambdas": list(shares),
        "calibration": [row.__dict__ for row in cal_rows],
        "calibration_without_d_back": missing,
        "validation": [row.__dict__ for row in val_rows],
        "losses": {f"{s:g}": groups for s, groups in lost.items()},
    }
    return flat, json.loads(json.dumps(document, default=str, allow_nan=False))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-md", type=Path, default=None, help="Write the Markdown tables here.")
    parser.add_argument("--out-json", type=Path, default=None, help="Write every tally here.")
    args = parser.parse_args(argv)
    calibration, missing = calibration_points()
    lines, document = report(calibration, missing, validation_points())
    print("\n".join(lines))
    write_outputs(args.out_md, args.out_json, HEADER, lines, document)


if __name__ == "__main__":
    main()
