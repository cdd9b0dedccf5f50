"""Calibrate the local doubling pilot's q on the committed m*(n) grids, out of sample (docs/advisor_calibration.md).

    .venv/bin/python -m studies.advisor_calibration                 # prints the table, writes the two files below
    .venv/bin/python -m studies.advisor_calibration --out-md docs/advisor_calibration.md \
        --out-json docs/advisor_calibration.json

Reads only committed stores (read-only), computes no cell: the in-sample arm of the m*(n) experiment,
``results/mstar_real/{fashion,wordnet,fashion_cnn_full}/results.sqlite`` (4 seeds per cell, n = 500..16,000; the
CNN grid to n = 8,000), error = 1 - the data set's primary metric (two-view recall@1, nDCG@10). Every cell follows
the recipe map (:func:`crl.train.locked.train_shape`, E = 10, cap 256). A calibration point is an (N, M, regime)
whose five pilot cells and two truth cells are all in a grid (:mod:`crl.advise.local`), the pilot and the truth
read from the same 4 seeds (no cell is both a point's pilot cell and its truth).

q for a grid is calibrated on the other grids only (leave one data set out): the smallest q whose intervals hold
at least ``--coverage`` (90%) of their measured D (:func:`crl.advise.local.calibrate_q`); it is then scored on the
held-out grid. The advisor's q is the same rule on all three grids. The table per held-out grid: q, the share of
its points whose measured D lies in the interval, the decisive points (the measured D's Welch 95% interval
excludes 0), the share of those where sign(D_hat) agrees, and the two constant answers' shares.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from crl.advise.local import (
    LocalEstimate,
    Measured,
    MeasuredDifference,
    calibrate_q,
    local_estimate,
    measured_difference,
    pilot_points,
    truth_points,
)
from crl.experiments.mstar.summary import METRICS
from studies.arguments import write_outputs

ROOT = Path(__file__).resolve().parents[1]
GRIDS: dict[str, tuple[str, str]] = {
    "fashion pixels": ("results/mstar_real/fashion/results.sqlite", "fashion"),
    "wordnet minilm": ("results/mstar_real/wordnet/results.sqlite", "wordnet"),
    "fashion cnn": ("results/mstar_real/fashion_cnn_full/results.sqlite", "fashion"),
}
"""Held-out grid -> (its store, its data name). The reduced CNN store holds the same cells as the full one's first
3 seeds at n <= 2,000 and is not read."""
REGIMES = ("shared", "independent")
HEADER = (
    "# The advisor's q, calibrated out of sample on the committed m*(n) grids",
    "",
    "Written by `python -m studies.advisor_calibration --out-md docs/advisor_calibration.md --out-json "
    "docs/advisor_calibration.json` from the committed stores `results/mstar_real/{fashion,wordnet,"
    "fashion_cnn_full}/results.sqlite` (read-only; the in-sample arm, both regimes, 4 seeds per cell). The method "
    "and the rule for q: studies/advisor_calibration.py and docs/advisor.md. Every row but the first three is in "
    "sample (scored at the q fitted to all points).",
    "",
)
COVERAGE = 0.9


@dataclass(frozen=True)
class Point:
    """One calibration point: grid, regime, the pilot's estimate and the measured target."""

    grid: str
    regime: str
    estimate: LocalEstimate
    truth: MeasuredDifference


def grid_errors(path: Path, data: str, regime: str) -> dict[tuple[int, int], list[float]]:
    """(n, m) -> 1 - primary metric of each finished in-sample run of ``regime`` (the store opened read-only)."""
    metric = METRICS[data][0]  # type: ignore[index]
    errors: dict[tuple[int, int], list[float]] = {}
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        for cell, result in conn.execute("SELECT cell, result FROM cells"):
            params, outcome = json.loads(cell), json.loads(result)
            if params.get("arm") != "in_sample" or params.get("regime") != regime:
                continue
            if outcome.get("status") != "ok":
                continue
            errors.setdefault((int(params["n"]), int(params["m"])), []).append(1.0 - float(outcome[metric]))
    return errors


def points_of(errors: Measured, grid: str, regime: str) -> list[Point]:
    """Every (N, M) of the grid whose pilot and truth cells are all measured (M a multiple of 4)."""
    found = []
    for n, m in sorted(errors):
        try:
            cells = (*pilot_points(n, m), *truth_points(n, m))
        except ValueError:
            continue
        if all(cell in errors for cell in cells):
            found.append(Point(grid, regime, local_estimate(errors, n, m), measured_difference(errors, n, m)))
    return found


