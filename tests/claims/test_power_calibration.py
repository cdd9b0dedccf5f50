"""crl.claims.power_calibration: C1's and C2's violation counts read by the one power method, checked against the
claims' own rules re-judged from their committed confirmation tables (full fidelity, seed 5923)."""

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from crl.claims import c01_fisher as c1
from crl.claims import c02_calibration as c2
from crl.claims import power, power_calibration, power_claims, replay
from crl.claims.budget import part_level
from crl.claims.context import Fidelity
from crl.claims.verdict import Verdict

RESULTS = Path(__file__).resolve().parents[2] / "results"
TABLES = {
    "C1": RESULTS / "c1" / "confirm_5923_full.jsonl.gz",
    "C2": RESULTS / "c2" / "confirm_5923_full.jsonl.gz",
}


def _all_specs(claim: str) -> power.SeedSetSpecs:
    """The claim's parts and controls on every cell of its confirmation table (one set, not halves)."""
    records = replay.read_cells(TABLES[claim], claim)
    return power_claims.ENGINES[claim].build(records, Fidelity.FULL).specs("all")


def _worst(excess: np.ndarray, se: np.ndarray, level: float) -> tuple[float, float]:
    """The worst Monte-Carlo point's excess over its bound and its tolerance k se + 1e-12, computed here from the
    table's rows (not by the engine)."""
    k = stats.norm.isf((1.0 - level) / excess.size)
    nearness = np.where(se > 0.0, excess - k * se, -np.inf)
    worst = int(np.argmax(nearness))
    return float(excess[worst]), float(k * se[worst] + 1e-12)


def _count(detail: str) -> int:
    """The count of points beyond k se that a judge's statistic reports."""
    found = re.search(r"(\d+) of (\d+) points beyond", detail)
    assert found is not None
    return int(found.group(1))


def test_c1s_judges_reproduce_its_rejudged_verdict_and_counts() -> None:
    """If this fails, C1's engine does not read its points as the claim's rule does: at shift 0 on every cell of
    the confirmation table, each judge must give the re-judged claim's verdict and violation count, its worst
    point the excess and tolerance computed from the table's rows, and the batch rows must carry each point's
    estimate and se exactly (no batch tolerance)."""
    judged = replay.rejudge(TABLES["C1"], "C1", Fidelity.FULL, 5923)
    counts = {s.name[:4]: s.value for s in judged.statistics}
    records = replay.read_cells(TABLES["C1"], "C1")
    scores = sorted(
        (r for r in records if r.cell.params["part"] == "a"),
        key=lambda r: (str(r.cell.params["model"]), int(r.cell.params["index"])),
    )
    level = part_level(c1.CLAIM.parts)
    specs = _all_specs("C1")
    parts = {p.name: p for p in specs.parts}
    for key, name, label in (
        ("excess", "C1 (a1) L(s) - L* >= 0", "(a1)"),
        ("gap", "C1 (a2) E* - E(s) >= 0", "(a2)"),
    ):
        spec = parts[name]
        verdict, statistic = spec.judge(spec.values, 0.0)
        assert statistic is not None
        assert verdict is Verdict.PASS and judged.verdict is Verdict.PASS
        assert _count(statistic.detail) == counts[label] == 0
        value = np.array([r.result[key] for r in scores])
        se = np.array([r.result[f"{key}_se"] for r in scores])
        excess, tolerance = _worst(-value, se, level)
        assert statistic.value == pytest.approx(excess, rel=1e-9, abs=1e-15)
        assert statistic.ci_high - statistic.value == pytest.approx(tolerance, rel=1e-9)
        assert spec.delta == pytest.approx(tolerance, rel=1e-9)
    family = parts["C1 (b) E(c) <= E(argmin L)"]
    verdict, statistic = family.judge(family.values, 0.0)
    assert statistic is not None and verdict is Verdict.PASS
    assert _count(statistic.detail) == counts["(b) "] == 0
    (control,) = specs.controls
    assert control.judge(control.values) is judged.control.verdict is Verdict.FAIL


def test_c2s_judge_reproduces_its_rejudged_verdict_and_count() -> None:
    """If this fails, C2's engine does not read its points as the claim's rule does: on every point of the
    confirmation table, its judge must give the re-judged PASS with 0 violations, the worst point's excess over
    sqrt(2x/tau) computed from the rows, and its control the re-judged FAIL with the same count."""
    judged = replay.rejudge(TABLES["C2"], "C2", Fidelity.FULL, 5923)
    rows = c2._flatten(replay.read_cells(TABLES["C2"], "C2"))
    x, x_se, y, y_se, tau = (
        np.array([r[k] for r in rows]) for k in ("excess", "excess_se", "gap", "gap_se", "tau")
    )
    bound, bound_se = c2.sqrt_bound(x, x_se, tau)
    specs = _all_specs("C2")
    (part,) = specs.parts
    verdict, statistic = part.judge(part.values, 0.0)
    assert statistic is not None
    assert verdict is judged.verdict is Verdict.PASS
    assert _count(statistic.detail) == judged.statistics[0].value == 0
    excess, tolerance = _worst(y - bound, np.hypot(y_se, bound_se), part_level(c2.CLAIM.parts))
    assert statistic.value == pytest.approx(excess, rel=1e-9, abs=1e-15)
    assert part.delta == pytest.approx(tolerance, rel=1e-9)
    (control,) = specs.controls
    assert control.judge(control.values) is judged.control.verdict is Verdict.FAIL
    linear = c2.linear_count(x, x_se, y, y_se, tau, part_level(c2.CLAIM.parts))
    assert linear.count_beyond_mc_error == judged.control.statistics[0].value > 0


