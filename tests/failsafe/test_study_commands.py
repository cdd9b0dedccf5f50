"""The studies' command lines on missing or malformed files and on numbers out of range.

If these fail, ``python -m studies.advisor_validation score`` and ``python -m studies.advisor_validation_figure``
print a traceback (FileNotFoundError, JSONDecodeError, KeyError) for a missing or malformed predictions.json or
score.json, and ``python -m studies.text_retrieval --minutes -1`` starts a study with a negative budget.
"""

from pathlib import Path

import pytest

from studies import advisor_direction_unseen as check6
from studies import advisor_validation, advisor_validation_figure, text_retrieval


def _one_line_error(capsys: pytest.CaptureFixture[str], run: object) -> str:
    """The single stderr line of a study's main that exited with status 2."""
    with pytest.raises(SystemExit) as exited:
        run()  # type: ignore[operator]
    assert exited.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and ": error: " in lines[0], lines
    return lines[0]


MALFORMED = {
    "missing": (None, "does not exist; write it first"),
    "not JSON": ("{", "is not JSON"),
    "a list": ("[]", "holds a list, not a JSON object"),
    "no points": ("{}", "field 'points' is not a list of objects"),
    "a point without m": (
        '{"points": [{"n": 16000, "d_hat": 0.1, "low": 0, "high": 1}]}',
        "points[0]: field 'm'",
    ),
    "a NaN bound": (
        '{"points": [{"n": 1, "m": 2, "d_hat": 0.1, "low": NaN, "high": 1}]}',
        "field 'low' is nan",
    ),
}


@pytest.mark.parametrize(("content", "message"), list(MALFORMED.values()), ids=list(MALFORMED))
def test_score_names_a_missing_or_malformed_predictions_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: str,
    message: str,
) -> None:
    """score read predictions.json with json.loads and document["points"]: a traceback for each of these."""
    monkeypatch.setattr(advisor_validation, "OUT", tmp_path)
    if content is not None:
        (tmp_path / "fashion").mkdir()
        (tmp_path / "fashion" / "predictions.json").write_text(content)
    line = _one_line_error(capsys, lambda: advisor_validation.main(["score", "--data", "fashion"]))
    assert "predictions.json" in line and message in line and "predict --data fashion" in line


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "does not exist; write it first"),
        ("{nope", "is not JSON"),
        ('{"points_scored": 1}', "field 'points' is None"),
        (
            '{"points_scored": 1, "points": 2, "covered": 1, "agree": 1, "decisive": 1, "always_m": 1, '
            '"always_n": 0, "rows": [{"m": 8}]}',
            "rows[0]: field 'd_hat'",
        ),
    ],
    ids=["missing", "not JSON", "no counts", "a row without d_hat"],
)
def test_the_figure_names_a_missing_or_malformed_score_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: str,
    message: str,
) -> None:
    """The figure read score.json with json.loads and score["rows"]: a traceback for each of these."""
    monkeypatch.setattr(advisor_validation_figure, "ROOT", tmp_path)
    if content is not None:
        folder = tmp_path / "results" / "advisor_validation" / "x"
        folder.mkdir(parents=True)
        (folder / "score.json").write_text(content)
    line = _one_line_error(capsys, lambda: advisor_validation_figure.main(["--data", "x"]))
    assert "score.json" in line and message in line and "score --data x" in line


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--minutes", "-1", "--queries", "0"], "argument --minutes: must be a number > 0, got -1"),
        (["--minutes", "nan"], "argument --minutes: must be a number > 0, got nan"),
        (["--queries", "-5"], "argument --queries: must be an integer >= 0, got -5"),
        (["--pool", "0"], "argument --pool: must be an integer >= 1, got 0"),
        (["--window", "9", "3"], "argument --window: pass lo <= hi, got 9 3"),
    ],
)
def test_text_retrieval_refuses_numbers_out_of_range_naming_the_argument(
    capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    """--minutes -1 was accepted and the study started (on all 5,795 queries with --queries 0)."""
    line = _one_line_error(
        capsys, lambda: text_retrieval.parse_args(["configs/wordnet_minilm.toml", *arguments])
    )
    assert message in line


def test_text_retrieval_reads_queries_0_as_all_of_the_split() -> None:
    """--queries 0 is documented as the whole test split (as crl eval scores it), so it stays allowed."""
    assert text_retrieval.parse_args(["configs/wordnet_minilm.toml", "--queries", "0"]).queries == 0


def test_check6_names_a_missing_truth_folder_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A truth folder that is not there ends as one line naming it and the command that writes it."""
    missing = check6.Group("gcide", "shared", (str(tmp_path / "nowhere"),), (8000,))
    monkeypatch.setattr(check6, "GROUPS", (missing,))
    line = _one_line_error(capsys, lambda: check6.main([]))
    assert "nowhere" in line and "--mstar-truth" in line
