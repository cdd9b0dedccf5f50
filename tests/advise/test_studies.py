"""The advisor's studies: q is the calibration on the committed grids, the direction's chance is the reliability study,
and the validation's registered design."""

import json
from pathlib import Path

from crl.advise.answer import Q
from crl.advise.local import pilot_points, truth_points
from crl.advise.reliability import C
from studies import advisor_calibration, advisor_reliability, advisor_validation

ROOT = Path(__file__).resolve().parents[2]


def test_the_advisors_q_is_the_committed_grids_calibration_rounded_up() -> None:
    """Q holds 90% of the measured D on the 48 committed points, and the committed table is this run's."""
    points = advisor_calibration.all_points()
    assert len(points) == 48
    q = advisor_calibration.calibrated(points)
    assert q <= Q < q + 0.01
    lines, document = advisor_calibration.table(points)
    assert document["q"] == q
    committed = (ROOT / "docs" / "advisor_calibration.md").read_text(encoding="utf-8")
    assert all(line in committed for line in lines)
    assert json.loads((ROOT / "docs" / "advisor_calibration.json").read_text(encoding="utf-8"))["q"] == q


def test_validation_points_ladders_and_cells() -> None:
    """M = b 2^k <= N/2 for b in 4, 12, 20; the truth cells left to run are never pilot cells."""
    assert advisor_validation.points(8000)[:6] == (4, 8, 12, 16, 20, 24)
    assert max(advisor_validation.points(16000)) == 6144 and len(advisor_validation.points(16000)) == 30
    pilot, truth = advisor_validation.cells(16000)
    assert not set(pilot) & set(truth)
    for m in advisor_validation.points(16000):
        assert set(pilot_points(16000, m)) <= set(pilot)
        assert set(truth_points(16000, m)) <= set(pilot) | set(truth)
    assert all(n == 32000 or (n == 16000 and m > 3072) for n, m in truth)


def test_validation_power_is_binomial() -> None:
    """P(X >= 24) for X ~ Bin(30, 0.9), against a direct sum."""
    from math import comb

    direct = sum(comb(30, k) * 0.9**k * 0.1 ** (30 - k) for k in range(24, 31))
    cover, _ = advisor_validation.power(30, 15)
    assert abs(cover - direct) < 1e-12


def test_validation_figure_draws_a_score(tmp_path: Path) -> None:
    from studies import advisor_validation_figure

    row = {"m": 8, "d_hat": 0.01, "low": -0.02, "high": 0.04, "measured": 0.005, "measured_low": -0.001}
    rows = [
        {**row, "measured_high": 0.011, "decisive": False},
        {**row, "m": 16, "measured_low": 0.001, "measured_high": 0.009, "decisive": True},
    ]
    score = {"data": "x", "points_scored": 2, "points": 30, "covered": 2, "agree": 1, "decisive": 1}
    path = advisor_validation_figure.draw(
        {**score, "always_m": 1, "always_n": 0, "rows": rows}, tmp_path / "f.png"
    )
    assert path.stat().st_size > 5_000


def test_the_directions_chance_is_the_committed_reliability_study() -> None:
    """C is the study's fit rounded, and the committed tables are this run's (docs/advisor_reliability.md)."""
    lines, document = advisor_reliability.report(
        advisor_reliability.calibration_points(), advisor_reliability.validation_points()
    )
    committed = (ROOT / "docs" / "advisor_reliability.md").read_text(encoding="utf-8")
    assert all(line in committed for line in lines)
    stored = json.loads((ROOT / "docs" / "advisor_reliability.json").read_text(encoding="utf-8"))
    assert stored["c_fit"] == document["c_fit"] and stored["c"] == C and abs(stored["c_fit"] - C) < 0.005