def test_the_batch_rows_carry_each_points_estimate_and_se_exactly() -> None:
    """If this fails, the batch rows that stand for a cell's draws do not have the cell's estimate as mean and its
    se as the se of their mean: the rule on them would not be the claim's rule on its cells."""
    means = {"v": np.array([0.5, -1e-6, 2e-6, 3.0]), "w": np.array([1.0, 2.0, 3.0, 4.0])}
    se = {"v": np.array([0.1, 1e-6, 0.0, 1e-3]), "w": np.array([0.2, 0.0, 0.3, 0.0])}

    def excess(found: dict[str, np.ndarray], spread: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        return found["v"], spread["v"]

    points = power_calibration.carried_points(means, se, excess)
    assert ("v", 2) not in points.carried and ("w", 1) not in points.carried
    found, spread = points.read(points.values())
    for q in means:
        assert found[q] == pytest.approx(means[q], rel=1e-12, abs=1e-18)
        assert spread[q] == pytest.approx(se[q], rel=1e-9, abs=1e-18)


def _counts(
    claim: str,
) -> tuple[power_calibration.CountPart, dict[str, np.ndarray], dict[str, np.ndarray], str]:
    """The claim's first part as a count on every cell of its table, and the quantity whose noise it tests."""
    records = replay.read_cells(TABLES[claim], claim)
    if claim == "C1":
        return (*power_calibration.C1Parts(records, Fidelity.FULL).sign_count("excess", "a1"), "excess")
    engine = power_calibration.C2Parts(records, Fidelity.FULL)
    return engine.count("C2", c2.bound_count, False), engine.means, engine.se, "y"


def _scaled(
    count: power_calibration.CountPart,
    spec: power.PartSpec,
    means: dict[str, np.ndarray],
    se: dict[str, np.ndarray],
) -> power.PartSpec:
    """``spec`` on points of se ``se`` (its delta and worst point held)."""
    points = power_calibration.carried_points(means, se, count.excess)
    return dataclasses.replace(
        spec, values=points.values(), judge=count.judge(points, count.worst(means, se))
    )


@pytest.mark.parametrize("claim", ["C1", "C2"])
def test_the_power_follows_the_noise_of_the_points(claim: str) -> None:
    """If this fails, a count's P(FAIL) does not depend on its points' Monte-Carlo noise: with every se a tenth of
    the measured one a worst point 2 delta beyond its bound (delta the measured tolerance) must FAIL in nearly
    every design, and with the judged quantity's se inflated 30 times (C1's L(s) - L*, C2's E* - E) in few: the
    gate can fail. P(decide) is 1 (a count has no INCONCLUSIVE). (C2's L - L* is not inflated: a sqrt bound whose
    x is drawn below 0 is 0, so an inflated x makes violations, not fewer.)"""
    count, means, se, quantity = _counts(claim)
    spec = count.spec(means, se)
    rng = np.random.default_rng(0)
    quiet = _scaled(count, spec, means, {q: 0.1 * v for q, v in se.items()})
    little = power.part_power(quiet, "all", power_calibration.BATCHES, 60, rng)
    assert little.p_fail.value >= 0.95 and little.p_decide.value == 1.0
    assert spec.delta is not None and little.failing == pytest.approx(2.0 * spec.delta)
    noisy = _scaled(count, spec, means, {**se, quantity: 30.0 * se[quantity]})
    inflated = power.part_power(noisy, "all", power_calibration.BATCHES, 60, rng)
    assert inflated.p_fail.value < 0.5
    assert inflated.failing == pytest.approx(little.failing)


def test_one_table_splits_into_two_independent_halves() -> None:
    """If this fails, a single C2 or C1 table is not split into two disjoint sets of independent cells: the cells
    numbered by index must be halved, every other series dealt alternately (C2's rank swaps, the linear law's
    control's breakers, in both halves), no cell in both, none lost; C1's family cells go to the first half."""
    for claim in ("C1", "C2"):
        records = replay.read_cells(TABLES[claim], claim)
        (_, first), (_, second) = power_claims.seed_sets([TABLES[claim]], claim)
        seeds = [{r.cell.seed for r in half} for half in (first, second)]
        assert not seeds[0] & seeds[1]
        assert len(first) + len(second) == len(records)
        assert {r.cell.seed for r in records} == seeds[0] | seeds[1]
        if claim == "C2":
            for half in (first, second):
                series = {r.cell.params["series"] for r in half}
                assert series == set(c2.SERIES)
        else:
            assert {r.cell.params.get("arm") for r in first if r.cell.params["part"] == "b"} == {
                "claim",
                "control",
            }
    found = power_claims.claim_power([TABLES["C2"]], "C2", Fidelity.FULL, seeds=100, resamples=40)
    assert len({p.seed_set for p in found.parts}) == 2 and len(found.controls) == 2
    assert all(c.p_pass.value == 0.0 for c in found.controls)
    assert power_claims.design_seeds("C1", Fidelity.FULL) == power_calibration.BATCHES
    assert math.isclose(found.parts[0].p_decide.value, 1.0)
