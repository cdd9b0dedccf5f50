"""Validating an advisor session against measured cells it did not see: coverage and the direction of its answer.

A session's fit is rebuilt from its output folder (:func:`load_session`: the pilot cells of ``advise.sqlite`` named
by ``advice.json``, fitted again; the fit is deterministic). Measured cells come as ``{(n, m): [error per seed]}``,
e.g. the m*(n) experiment's in-sample grid (errors = 1 - its metric).

- :func:`heldout_coverage`: each measured cell's geometric-mean error against the session's interval for the mean
  of that many new runs (:meth:`crl.advise.surface.SurfaceFit.predict_measured`); the coverage of those intervals.
- :func:`direction_agreement`: at each cell (n, m) with (n, 2m) and (2n, m) measured, the measured
  D = mean err(2n, m) - mean err(n, 2m) with its Welch 95% interval (decisive when it excludes 0), against the
  sign of the advisor's D where its local answer there is supported (:func:`crl.advise.advice.advise` at that
  (n, m)). Agreement = decisive cells answered with the measured sign / decisive cells (a withheld answer counts
  against); beside it the agreement of the two constant answers (always m, always n), the controls that say
  whether the check can tell the advisor from a fixed answer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from crl.advise.advice import advise
from crl.advise.check import CheckSummary, summarise_measured
from crl.advise.pilot import PILOT_CLAIM
from crl.advise.surface import SurfaceFit, fit_seed_surface
from crl.sweep import SweepStore

__all__ = [
    "DirectionRow",
    "DirectionSummary",
    "Session",
    "direction_agreement",
    "heldout_coverage",
    "load_session",
]

Measured = Mapping[tuple[int, int], Sequence[float]]
"""(n, m) -> the error of each seed run."""


@dataclass(frozen=True)
class Session:
    """A finished advisor session, its fit rebuilt.

    Attributes:
        fit: the surface fitted to the pilot cells.
        regime: the pilot's regime; points: its (n, m); document: advice.json as written.
    """

    fit: SurfaceFit
    regime: str
    points: tuple[tuple[int, int], ...]
    document: dict[str, Any]

    @property
    def reach(self) -> dict[str, Any]:
        """The pilot's reach as :func:`crl.advise.advice.advise` takes it."""
        return {
            "pilot_n_max": max(n for n, _ in self.points),
            "pilot_m_max": max(m for _, m in self.points),
            "pilot_m_over_n": (min(m / n for n, m in self.points), max(m / n for n, m in self.points)),
        }


def load_session(out_dir: str | Path) -> Session:
    """The session in ``out_dir`` (``advice.json`` and ``advise.sqlite``), its surface fitted again to its pilot.

    Raises:
        ValueError: if a pilot cell of advice.json has no finished record in the store, or two (the store holds
            sessions of two configs), naming it.
    """
    folder = Path(out_dir)
    document = json.loads((folder / "advice.json").read_text(encoding="utf-8"))
    points = tuple((int(n), int(m)) for n, m in document["pilot"]["points"])
    seeds = set(document["pilot"]["seeds"])
    with SweepStore(folder / "advise.sqlite") as store:
        records = store.records(PILOT_CLAIM)
    wanted = set(points)
    found: dict[tuple[int, int, int], float] = {}
    for record in records:
        key = (int(record.cell.params["n"]), int(record.cell.params["m"]))
        if key in wanted and record.cell.seed in seeds:
            if (*key, record.cell.seed) in found:
                raise ValueError(
                    f"{folder / 'advise.sqlite'} holds two cells at (n, m, seed) = {(*key, record.cell.seed)} (two "
                    "configs in one folder); give each session its own --out"
                )
            found[(*key, record.cell.seed)] = float(record.result["error"])
    missing = [(n, m, s) for n, m in points for s in sorted(seeds) if (n, m, s) not in found]
    if missing:
        raise ValueError(
            f"{folder / 'advise.sqlite'} lacks the pilot cell (n, m, seed) = {missing[0]}; rerun the session"
        )
    keys = sorted(found)
    fit = fit_seed_surface(
        [k[0] for k in keys],
        [k[1] for k in keys],
        [k[2] for k in keys],
        [found[k] for k in keys],
        level=float(document["fit"]["level"]),
    )
    return Session(fit, str(document["regime"]), points, document)


