"""crl.claims.power_kernels, the one power method's engines of C7 and C9: each judge at shift 0 against the claim's
own verdict and statistics re-judged from the committed standard tables, the power's response to the values'
noise, and the split of one source into two independent halves."""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from crl.claims import c07_ce_gap as c7
from crl.claims import power, power_claims, power_kernels, replay
from crl.claims.context import Fidelity
from crl.claims.verdict import Verdict

RESULTS = Path(__file__).resolve().parents[2] / "results"
C9_TABLE = RESULTS / "c9" / "verify_0_standard.jsonl.gz"
C7_TABLE = RESULTS / "c7" / "verify_0_standard.jsonl.gz"
C7_BATCHES = RESULTS / "c7" / "batches_verify_0_standard.jsonl.gz"


def _c9_specs() -> power.SeedSetSpecs:
    return power_kernels.C9Parts(replay.read_cells(C9_TABLE, "C9"), Fidelity.STANDARD).specs("all")


def _c7_specs() -> power.SeedSetSpecs:
    return power_kernels.C7Parts(replay.read_cells(C7_BATCHES, "C7"), Fidelity.STANDARD).specs("all")


def test_c9s_judges_reproduce_the_claims_own_verdict_and_statistics() -> None:
    """If this fails, C9's engine does not judge as the claim does: on all 12 replicates of the standard store,
    each part's judge at shift 0 must give the verdict and the Student-t interval the claim's own run gives
    (re-judged from the committed table), and the control's judge the control's verdict."""
    result = replay.rejudge(C9_TABLE, "C9", Fidelity.STANDARD, 0)
    own = {s.name: s for s in result.statistics}
    specs = _c9_specs()
    assert len(specs.parts) == len(own) == 6
    for spec in specs.parts:
        verdict, statistic = spec.judge(spec.values, 0.0)
        assert statistic is not None and spec.values.shape == (12, 1)
        expected = own[statistic.name]
        assert (statistic.value, statistic.ci_low, statistic.ci_high) == pytest.approx(
            (expected.value, expected.ci_low, expected.ci_high), rel=1e-12, abs=1e-18
        )
        assert verdict is Verdict.PASS is result.verdict
    (control,) = specs.controls
    assert control.values.shape == (12, 4)
    assert control.judge(control.values) is result.control.verdict is Verdict.FAIL


def test_c7s_batches_are_the_cells_draws() -> None:
    """If this fails, C7's batch table is not the stored cells cut into batches: every cell's mean of its batch
    means must be the stored mean (the same draws, recomputed), and a recomputed cell that differs from the
    stored one must be refused, not batched."""
    cells = replay.read_cells(C7_TABLE, "C7")
    batches = replay.read_cells(C7_BATCHES, "C7")
    for cell in cells:
        own = [
            b.result
            for b in batches
            if {**b.cell.params, "batch": None} == {**cell.cell.params, "batch": None}
        ]
        assert len(own) == 80
        for form in ("dcl", "infonce"):
            key = f"{form}_mean" if cell.cell.params.get("arm") != "control" else f"{form}_naive_mean"
            assert np.mean([row[key] for row in own]) == pytest.approx(cell.result[key], rel=1e-9, abs=1e-15)
    smallest = min(
        (c for c in cells if c.cell.params.get("arm") != "control"), key=lambda c: int(c.cell.params["k"])
    )
    recomputed = power_kernels.c7_batch_records([smallest])
    assert [r.result for r in recomputed] == [
        b.result
        for b in batches
        if b.cell.params == {**smallest.cell.params, "batch": b.cell.params["batch"]}
    ]
    tampered = dataclasses.replace(smallest, result={**smallest.result, "dcl_mean": 1.0})
    with pytest.raises(ValueError, match="not the stored"):
        power_kernels.c7_batch_records([tampered])


def test_c7s_judges_reproduce_the_claims_rates_on_batch_means() -> None:
    """If this fails, C7's rule read on batch means (80 batches of 100 draws a cell) no longer agrees with the
    claim's own on draws: every rate within 0.002 of the claim's, each CI end within 0.005 and its width within
    15%, the same verdicts; the control's judge FAILs as the claim's control does."""
    result = replay.rejudge(C7_TABLE, "C7", Fidelity.STANDARD, 0)
    own = {s.name: s for s in result.statistics}
    specs = _c7_specs()
    assert len(specs.parts) == 8  # four rates, each as its band's two edges
    for spec in specs.parts:
        verdict, statistic = spec.judge(spec.values, 0.0)
        assert statistic is not None and spec.values.shape == (80, len(c7.PLANS[Fidelity.STANDARD].ks))
        expected = own[statistic.name]
        assert statistic.value == pytest.approx(expected.value, abs=0.002)
        assert (statistic.ci_low, statistic.ci_high) == pytest.approx(
            (expected.ci_low, expected.ci_high), abs=5e-3
        )
        width = (statistic.ci_high - statistic.ci_low) / (expected.ci_high - expected.ci_low)
        assert 0.85 <= width <= 1.15
        assert verdict is Verdict.PASS is result.verdict
    (control,) = specs.controls
    assert control.judge(control.values) is result.control.verdict is Verdict.FAIL


