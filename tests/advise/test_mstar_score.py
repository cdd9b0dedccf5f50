"""Check 2's scoring (crl.advise.mstar_score): the interval score's closed form, the targets on constructed points,
and a committed prediction that is read back only as its store derives it."""

import json
import math
import shutil
import sqlite3
from pathlib import Path

import pytest

from crl.advise.mstar import Interval
from crl.advise.mstar_check import CheckPoint
from crl.advise.mstar_score import (
    interval_score,
    load_prediction,
    score_markdown,
    score_regime,
    truth_markdown,
    truth_table,
)

COMMITTED = Path(__file__).parents[2] / "results" / "advisor_mstar" / "gcide_check2" / "scrl_8000"


def point(
    predicted: Interval, truth: float, *, no_growth: float = 10.0, control: float = 10.0, slope: float = 0.5
) -> CheckPoint:
    return CheckPoint(
        "toy",
        "shared",
        8_000,
        16_000,
        (500, 1_000, 2_000),
        Interval(slope, slope - 0.1, slope + 0.1),
        predicted,
        Interval(truth, truth / 1.2, truth * 1.2),
        Interval(no_growth, no_growth / 1.2, no_growth * 1.2),
        Interval(control, control / 2, control * 2),
    )


def test_the_interval_score_is_the_width_plus_2_over_alpha_times_the_miss() -> None:
    assert interval_score(0.0, 1.0, 0.5) == pytest.approx(1.0)
    assert interval_score(0.0, 1.0, 1.5) == pytest.approx(1.0 + 40 * 0.5)
    assert interval_score(0.0, 1.0, -0.25) == pytest.approx(1.0 + 40 * 0.25)
    assert interval_score(-math.inf, 1.0, 0.0) == math.inf


def test_a_good_growth_prediction_meets_every_target_and_its_control_misses() -> None:
    points = [
        point(Interval(t * 1.1, t / 1.5, t * 1.6), t, control=t / 8)
        for t in (40.0, 80.0, 160.0, 320.0, 640.0)
    ]
    report = score_regime(points, "shared")
    assert report is not None
    assert (report.within, report.covered, report.control_within) == (5, 5, 0)
    assert report.within_met and report.ratio_met and report.coverage_judged
    text = score_markdown(points, sources="toy")
    assert "it does)" in text and "met" in text and "FAILED" not in text


def test_a_censored_prediction_is_a_miss_and_a_bad_one_fails_loudly() -> None:
    censored = Interval(50.0, 0.0, 900.0, "left-censored")
    points = [point(censored, 40.0), point(Interval(400.0, 300.0, 500.0), 40.0, control=40.0)]
    report = score_regime(points, "shared")
    assert report is not None and report.within == 0 and not report.within_met
    assert not report.coverage_judged, "an open or far-off interval cannot earn its coverage a verdict"
    text = score_markdown(points, sources="toy")
    assert "FAILED" in text and "NOT judged" in text and "it does NOT" in text


def test_a_prediction_equal_to_the_no_growth_answer_does_not_meet_the_ratio_target() -> None:
    points = [point(Interval(10.0, 8.0, 12.0), 20.0) for _ in range(3)]
    report = score_regime(points, "shared")
    assert report is not None and not report.ratio_met


def test_the_committed_prediction_reads_back_and_a_changed_one_is_refused(tmp_path: Path) -> None:
    prediction = load_prediction(COMMITTED)
    assert prediction.regime == "independent" and prediction.pilot_ns == (250, 500, 1_000)
    assert set(prediction.at) == {8_000, 16_000, 32_000}
    changed = tmp_path / "changed"
    shutil.copytree(COMMITTED, changed)
    document = json.loads((changed / "mstar.json").read_text(encoding="utf-8"))
    document["prediction"]["at"]["16000"]["value"] *= 1.5
    (changed / "mstar.json").write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ValueError, match="differs from the one its store gives"):
        load_prediction(changed)
    with pytest.raises(ValueError, match=r"a prediction folder holds mstar\.json and advise\.sqlite"):
        load_prediction(tmp_path)


def test_the_truth_tables_read_the_store_as_scores(tmp_path: Path) -> None:
    """The m*(n) tables of a truth folder are the experiment's tables of its cells' scores (1 - the error): read
    here from the sqlite file directly, a second reader."""
    folder = tmp_path / "truth"
    shutil.copytree(COMMITTED, folder)
    truth = {"regime": "independent", "metric": "ndcg_error", "truth": {}}
    (folder / "truth.json").write_text(json.dumps(truth), encoding="utf-8")
    table, score = truth_table([folder])
    assert score == "ndcg@10"
    with sqlite3.connect(folder / "advise.sqlite") as connection:
        rows = connection.execute("select cell, seed, result from cells").fetchall()
    assert sum(len(seeds) for by_m in table.values() for seeds in by_m.values()) == len(rows)
    for cell, seed, result in rows:
        params = json.loads(cell)
        stored = 1.0 - json.loads(result)["error"]
        assert table[("in_sample", "independent", params["n"])][params["m"]][seed] == pytest.approx(stored)
    text = truth_markdown([folder], "gcide")
    assert "## m*(n) on gcide" in text and "| in_sample | SCRL | 1000 |" in text
    assert "share of the plateau reached at m/n" in text