def heldout_coverage(fit: SurfaceFit, measured: Measured) -> CheckSummary:
    """Each measured cell's geometric-mean error against the fit's interval for the mean of that many runs
    (:func:`crl.advise.check.summarise_measured`, the check cells' own comparison)."""
    return summarise_measured(fit, measured)


@dataclass(frozen=True)
class DirectionRow:
    """One direction cell: the measured D with its 95% interval, and the advisor's D where it answered."""

    n: int
    m: int
    measured: float
    low: float
    high: float
    advised: float | None

    @property
    def decisive(self) -> bool:
        """The measured interval excludes 0."""
        return self.low > 0 or self.high < 0

    @property
    def agrees(self) -> bool:
        """The advisor answered here, with the measured sign."""
        return self.advised is not None and (self.advised > 0) == (self.measured > 0)


@dataclass(frozen=True)
class DirectionSummary:
    """All direction cells and the agreement over the decisive ones (the advisor's and the constant answers')."""

    rows: tuple[DirectionRow, ...]

    @property
    def decisive(self) -> tuple[DirectionRow, ...]:
        """The cells whose measured direction is resolved."""
        return tuple(row for row in self.rows if row.decisive)

    def _share(self, hit: Any) -> float | None:
        cells = self.decisive
        return sum(bool(hit(row)) for row in cells) / len(cells) if cells else None

    @property
    def agreement(self) -> float | None:
        """Decisive cells the advisor answered with the measured sign / decisive cells (None: none decisive)."""
        return self._share(lambda row: row.agrees)

    @property
    def always_m(self) -> float | None:
        """The control "always doubling m": decisive cells with D > 0 / decisive cells."""
        return self._share(lambda row: row.measured > 0)

    @property
    def always_n(self) -> float | None:
        """The control "always doubling n": decisive cells with D < 0 / decisive cells."""
        return self._share(lambda row: row.measured < 0)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able summary."""
        return {
            "cells": len(self.rows),
            "decisive": len(self.decisive),
            "agreement": self.agreement,
            "always_m": self.always_m,
            "always_n": self.always_n,
            "rows": [{**vars(row), "decisive": row.decisive, "agrees": row.agrees} for row in self.rows],
        }


def _welch(
    first: Sequence[float], second: Sequence[float], level: float = 0.95
) -> tuple[float, float, float]:
    """mean(first) - mean(second) and its Welch interval at ``level`` (each side needs at least 2 values)."""
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    difference = float(a.mean() - b.mean())
    se = math.sqrt(va + vb)
    if se == 0.0:
        return difference, difference, difference
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = float(stats.t.ppf((1 + level) / 2, df)) * se
    return difference, difference - half, difference + half


def direction_agreement(session: Session, measured: Measured) -> DirectionSummary:
    """The direction rows at every measured (n, m) whose (n, 2m) and (2n, m) are measured (module docstring).

    Raises:
        ValueError: if a cell used holds fewer than 2 seed runs (no interval).
    """
    rows = []
    for n, m in sorted(measured):
        if (n, 2 * m) not in measured or (2 * n, m) not in measured:
            continue
        more_data, more_negatives = measured[(2 * n, m)], measured[(n, 2 * m)]
        if min(len(more_data), len(more_negatives)) < 2:
            raise ValueError(
                f"the cells (2n, m) and (n, 2m) around (n, m) = ({n}, {m}) hold {len(more_data)} and "
                f"{len(more_negatives)} seed runs; the direction check needs at least 2 each: let the grid finish "
                "more seeds before checking advice against it"
            )
        difference, low, high = _welch(more_data, more_negatives)
        advice = advise(session.fit, n=n, m=m, regime=session.regime, **session.reach)  # type: ignore[arg-type]
        advised = advice.gain_difference.estimate if advice.local_supported else None
        rows.append(DirectionRow(n, m, difference, low, high, advised))
    return DirectionSummary(tuple(rows))
