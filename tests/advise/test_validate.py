"""Validating the advisor on measured cells: coverage of its intervals, the direction of its local answer, and
the controls that show both checks can fail."""

import numpy as np
import pytest
from scipy import stats

from crl.advise.surface import SurfaceParams
from crl.advise.validate import Session, _welch, direction_agreement, heldout_coverage
from tests.advise.test_advice import PILOT, TRUTH, _fit

GRID_N = (500, 1000, 2000, 4000, 8000)
FRACTIONS = (0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4)


def _measured(
    truth: SurfaceParams, noise: float, seeds: int = 4, rng_seed: int = 3
) -> dict[tuple[int, int], list[float]]:
    """The m*(n) grid's cells (n doubling, m = f n) measured from ``truth`` with relative seed noise."""
    rng = np.random.default_rng(rng_seed)
    return {
        (n, max(1, round(f * n))): list(
            float(truth.error(n, max(1, round(f * n)))) * np.exp(rng.normal(0, noise, seeds))
        )
        for n in GRID_N
        for f in FRACTIONS
    }


@pytest.fixture(scope="module")
def session() -> Session:
    fit = _fit(TRUTH, 0.02)
    points = tuple((n, max(1, round(f * n))) for n in (250, 500, 1000, 2000) for f in (0.01, 0.1, 0.4, 1.0))
    return Session(fit, "shared", points, {})


def test_welch_interval_equals_scipys() -> None:
    a, b = [0.30, 0.32, 0.31, 0.35], [0.28, 0.27, 0.30, 0.26]
    difference, low, high = _welch(a, b)
    reference = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert difference == pytest.approx(np.mean(a) - np.mean(b))
    assert (low, high) == pytest.approx((reference.low, reference.high))


def test_cells_from_the_fitted_truth_are_covered_and_biased_ones_are_not(session: Session) -> None:
    """Negative control: the same cells with every error 30% higher fall outside the intervals."""
    measured = {key: values for key, values in _measured(TRUTH, 0.02).items() if key[0] >= 4000}
    assert heldout_coverage(session.fit, measured).coverage >= 0.9
    biased = {key: [1.3 * e for e in values] for key, values in measured.items()}
    assert heldout_coverage(session.fit, biased).coverage == 0.0


def test_direction_agrees_with_its_own_truth_and_not_with_a_flipped_one(session: Session) -> None:
    """Measured from the truth the pilot saw, every decisive direction the advisor answers agrees; measured from a
    truth with no gain from m (b = 0: doubling n always wins), its 'doubling m' answers disagree."""
    summary = direction_agreement(session, _measured(TRUTH, 0.02))
    assert len(summary.rows) >= 12 and summary.decisive
    assert all(row.agrees for row in summary.decisive if row.advised is not None)
    answered = [row for row in summary.decisive if row.advised is not None]
    assert (
        summary.agreement == pytest.approx(len(answered) / len(summary.decisive)) and summary.agreement >= 0.6
    )
    flat = SurfaceParams(a=0.1, c=0.05, beta=0.5, b=0.0, delta=0.5, alpha=0.7, n0=707.0)
    control = direction_agreement(session, _measured(flat, 0.02))
    assert control.always_n == 1.0
    answered_m = [row for row in control.decisive if row.advised is not None and row.advised > 0]
    assert answered_m and not any(row.agrees for row in answered_m)
    assert control.agreement is not None and control.agreement < summary.agreement


def test_withheld_answers_count_against_the_advisor(session: Session) -> None:
    """Cells below the pilot's m/n (0.5% < its 1%) are withheld by rule 4 and count as disagreements."""
    summary = direction_agreement(session, _measured(TRUTH, 0.02))
    low = [row for row in summary.rows if row.m / row.n < PILOT["pilot_m_over_n"][0]]
    assert low and all(row.advised is None and not row.agrees for row in low)


def test_the_grid_gives_errors_of_the_in_sample_arm_in_the_sessions_regime() -> None:
    """1 - the primary metric per finished seed; other arms, the other regime and diverged cells left out."""
    from crl.advise.mstar_check import measured_errors
    from crl.sweep import Cell
    from crl.sweep.store import CellRecord

    def record(arm: str, regime: str, seed: int, result: dict) -> CellRecord:
        cell = Cell({"arm": arm, "regime": regime, "n": 500, "m": 5}, seed)
        return CellRecord("mstar-wordnet", cell, result, "run", "2026-12-04T00:00:00+00:00", 1.0)

    records = [
        record("in_sample", "shared", 1, {"status": "ok", "ndcg@10": 0.25}),
        record("in_sample", "shared", 2, {"status": "ok", "ndcg@10": 0.5}),
        record("in_sample", "shared", 3, {"status": "diverged", "reason": "nan"}),
        record("in_sample", "independent", 1, {"status": "ok", "ndcg@10": 0.9}),
        record("disjoint", "shared", 1, {"status": "ok", "ndcg@10": 0.9}),
    ]
    assert measured_errors(records, "wordnet", "shared") == {(500, 5): [0.75, 0.5]}


def test_a_cell_with_one_seed_run_is_an_error_naming_the_cells_and_the_fix(session: Session) -> None:
    """A grid stopped after its first seed has one run per cell: no Welch interval, so no direction row."""
    one_seed = {key: values[:1] for key, values in _measured(TRUTH, 0.02).items()}
    with pytest.raises(
        ValueError, match=r"around \(n, m\) = \(500, 5\) hold 1 and 1 seed runs.*finish more seeds"
    ):
        direction_agreement(session, one_seed)
