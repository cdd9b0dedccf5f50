"""Contract v4's stability test on the confirmation tables at 5923: every judged statistic of C3, C4, C7, C9 and
C10 moves by at most INFLUENCE_BOUND root-mean-square moves when one unit is deleted (C5's and C6's statistics,
which could jump, have their own tests; C1's and C2's are violation counts, whose worst point is a maximum over
points, not a smooth statistic)."""

from pathlib import Path

import numpy as np
import pytest

from crl.claims.context import Fidelity
from crl.claims.power import PartSpec
from crl.claims.power_claims import ENGINES
from crl.claims.replay import records_of
from crl.stats.summary import INFLUENCE_BOUND, influence_ratio

RESULTS = Path(__file__).resolve().parents[2] / "results"
TABLES = {
    "C3": "c3/confirm_5923_full.jsonl.gz",
    "C4": "c4/confirm_5923_full.jsonl.gz",
    "C7": "c7/batches_confirm_5923_full.jsonl.gz",
    "C9": "c9/confirm_5923_full.jsonl.gz",
    "C10": "c10/confirm_5923_full.jsonl.gz",
}


def judged_statistics(claim: str) -> list[PartSpec]:
    """The claim's parts on all units of its confirmation table, one per statistic (a band's two edges judge one
    statistic)."""
    specs = ENGINES[claim].build(records_of(RESULTS / TABLES[claim], claim), Fidelity.FULL).specs("all")
    return [spec for spec in specs.parts if "lower edge" not in spec.name]


def delete_one_ratio(spec: PartSpec) -> float:
    """influence_ratio of the part's statistic over its delete-one-unit values."""
    estimate = spec.judge(spec.values, 0.0)[1]
    assert estimate is not None
    moved = []
    for unit in range(spec.values.shape[0]):
        found = spec.judge(np.delete(spec.values, unit, axis=0), 0.0)[1]
        assert found is not None
        moved.append(found.value)
    return influence_ratio(estimate.value, np.asarray(moved))


@pytest.mark.parametrize("claim", list(TABLES))
def test_no_unit_moves_a_confirmed_statistic_alone(claim: str) -> None:
    """If this fails, one seed (or batch, or block) moves a confirmed statistic far beyond the others: its
    delete-one jackknife is not an interval, and its verdict rests on that unit."""
    ratios = {spec.name: delete_one_ratio(spec) for spec in judged_statistics(claim)}
    assert ratios and all(ratio <= INFLUENCE_BOUND for ratio in ratios.values()), ratios


def test_the_stability_test_catches_a_unit_that_moves_a_statistic_alone() -> None:
    """If this fails, the test above could not fail: one C10 seed shifted far along the n series must push the
    secant's ratio past the bound."""
    (secant,) = [spec for spec in judged_statistics("C10") if "secant" in spec.name]
    values = secant.values.copy()
    values[0] *= 40.0
    jumped = PartSpec(secant.name, secant.bound, secant.delta, secant.upper, values, secant.judge)
    assert delete_one_ratio(jumped) > INFLUENCE_BOUND