@dataclass(frozen=True)
class Score:
    """A set of points scored at one q."""

    q: float
    points: int
    covered: int
    decisive: int
    agree: int
    always_m: int
    always_n: int
    decided: int
    decided_right: int


def score(points: Sequence[Point], q: float) -> Score:
    """Coverage of the measured D by D_hat +- q scale; direction agreement of sign(D_hat) on decisive points."""
    covered = sum(p.estimate.covers(q, p.truth.value) for p in points)
    decisive = [p for p in points if p.truth.decisive]
    agree = sum((p.estimate.d_hat > 0) == (p.truth.value > 0) and p.estimate.d_hat != 0 for p in decisive)
    always_m = sum(p.truth.value > 0 for p in decisive)
    decided = [p for p in points if not p.estimate.covers(q, 0.0)]
    right = sum((p.estimate.d_hat > 0) == (p.truth.value > 0) for p in decided)
    return Score(
        q, len(points), covered, len(decisive), agree, always_m, len(decisive) - always_m, len(decided), right
    )


def calibrated(points: Sequence[Point], coverage: float = COVERAGE) -> float:
    """q by :func:`crl.advise.local.calibrate_q` on ``points``."""
    return calibrate_q([p.estimate for p in points], [p.truth.value for p in points], coverage)


def all_points(root: Path = ROOT) -> list[Point]:
    """The calibration points of every grid and regime."""
    found = []
    for grid, (path, data) in GRIDS.items():
        for regime in REGIMES:
            found += points_of(grid_errors(root / path, data, regime), grid, regime)
    return found


def _share(count: int, total: int) -> str:
    return f"{count}/{total} = {100 * count / total:.0f}%" if total else "-"


def table(points: Sequence[Point]) -> tuple[list[str], dict[str, object]]:
    """Markdown lines and the JSON document: one row per held-out grid, then all grids at the advisor's q."""
    rows: dict[str, object] = {}
    lines = [
        "| held-out grid | points (SSCRL + SCRL) | q from the other grids | coverage | decisive | direction "
        "agreement | always m | always n | decided (interval excludes 0): measured sign agrees | median "
        "half-width | median \\|D\\| |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for grid in GRIDS:
        held = [p for p in points if p.grid == grid]
        q = calibrated([p for p in points if p.grid != grid])
        lines.append(_row(grid, held, q))
        rows[grid] = _row_json(held, q)
    q_all = calibrated(points)
    lines.append(_row("all three, at the advisor's q (in sample)", points, q_all))
    rows["all"] = _row_json(points, q_all)
    for n in sorted({p.estimate.n for p in points}):
        at_n = [p for p in points if p.estimate.n == n]
        lines.append(_row(f"N = {n:,} (all grids, the advisor's q)", at_n, q_all))
    return lines, {"q": q_all, "coverage_target": COVERAGE, "rows": rows}


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _row(name: str, points: Sequence[Point], q: float) -> str:
    s = score(points, q)
    shared = sum(p.regime == "shared" for p in points)
    half = _median([q * p.estimate.scale for p in points])
    size = _median([abs(p.truth.value) for p in points])
    return (
        f"| {name} | {s.points} ({shared} + {s.points - shared}) | {q:.2f} | {_share(s.covered, s.points)} | "
        f"{s.decisive} | {_share(s.agree, s.decisive)} | {_share(s.always_m, s.decisive)} | "
        f"{_share(s.always_n, s.decisive)} | {_share(s.decided_right, s.decided)} | {half:.4f} | {size:.4f} |"
    )


def _row_json(points: Sequence[Point], q: float) -> dict[str, object]:
    s = score(points, q)
    return {
        **vars(s),
        "cells": [
            {
                "regime": p.regime,
                "n": p.estimate.n,
                "m": p.estimate.m,
                "d_hat": p.estimate.d_hat,
                "drift": p.estimate.drift,
                "scale": p.estimate.scale,
                "measured": p.truth.value,
                "measured_low": p.truth.low,
                "measured_high": p.truth.high,
            }
            for p in points
        ],
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-md", type=Path, default=None, help="Write the Markdown table here.")
    parser.add_argument("--out-json", type=Path, default=None, help="Write every point and score here.")
    args = parser.parse_args(argv)
    points = all_points()
    lines, document = table(points)
    print("\n".join(lines))
    print(f"advisor's q (all grids, {COVERAGE:.0%} coverage): {document['q']:.3f}")
    write_outputs(args.out_md, args.out_json, HEADER, lines, document)


if __name__ == "__main__":
    main()
