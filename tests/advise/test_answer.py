"""The advisor's answer as a user reads it: the recommendation first, every change in the error with its direction
in words, "neither doubling helps" as an answer, the baseline beside the cells, the scope.

The cells are constructed so that the truth is known: the base (N/2, M/2) has error 0.5, and the doubled cells
(N/2, M) and (N, M/2) are set above or below it, so each gain's sign and size are known before the answer is read.
"""

import dataclasses
import json
import math
import sqlite3
import statistics
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize, stats

from crl.advise.answer import Answer, OptionCost, Scope, answer_of, error_change
from crl.advise.heldout import Baseline
from crl.advise.local import local_estimate, pilot_points
from crl.advise.reliability import C_POINTS, C_RIGHT, C, chance_words, p_right

ROOT = Path(__file__).resolve().parents[2]
N, M = 16000, 160
BASE = 0.5
SPREAD = (-0.0015, -0.0005, 0.0005, 0.0015)
"""The four seeds' offsets around each cell's mean (mean 0, sample standard deviation 0.00129)."""


def _answer(
    err_m: float, err_n: float, *, baseline: float = 0.3, locked: bool = True, q: float = 0.5
) -> Answer:
    """The answer on cells with known means: err(N/2, M) = err_m (doubling m), err(N, M/2) = err_n (doubling n),
    the base and the two cells one more step back at BASE."""
    means = dict.fromkeys(pilot_points(N, M), BASE)
    means[(N // 2, M)] = err_m
    means[(N, M // 2)] = err_n
    errors = {cell: [mean + offset for offset in SPREAD] for cell, mean in means.items()}
    estimate = local_estimate(errors, N, M)
    costs = (OptionCost("m", 1000, 1100, estimate.gain_m), OptionCost("n", 1000, 2000, estimate.gain_n))
    scope = Scope("a linear head on frozen minilm features of wordnet, not the backbone", locked)
    return answer_of(
        estimate,
        seeds=4,
        scope=scope,
        costs=costs,
        baseline=Baseline("the minilm features themselves, no head (the zero-shot identity map)", baseline),
        cell_errors=(min(means.values()), max(means.values())),
        q=q,
    )


@pytest.mark.parametrize(
    ("err_m", "err_n", "recommendation", "m_words", "n_words"),
    [
        (
            0.40,
            0.45,
            "m",
            "doubling m lowered the held-out error by 0.1000",
            "doubling n lowered it by 0.0500",
        ),
        (
            0.40,
            0.55,
            "m",
            "doubling m lowered the held-out error by 0.1000",
            "doubling n raised it by 0.0500",
        ),
        (
            0.55,
            0.40,
            "n",
            "doubling m raised the held-out error by 0.0500",
            "doubling n lowered it by 0.1000",
        ),
        (
            0.5291,
            0.5135,
            "neither",
            "doubling m raised the held-out error by 0.0291",
            "doubling n raised it by 0.0135",
        ),
    ],
    ids=["both help", "only m helps", "only n helps", "neither helps"],
)
def test_every_change_is_read_with_its_direction_on_cells_whose_truth_is_known(
    err_m: float, err_n: float, recommendation: str, m_words: str, n_words: str
) -> None:
    """gain = err(base) - err(doubled): a positive gain lowered the error, a negative one raised it (the answer
    once printed "doubling m gained -0.0291", which a reader takes for a gain); the signed error change beside it
    is err(doubled) - err(base)."""
    answer = _answer(err_m, err_n)
    assert answer.estimate.gain_m == pytest.approx(BASE - err_m)
    assert answer.estimate.gain_n == pytest.approx(BASE - err_n)
    assert answer.recommendation == recommendation
    assert m_words in answer.sentence and n_words in answer.sentence
    assert f"(error change {err_m - BASE:+.4f}," in answer.sentence
    assert f"(error change {err_n - BASE:+.4f}," in answer.sentence
    assert "gained" not in answer.sentence
    assert answer.as_dict()["error_change"] == pytest.approx({"m": err_m - BASE, "n": err_n - BASE})


def test_the_recommendation_comes_first() -> None:
    chance = "right more than 9 times in 10 at this strength on the committed grids"
    assert _answer(0.40, 0.45).sentence.startswith(f"Double m (more negatives; {chance}). One step back")
    assert _answer(0.55, 0.40).sentence.startswith(f"Double n (more data; {chance}). One step back")
    close = _answer(0.49, 0.495, q=100.0)
    assert not close.decided
    assert close.sentence.startswith(
        f"Too close to call at this pilot's precision, leaning to doubling m (more negatives; {chance}). One step back"
    )


def test_neither_doubling_helps_is_an_answer_with_both_measured_changes() -> None:
    """Both doublings raised the error (WordNet's pilot: m by 0.029, n by 0.0135): the answer must not lean to a
    doubling, decided or not, and states both changes with their intervals."""
    for q in (0.5, 100.0):
        answer = _answer(0.5291, 0.5135, q=q)
        assert answer.recommendation == "neither" and answer.as_dict()["recommendation"] == "neither"
        assert answer.sentence.startswith("Neither doubling helps here: both raised the held-out error")
        assert "leaning" not in answer.sentence and "Double" not in answer.sentence
        assert "times in 10" not in answer.sentence
        assert answer.p_right is None and answer.as_dict()["p_right"] is None
        assert answer.sentence.count("+-2 se") == 2


def test_each_change_carries_two_standard_errors_of_the_two_cells_it_compares() -> None:
    """The error change of doubling m is mean err(N/2, M) - mean err(N/2, M/2), its se sqrt(se_base^2 + se_m^2),
    against a hand computation from the seeds' sample deviation."""
    answer = _answer(0.40, 0.45)
    se = statistics.stdev([BASE + offset for offset in SPREAD]) / 2
    assert answer.estimate.se_gain_m == pytest.approx(math.sqrt(2) * se)
    change, half = 0.40 - BASE, 2 * math.sqrt(2) * se
    assert f"+-2 se {change - half:+.4f} to {change + half:+.4f})" in answer.sentence
    assert error_change(0.0, 0.01, "m") == (
        "doubling m left the held-out error unchanged (error change +0.0000, +-2 se -0.0200 to +0.0200)"
    )


@pytest.mark.parametrize(
    ("baseline", "relation"),
    [
        (0.3, "all worse than the baseline"),
        (0.9, "all better than the baseline"),
        (0.45, "the baseline lies among them"),
    ],
)
def test_every_answer_shows_the_baseline_beside_the_cells(baseline: float, relation: str) -> None:
    """WordNet's heads reached nDCG@10 0.04-0.11 where zero-shot MiniLM reaches 0.43: the answer must say where the
    cells sit against the baseline."""
    answer = _answer(0.40, 0.45, baseline=baseline)
    assert (
        f"Baseline: the minilm features themselves, no head (the zero-shot identity map) scores {baseline:.4f}; the "
        f"pilot's cells 0.4000 to 0.5000, {relation}." in answer.sentence
    )
    assert answer.as_dict()["baseline"]["error"] == baseline


def test_the_answer_states_its_scope() -> None:
    inside, outside = _answer(0.40, 0.45).sentence, _answer(0.40, 0.45, locked=False).sentence
    for sentence in (inside, outside):
        assert "Scope: crl advise is made for heads on locked features (LiT-style)" in sentence
    assert inside.endswith("not the backbone, inside that scope.")
    assert outside.endswith(
        "outside it, where the interval's coverage and the direction's chance are not known."
    )


def test_option_costs_read_per_unit_of_compute() -> None:
    m, n = _answer(0.40, 0.45).costs
    assert (m.ratio, n.ratio) == (1.1, 2.0)
    assert m.gain_per_million == pytest.approx(0.1 / 100e-6) and n.gain_per_million == pytest.approx(
        0.05 / 1e-3
    )
    assert m.per_million_words == f"{-0.1 / 100e-6:+.3g} per million extra samples"


def test_a_doubling_that_costs_nothing_extra_says_so_and_writes_no_nan() -> None:
    """Fixed per-anchor sets spanning every candidate: doubling m embeds no more rows. The words say so and the
    JSON holds null, never NaN."""
    free = OptionCost("m", 10, 10, 0.1)
    assert free.gain_per_million is None
    assert free.per_million_words == "no extra processed samples"
    answer = _answer(0.40, 0.45)
    answer = dataclasses.replace(answer, costs=(free, answer.costs[1]))
    document = json.loads(json.dumps(answer.as_dict(), allow_nan=False))
    assert document["costs"][0]["gain_per_million_samples"] is None


def test_q_must_be_positive() -> None:
    with pytest.raises(ValueError, match="q = 0"):
        _answer(0.40, 0.45, q=0.0)


def _committed(store: Path, grid: Path, covers: str, backbone: str) -> Answer:
    """The answer at (16,000, 160) from a committed store's pilot cells, against the committed m*(n) grid's
    backbone cell (the zero-shot identity map on the same whole test split)."""
    with sqlite3.connect(store) as connection:
        rows = connection.execute("select cell, result from cells").fetchall()
    errors: dict[tuple[int, int], list[float]] = {}
    for cell, result in rows:
        params = json.loads(cell)
        errors.setdefault((params["n"], params["m"]), []).append(json.loads(result)["error"])
    with sqlite3.connect(grid) as connection:
        (identity,) = connection.execute(
            "select result from cells where json_extract(cell, '$.arm') = 'backbone'"
        ).fetchone()
    score = json.loads(identity)["recall@1" if backbone == "pixels" else "ndcg@10"]
    estimate = local_estimate(errors, N, M)
    means = [statistics.fmean(errors[cell]) for cell in pilot_points(N, M)]
    label = f"the {backbone} features themselves, no head (the zero-shot identity map)"
    return answer_of(
        estimate,
        seeds=4,
        scope=Scope(covers, True),
        costs=(OptionCost("m", 1, 2, estimate.gain_m), OptionCost("n", 1, 2, estimate.gain_n)),
        baseline=Baseline(label, 1.0 - score),
        cell_errors=(min(means), max(means)),
    )


def _quoted(path: Path) -> str:
    """The first block quote of a Markdown file that opens like an answer, joined into one line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, current = [], []
    for line in [*lines, ""]:
        if line.startswith("> "):
            current.append(line[2:])
        elif current:
            blocks.append(" ".join(current))
            current = []
    return "\n".join(blocks)


def test_the_answers_quoted_in_the_readme_and_the_guide_are_what_the_code_says_of_the_committed_cells() -> (
    None
):
    """README's Fashion-MNIST example and docs/advisor.md's WordNet example, recomputed from the committed stores:
    if this fails, the docs show a wording the code no longer gives."""
    fashion = _committed(
        ROOT / "results/advise_readme/fashion/advise.sqlite",
        ROOT / "results/mstar_real/fashion/results.sqlite",
        "a linear head on frozen pixels features of fashion_mnist, not the backbone",
        "pixels",
    )
    wordnet = _committed(
        ROOT / "results/advisor_validation/wordnet/advise.sqlite",
        ROOT / "results/mstar_real/wordnet/results.sqlite",
        "a linear head on frozen minilm features of wordnet, not the backbone",
        "minilm",
    )
    assert wordnet.recommendation == "neither"
    assert fashion.sentence in _quoted(ROOT / "README.md")
    assert wordnet.sentence in _quoted(ROOT / "docs" / "advisor.md")


@pytest.mark.parametrize(
    ("z", "expected"),
    [(0.0, 0.5), (0.05, 0.6194), (0.1, 0.7284), (0.2, 0.8880), (0.5, 0.9988), (6.81, 1.0)],
)
def test_the_directions_chance_is_phi_of_c_z(z: float, expected: float) -> None:
    """p_right = Phi(C z) at C = 6.08, against the standard normal's cdf computed apart (statistics.NormalDist)."""
    assert (
        p_right(z) == pytest.approx(statistics.NormalDist().cdf(C * z)) == pytest.approx(expected, abs=1e-4)
    )


def test_the_directions_chance_is_monotone_and_at_least_a_half() -> None:
    z = np.linspace(0.0, 20.0, 2001)
    p = np.array([p_right(float(value)) for value in z])
    assert np.all(np.diff(p) >= 0) and p[0] == 0.5 and np.all((p >= 0.5) & (p <= 1.0))
    with pytest.raises(ValueError, match=r"z = -0\.1"):
        p_right(-0.1)


@pytest.mark.parametrize(
    ("p", "words"),
    [
        (0.5, "right about 5 times in 10"),
        (0.68, "right about 7 times in 10"),
        (0.94, "right about 9 times in 10"),
        (0.95, "right more than 9 times in 10"),
        (1.0, "right more than 9 times in 10"),
    ],
)
def test_the_chance_is_said_to_a_tenth(p: float, words: str) -> None:
    assert chance_words(p) == words


def test_a_weak_direction_states_its_chance_in_the_sentence_and_the_json() -> None:
    """D_hat = 0.0001 against seeds' standard errors of 0.00065 per cell and a drift of 0.0001 (the cells one more
    step back tie): z = 0.0001 / sqrt(2 0.00065^2 + 0.0001^2) = 0.109, Phi(6.08 z) = 0.75, "about 7 times in 10"."""
    answer = _answer(0.49995, 0.50005, q=100.0)
    z = abs(answer.estimate.d_hat) / answer.estimate.scale
    assert z == pytest.approx(0.109, abs=1e-3) and answer.strength == pytest.approx(z)
    assert answer.p_right == pytest.approx(p_right(z)) == pytest.approx(0.746, abs=1e-3)
    assert answer.as_dict()["p_right"] == answer.p_right and answer.as_dict()["strength"] == answer.strength
    assert (
        "leaning to doubling m (more negatives; right about 7 times in 10 at this strength" in answer.sentence
    )


def test_c_is_an_independent_refit_on_the_committed_calibration_points() -> None:
    """C re-derived from docs/advisor_calibration.json by another code path: the decisive points (the measured D's
    Welch interval excludes 0), z = |D_hat| / scale, the Firth-penalised probit likelihood
    sum log Phi(+-c z) + log(sum z^2 phi(c z)^2 / (Phi(c z) Phi(-c z))) / 2 maximised by Nelder-Mead over c."""
    rows = json.loads((ROOT / "docs" / "advisor_calibration.json").read_text(encoding="utf-8"))["rows"]
    cells = [
        cell for grid in ("fashion pixels", "wordnet minilm", "fashion cnn") for cell in rows[grid]["cells"]
    ]
    chosen = [cell for cell in cells if cell["measured_low"] > 0 or cell["measured_high"] < 0]
    z = np.array([abs(cell["d_hat"]) / cell["scale"] for cell in chosen])
    sign = np.array([1.0 if (cell["d_hat"] > 0) == (cell["measured"] > 0) else -1.0 for cell in chosen])
    assert (len(cells), len(chosen), int((sign > 0).sum())) == (48, C_POINTS, C_RIGHT)

    def negative(c: np.ndarray) -> float:
        t = float(c[0]) * z
        info = np.sum(z**2 * np.exp(2 * stats.norm.logpdf(t) - stats.norm.logcdf(t) - stats.norm.logcdf(-t)))
        return -float(np.sum(stats.norm.logcdf(sign * t)) + 0.5 * np.log(info))

    refit = optimize.minimize(negative, x0=np.array([1.0]), method="Nelder-Mead", options={"xatol": 1e-6})
    assert refit.success and abs(float(refit.x[0]) - C) < 0.005