def _inflated(spec: power.PartSpec, factor: float) -> power.PartSpec:
    """``spec`` with its values' spread about their mean multiplied by ``factor``."""
    mean = spec.values.mean(axis=0)
    return dataclasses.replace(spec, values=mean + factor * (spec.values - mean))


@pytest.mark.parametrize(
    ("claim", "index", "factor"),
    [("C9", 0, 3e3), ("C9", 3, 1e6), ("C7", 0, 30.0), ("C7", 1, 30.0), ("C7", 7, 100.0)],
)
def test_the_power_falls_when_the_noise_is_inflated(claim: str, index: int, factor: float) -> None:
    """If this fails, a C7 or C9 gate cannot fail: with the measured noise P(FAIL) at bound + 2 delta (or the
    mirror truth) is ~1, and with the values' spread about their mean inflated a lot it must drop below 0.8."""
    spec = (_c9_specs() if claim == "C9" else _c7_specs()).parts[index]
    seeds = power_kernels.c9.REPLICATES[Fidelity.STANDARD] if claim == "C9" else 80
    quiet = power.part_power(spec, "set", seeds, 60, np.random.default_rng(1))
    loud = power.part_power(_inflated(spec, factor), "set", seeds, 60, np.random.default_rng(1))
    assert quiet.p_fail.value >= 0.95 and quiet.passes
    assert loud.p_fail.value < 0.8 and not loud.passes


def test_c9s_source_splits_into_two_independent_halves() -> None:
    """If this fails, `crl power` on one C9 run does not split it into the halves of each arm's replicates (6 and
    6 at standard): the two seed sets must hold disjoint cells (seeds), each arm in each."""
    (first, one), (second, two) = power_claims.seed_sets([C9_TABLE], "C9")
    assert first != second
    assert {r.cell.seed for r in one}.isdisjoint({r.cell.seed for r in two})
    for records in (one, two):
        for arm in ("claim", "control"):
            assert {r.cell.params["replicate"] for r in records if r.cell.params["arm"] == arm} == set(
                range(6)
            )
    found = power_claims.claim_power([C9_TABLE], "C9", Fidelity.STANDARD, seeds=12, resamples=5)
    assert {p.seed_set for p in found.parts} == {first, second}
    assert all(p.measured_seeds == 6 and p.seeds == 12 for p in found.parts)
    assert len(found.parts) == 12 and len(found.controls) == 2


def test_c7s_batch_table_splits_into_two_independent_halves() -> None:
    """If this fails, `crl power` on C7's batch table does not split every cell's draws into two disjoint halves
    (batches 0-39 and 40-79 at standard, the control's likewise): the halves' batch means must differ, and the
    mean of the two halves' means must be the cell's mean."""
    (first, one), (second, two) = power_claims.seed_sets([C7_BATCHES], "C7")
    assert first != second
    cells = {(tuple(sorted((k, str(v)) for k, v in r.cell.params.items() if k != "batch"))) for r in one}
    assert len(cells) == 18
    for half in (one, two):
        assert {r.cell.params["batch"] for r in half} == set(range(40))
    key = next(iter(cells))

    def means(records: list) -> list[float]:
        return [
            r.result["dcl_naive_mean"]
            for r in records
            if tuple(sorted((k, str(v)) for k, v in r.cell.params.items() if k != "batch")) == key
        ]

    assert not set(means(one)) & set(means(two))
    whole = [r for r in replay.read_cells(C7_BATCHES, "C7") if r.cell.params["batch"] < 80]
    assert math.isclose(
        (np.mean(means(one)) + np.mean(means(two))) / 2, float(np.mean(means(whole))), rel_tol=1e-12
    )
    found = power_claims.claim_power([C7_BATCHES], "C7", Fidelity.STANDARD, seeds=80, resamples=3)
    assert all(p.measured_seeds == 40 for p in found.parts) and len(found.parts) == 16
    assert all(c.seeds == 80 for c in found.controls)
