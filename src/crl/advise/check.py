"""Checking the advisor against cells it did not see: larger n and m than the pilot, run for real.

Check cells: n in {2, 4} x the largest pilot n (at most the user's n), m from the pilot's m/n fractions, the
most expensive ones left out at 4x; each run with the pilot's seeds. For each cell the measured error is the
geometric mean over seeds and the stated interval is :meth:`SurfaceFit.predict_measured` (the prediction's
seed spread plus one run's noise over the number of runs), at the fit's level. Reported: the relative
prediction error ``pred / measured - 1`` and whether the interval covers the measurement; the target coverage
of 90% intervals is at least 80%.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crl.advise.pilot import PilotPoint
from crl.advise.surface import Interval, SurfaceFit
from crl.sweep import CellRecord

__all__ = ["CheckRow", "CheckSummary", "check_points", "summarise_checks", "summarise_measured"]


def check_points(
    pilot_n_max: int, n_full: int, fractions: Sequence[float], *, max_m: int | None = None
) -> tuple[PilotPoint, ...]:
    """The check cells: every fraction at 2 n_max, the smaller half of the fractions (at least 3) at 4 n_max
    (both capped at the user's n; m capped at ``max_m``)."""
    ordered = sorted(set(fractions))
    points = set()
    for factor, chosen in ((2, ordered), (4, ordered[: max(3, len(ordered) // 2 + 1)])):
        n = min(factor * pilot_n_max, n_full)
        for fraction in chosen:
            m = max(1, round(fraction * n))
            points.add(PilotPoint(n, min(m, max_m) if max_m is not None else m))
    return tuple(sorted(points))


@dataclass(frozen=True)
class CheckRow:
    """One check cell: its measured mean error over ``runs`` seeds and the stated prediction interval."""

    n: int
    m: int
    runs: int
    measured: float
    predicted: Interval

    @property
    def relative_error(self) -> float:
        """``predicted / measured - 1``."""
        return self.predicted.estimate / self.measured - 1.0

    @property
    def covered(self) -> bool:
        """Whether the stated interval contains the measured mean."""
        return self.predicted.contains(self.measured)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able row."""
        return {
            "n": self.n,
            "m": self.m,
            "runs": self.runs,
            "measured": self.measured,
            "predicted": self.predicted.as_dict(),
            "relative_error": self.relative_error,
            "covered": self.covered,
        }


@dataclass(frozen=True)
class CheckSummary:
    """All check rows, the coverage of their intervals and the median absolute relative prediction error."""

    rows: tuple[CheckRow, ...]

    @property
    def coverage(self) -> float:
        """Fraction of cells whose interval covers the measurement."""
        return sum(row.covered for row in self.rows) / len(self.rows)

    @property
    def median_abs_error(self) -> float:
        """Median of ``|pred / measured - 1|``."""
        errors = sorted(abs(row.relative_error) for row in self.rows)
        middle = len(errors) // 2
        return errors[middle] if len(errors) % 2 else 0.5 * (errors[middle - 1] + errors[middle])

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able summary."""
        return {
            "coverage": self.coverage,
            "median_abs_relative_error": self.median_abs_error,
            "cells": [row.as_dict() for row in self.rows],
        }


def summarise_checks(fit: SurfaceFit, records: Sequence[CellRecord]) -> CheckSummary:
    """Compare each check cell's measured geometric-mean error with the fit's stated interval.

    Raises:
        ValueError: if there are no records.
    """
    if not records:
        raise ValueError("no check cells were run; there is nothing to compare")
    groups: dict[tuple[int, int], list[float]] = {}
    for record in records:
        key = (int(record.cell.params["n"]), int(record.cell.params["m"]))
        groups.setdefault(key, []).append(float(record.result["error"]))
    return summarise_measured(fit, groups)


def summarise_measured(fit: SurfaceFit, measured: Mapping[tuple[int, int], Sequence[float]]) -> CheckSummary:
    """Each cell's geometric-mean error over its runs against the fit's interval for the mean of that many runs.

    Raises:
        ValueError: if no cell is given, or a cell holds a non-positive error (no geometric mean).
    """
    if not measured:
        raise ValueError("no measured cells to check the advisor against")
    rows = []
    for (n, m), errors in sorted(measured.items()):
        if not errors or min(errors) <= 0:
            raise ValueError(f"cell (n, m) = ({n}, {m}) needs positive errors, got {list(errors)}")
        mean = math.exp(sum(math.log(e) for e in errors) / len(errors))
        rows.append(CheckRow(n, m, len(errors), mean, fit.predict_measured(n, m, len(errors))))
    return CheckSummary(tuple(rows))
