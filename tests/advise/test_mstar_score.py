"""Checks 2 and 3's scoring (crl.advise.mstar_score): the interval score's closed form, the targets on constructed
points, a committed prediction that is read back only as its store derives it, and the truth read on the scale each
prediction records."""

import json
import math
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from crl.advise.mstar import Interval, Scale, band_at, predict_mstar
from crl.advise.mstar_check import CheckPoint
from crl.advise.mstar_score import (
    interval_score,
    load_prediction,
    load_truth,
    score_markdown,
    score_points,
    score_regime,
    truth_markdown,
    truth_table,
)
from crl.advise.mstar_session import finite_json, seed_errors
from crl.advise.pilot import PILOT_CLAIM
from crl.sweep import SweepStore

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
    _as_truth(folder, None, (250, 500, 1_000))
    loaded = [load_truth(folder)]
    table, score = truth_table(loaded)
    assert score == "ndcg@10"
    with sqlite3.connect(folder / "advise.sqlite") as connection:
        rows = connection.execute("select cell, seed, result from cells").fetchall()
    assert sum(len(seeds) for by_m in table.values() for seeds in by_m.values()) == len(rows)
    for cell, seed, result in rows:
        params = json.loads(cell)
        stored = 1.0 - json.loads(result)["error"]
        assert table[("in_sample", "independent", params["n"])][params["m"]][seed] == pytest.approx(stored)
    text = truth_markdown(loaded, "gcide")
    assert "## m*(n) on gcide" in text and "| in_sample | SCRL | 1000 |" in text
    assert "share of the plateau reached at m/n" in text


def _errors(folder: Path) -> dict[tuple[int, int], dict[int, float]]:
    with SweepStore(folder / "advise.sqlite") as store:
        return seed_errors(store.records(PILOT_CLAIM))


def _as_truth(folder: Path, scale: Scale | None, ns: tuple[int, ...]) -> None:
    """Write a truth.json for ``folder``'s store at ``ns`` on ``scale`` (None: check 2's file, no scale)."""
    errors = _errors(folder)
    document: dict[str, object] = {
        "regime": "independent",
        "metric": "ndcg_error",
        "truth": {str(n): {"m_band": finite_json(band_at(errors, n, scale or "error").__dict__)} for n in ns},
    }
    if scale is not None:
        document["scale"] = scale
    (folder / "truth.json").write_text(json.dumps(document), encoding="utf-8")


def test_the_score_scale_reads_the_curves_as_one_minus_the_error(tmp_path: Path) -> None:
    """m_band on the score's scale is m_band of the curves 1 - err, with the tolerance q times the score's plateau:
    computed here by hand from the store and compared."""
    errors = _errors(COMMITTED)
    scores = {cell: {seed: 1.0 - e for seed, e in seeds.items()} for cell, seeds in errors.items()}
    assert band_at(errors, 1_000, "score") == band_at(scores, 1_000, "error")
    on_score = predict_mstar(errors, 8_000, ns=(250, 500, 1_000), scale="score")
    assert on_score.scale == "score"
    assert on_score.at == predict_mstar(scores, 8_000, ns=(250, 500, 1_000)).at
    assert on_score.at != predict_mstar(errors, 8_000, ns=(250, 500, 1_000)).at, (
        "the two scales must differ here"
    )


def test_a_score_scale_prediction_is_scored_against_the_truth_on_its_own_scale(tmp_path: Path) -> None:
    """A prediction recording scale "score" reads back only at that scale, and its truth m_band is the store's on
    the score's scale, whatever scale the truth.json records; two scales in one report are refused."""
    pilot = tmp_path / "pilot"
    shutil.copytree(COMMITTED, pilot)
    document = json.loads((pilot / "mstar.json").read_text(encoding="utf-8"))
    errors = _errors(pilot)
    scored = predict_mstar(errors, 250, ns=(250, 500, 1_000), scale="score")
    document["prediction"]["at"] = {str(n): finite_json(i.__dict__) for n, i in scored.at.items()}
    document["n"], document["scale"] = 250, "score"
    (pilot / "mstar.json").write_text(json.dumps(document), encoding="utf-8")
    prediction = load_prediction(pilot)
    assert prediction.scale == "score" and prediction.at[1_000].value == pytest.approx(scored.at[1_000].value)
    truth_folder = tmp_path / "truth"
    shutil.copytree(COMMITTED, truth_folder)
    _as_truth(truth_folder, None, (1_000,))
    truth = load_truth(truth_folder)
    (only,) = score_points([prediction], [truth], "gcide")
    assert only.n == 1_000 and only.truth == band_at(errors, 1_000, "score") != band_at(
        errors, 1_000, "error"
    )
    with pytest.raises(ValueError, match="score each scale in its own crl advise-check"):
        score_points([prediction, load_prediction(COMMITTED)], [truth], "gcide")
    document["scale"] = "error"
    (pilot / "mstar.json").write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ValueError, match="differs from the one its store gives"):
        load_prediction(pilot)


def test_a_truth_file_that_its_store_does_not_give_back_is_refused(tmp_path: Path) -> None:
    """truth.json's m_band must be its store's at the scale the file records (none recorded: the error's)."""
    folder = tmp_path / "truth"
    shutil.copytree(COMMITTED, folder)
    _as_truth(folder, "score", (500, 1_000))
    assert load_truth(folder).ns == (500, 1_000)
    document = json.loads((folder / "truth.json").read_text(encoding="utf-8"))
    del document["scale"]
    (folder / "truth.json").write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ValueError, match=r"m_band at n = \d+ .* differs from the one its store gives"):
        load_truth(folder)
    document["scale"] = "loudness"
    (folder / "truth.json").write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ValueError, match="field 'scale' is 'loudness' with metric 'ndcg_error'"):
        load_truth(folder)


def test_a_truth_of_another_metric_or_without_its_n_is_refused_naming_the_folder(tmp_path: Path) -> None:
    """A prediction of nDCG's error is not scored against a recall truth, and a truth.json listing an n its store
    lacks names the folder; the truth tables read only the n truth.json lists."""
    folder = tmp_path / "truth"
    shutil.copytree(COMMITTED, folder)
    _as_truth(folder, None, (500, 1_000))
    truth = load_truth(folder)
    table, _ = truth_table([truth])
    assert sorted(key[2] for key in table) == [500, 1_000], "n = 250 is in the store but not in truth.json"
    prediction = load_prediction(COMMITTED)
    other = type(truth)(truth.folder, truth.regime, "recall_error", truth.ns, truth.errors)
    with pytest.raises(ValueError, match=r"predicts m\* of ndcg_error, but --truth .* measured recall_error"):
        score_points([prediction], [other], "gcide")
    document = json.loads((folder / "truth.json").read_text(encoding="utf-8"))
    document["truth"]["64000"] = document["truth"]["500"]
    (folder / "truth.json").write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ValueError, match=f"^{re.escape(str(folder))}: .*n = 64000 has 0 m measured"):
        load_truth(folder)
