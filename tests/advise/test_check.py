"""The check of the advisor's predictions: measured means against stated intervals, coverage, median error."""

import math

import numpy as np
import pytest

from crl.advise.check import summarise_checks
from crl.advise.surface import SurfaceParams, fit_seed_surface
from crl.sweep import Cell, CellRecord

TRUTH = SurfaceParams(a=0.1, c=0.05, beta=0.5, b=2.0, delta=0.5, alpha=0.7, n0=707.0)


def _record(n: int, m: int, seed: int, error: float) -> CellRecord:
    return CellRecord("advise", Cell({"n": n, "m": m}, seed), {"error": error}, "run", "now", 0.0)


@pytest.fixture(scope="module")
def fit():
    rng = np.random.default_rng(0)
    n = np.array([n for n in (250, 500, 1000, 2000) for _ in range(4)], dtype=float)
    m = np.array([max(1, round(f * k)) for k in (250, 500, 1000, 2000) for f in (0.01, 0.1, 0.4, 1.0)], float)
    rows = [
        (n, m, np.full(n.size, s), TRUTH.error(n, m) * np.exp(rng.normal(0, 0.02, n.size))) for s in range(3)
    ]
    return fit_seed_surface(*[np.concatenate(c) for c in zip(*rows, strict=True)])


def test_measured_mean_is_geometric_and_coverage_counts_cells(fit) -> None:
    """A cell measured at the truth is covered; one measured at 3x the truth is not; coverage is 1/2."""
    true = float(TRUTH.error(4000, 400))
    records = [_record(4000, 400, s, true * f) for s, f in enumerate((0.9, 1.0, 1 / 0.9))]
    records += [_record(8000, 80, s, 3 * float(TRUTH.error(8000, 80))) for s in range(3)]
    summary = summarise_checks(fit, records)
    near, far = summary.rows
    assert near.measured == pytest.approx(true) and near.runs == 3
    assert near.covered and not far.covered
    assert summary.coverage == 0.5
    assert far.relative_error == pytest.approx(far.predicted.estimate / far.measured - 1)
    assert summary.median_abs_error == pytest.approx(
        0.5 * (abs(near.relative_error) + abs(far.relative_error))
    )
    assert math.isclose(summary.as_dict()["coverage"], 0.5)


def test_no_records_is_refused(fit) -> None:
    with pytest.raises(ValueError, match="no check cells"):
        summarise_checks(fit, [])
