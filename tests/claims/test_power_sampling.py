"""crl.claims.power_sampling: C3's and C4's parts for the one power method, checked against each claim's own run on
constructed cells (its verdict and statistics), on the committed confirmation tables where they exist, for
power that follows the noise, and for the two independent halves of one run."""

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crl.claims import c03_scrl_inner as c3
from crl.claims import c04_sscrl_fluctuation as c4
from crl.claims import power, power_claims, power_sampling, replay
from crl.claims.budget import part_level
from crl.claims.context import ClaimContext, Fidelity
from crl.claims.result import ClaimResult
from crl.claims.verdict import Verdict
from crl.sweep import Cell, CellFn, CellRecord, SweepStore

RESULTS = Path(__file__).resolve().parents[2] / "results"
RUN_SEED = 11
C3_DRAWS = 1000
"""Draws per chunk of the constructed C3 runs (the claim's standard plan has 5000; fewer keep the tests fast)."""


@dataclasses.dataclass
class _Constructed(ClaimContext):
    """A context whose cells are made by ``make`` (a constructed truth), never computed; it keeps the records."""

    make: Callable[[Cell], dict[str, Any]] | None = dataclasses.field(default=None, kw_only=True)
    records: list[CellRecord] = dataclasses.field(default_factory=list, kw_only=True)

    def run_cells(self, cells: Any, fn: CellFn) -> list[CellRecord]:
        assert self.make is not None
        found = [
            CellRecord(self.claim_id, cell, self.make(cell), "constructed", "now", 0.0) for cell in cells
        ]
        self.records += found
        return found


def _c3_gaps(noise: float) -> Callable[[Cell], dict[str, Any]]:
    """Per-draw gaps 0.5/m (claim) and 0.3 m^-0.2 (control), each times 1 + noise z."""

    def make(cell: Cell) -> dict[str, Any]:
        p = cell.params
        m = int(p["m"])
        mean = 0.5 / m if p["arm"] == "claim" else 0.3 * m**-0.2
        z = np.random.default_rng(cell.seed).standard_normal(int(p["n_draws"]))
        return {"gap": (mean * (1.0 + noise * z)).tolist()}

    return make


def _c4_sds(noise: float) -> Callable[[Cell], dict[str, Any]]:
    """Block sds 0.3 x^target (claim) and 0.3 x^(target - 0.3) (control, faster), each times 1 + noise z."""

    def make(cell: Cell) -> dict[str, Any]:
        p = cell.params
        target = c4.SERIES[str(p["series"])][2] - (0.3 if p["arm"] == "control" else 0.0)
        z = np.random.default_rng(cell.seed).standard_normal(int(p["blocks"]))
        return {"sd": (0.3 * int(p["x"]) ** target * (1.0 + noise * z)).tolist()}

    return make


def _run(
    claim: Any, make: Callable[[Cell], dict[str, Any]], tmp_path: Path
) -> tuple[ClaimResult, list[CellRecord]]:
    """The claim's own ``run`` at standard on constructed cells: its result and the cells it read."""
    with SweepStore(tmp_path / "unused.sqlite") as store:
        ctx = _Constructed(
            claim.id, Fidelity.STANDARD, store, RUN_SEED, "run", level=part_level(claim.parts), make=make
        )
        return claim.run(ctx), ctx.records


@pytest.fixture
def few_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """C3's standard plan with C3_DRAWS draws per chunk in both arms."""
    for arm in ("claim", "control"):
        monkeypatch.setitem(c3.DRAWS_PER_CHUNK[arm], Fidelity.STANDARD, C3_DRAWS)


@pytest.fixture(scope="module")
def c3_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[ClaimResult, list[CellRecord]]:
    """C3's own run at standard (C3_DRAWS draws per chunk) on constructed gaps, once for the module."""
    with pytest.MonkeyPatch.context() as patch:
        for arm in ("claim", "control"):
            patch.setitem(c3.DRAWS_PER_CHUNK[arm], Fidelity.STANDARD, C3_DRAWS)
        return _run(c3.CLAIM, _c3_gaps(1.4), tmp_path_factory.mktemp("c3"))


@pytest.fixture(scope="module")
def c4_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[ClaimResult, list[CellRecord]]:
    """C4's own run at standard on constructed block sds, once for the module."""
    return _run(c4.CLAIM, _c4_sds(0.1), tmp_path_factory.mktemp("c4"))


def test_c3s_judge_on_all_units_reproduces_the_claims_own_run(
    c3_run: tuple[ClaimResult, list[CellRecord]],
) -> None:
    """If this fails, C3's engine does not judge as the claim's own run does: on every unit of a run, at shift 0,
    the judge (batch means of 500 draws resampled within each m) must give the run's rate exactly (the batches'
    mean is the draws' mean) and its CI ends to within 5% of the CI's width (the batch tolerance), the same verdict,
    and the control's verdict."""
    result, records = c3_run
    parts = power_sampling.C3Parts(records, Fidelity.STANDARD, run_seed=RUN_SEED)
    assert parts.units["claim"].shape == (8 * C3_DRAWS // power_sampling.C3_BATCH, len(parts.grid))
    own = result.statistics[0]
    for spec in parts.rate():
        verdict, statistic = spec.judge(spec.values, 0.0)
        assert statistic is not None
        assert verdict is result.verdict
        assert statistic.value == pytest.approx(own.value, abs=1e-12)
        width = own.ci_high - own.ci_low
        assert statistic.ci_low == pytest.approx(own.ci_low, abs=0.05 * width)
        assert statistic.ci_high == pytest.approx(own.ci_high, abs=0.05 * width)
    control = parts.control()
    assert control.judge(control.values) is result.control.verdict
    assert control.seeds == power_sampling.c3_units("control", Fidelity.STANDARD)


def test_c4s_judges_on_all_units_reproduce_the_claims_own_run(
    c4_run: tuple[ClaimResult, list[CellRecord]],
) -> None:
    """If this fails, C4's engine does not judge as the claim's own run does: on every block of a run, at shift 0,
    each part's judge must give the run's statistic exactly (same blocks, same bootstrap stream) and its verdict,
    and the control's combined verdict must be the run's."""
    result, records = c4_run
    parts = power_sampling.C4Parts(records, Fidelity.STANDARD, run_seed=RUN_SEED)
    for series, own in zip(c4.SERIES, result.statistics, strict=True):
        for spec in parts.rate(series):
            verdict, statistic = spec.judge(spec.values, 0.0)
            assert statistic is not None and spec.values.shape == (c4.BLOCKS[Fidelity.STANDARD], 5)
            assert (statistic.value, statistic.ci_low, statistic.ci_high) == pytest.approx(
                (own.value, own.ci_low, own.ci_high), abs=1e-12
            )
            assert verdict is Verdict.PASS
    control = parts.control()
    assert control.judge(control.values) is result.control.verdict
    assert result.verdict is Verdict.PASS


@pytest.mark.skipif(
    not (RESULTS / "c4" / "confirm_5923_full.jsonl.gz").is_file(),
    reason="C4's confirmation table is not committed",
)
def test_c4s_judges_reproduce_its_committed_confirmation() -> None:
    """If this fails, C4's engine reads the committed confirmation at 5923 otherwise than the claim's rule: each
    part's judge on all its blocks at shift 0 must give the re-judged statistics exactly, and the control's
    verdict."""
    table = RESULTS / "c4" / "confirm_5923_full.jsonl.gz"
    result = replay.rejudge(table, "C4", Fidelity.FULL, 5923)
    parts = power_sampling.C4Parts(replay.read_cells(table, "C4"), Fidelity.FULL, run_seed=5923)
    for series, own in zip(c4.SERIES, result.statistics, strict=True):
        statistic = parts.rate(series)[0].judge(parts.units[("claim", series)], 0.0)[1]
        assert statistic is not None
        assert (statistic.value, statistic.ci_low, statistic.ci_high) == pytest.approx(
            (own.value, own.ci_low, own.ci_high), abs=1e-12
        )
    control = parts.control()
    assert control.judge(control.values) is result.control.verdict


def _inflated(spec: power.PartSpec, relative_se: float) -> power.PartSpec:
    """``spec`` with every unit's deviation from the set's mean multiplied by one factor, the factor that gives the
    noisiest grid point's mean the standard error ``relative_se`` (relative to that mean) over the measured units."""
    mean = spec.values.mean(axis=0)
    se = spec.values.std(axis=0, ddof=1) / np.sqrt(spec.values.shape[0])
    factor = relative_se / float(np.max(se / np.abs(mean)))
    assert factor > 5.0
    return dataclasses.replace(spec, values=mean + factor * (spec.values - mean))


def test_power_falls_when_the_noise_is_inflated(
    c3_run: tuple[ClaimResult, list[CellRecord]], c4_run: tuple[ClaimResult, list[CellRecord]]
) -> None:
    """If this fails, a gate of C3 or C4 cannot fail: with the measured noise (1-2% a grid point's mean) each band
    edge's P(FAIL) at bound + 2 delta and its P(decide) are about 1 at the measured units, and with every unit's
    deviation inflated (more than 5 times: a grid point's mean 25% noisy over the measured units) a design of 3
    units must bring P(FAIL) below the gate's 0.8 (its interval reaches the band, or its means are not resolved)."""
    specs = [
        *power_sampling.C3Parts(c3_run[1], Fidelity.STANDARD).rate(),
        *power_sampling.C4Parts(c4_run[1], Fidelity.STANDARD).rate("sscrl_m"),
    ]
    for spec in specs:
        quiet = power.part_power(spec, "set", spec.values.shape[0], 40, np.random.default_rng(1))
        loud = power.part_power(_inflated(spec, 0.25), "set", 3, 40, np.random.default_rng(1))
        assert quiet.p_fail.value >= 0.95, spec.name
        assert quiet.p_decide.value >= 0.95, spec.name
        assert loud.p_fail.value < 0.8, spec.name


def _store(tmp_path: Path, claim: Any, make: Callable[[Cell], dict[str, Any]], fidelity: Fidelity) -> None:
    """A run folder whose store holds the claim's constructed cells (seeds as the claim derives them)."""
    with SweepStore(tmp_path / "unused.sqlite") as scratch:
        ctx = _Constructed(
            claim.id, fidelity, scratch, RUN_SEED, "run", level=part_level(claim.parts), make=make
        )
        if claim is c3.CLAIM:
            records = ctx.run_cells(
                [
                    Cell(params, ctx.seed_for(params))
                    for arm in ("claim", "control")
                    for m in c3.M_GRIDS[fidelity]
                    for k in range(c3.CHUNKS[arm][fidelity])
                    for params in [{"arm": arm, "m": m, "chunk": k, "n_draws": C3_DRAWS}]
                ],
                c3.inner_gap_cell,
            )
        else:
            records = ctx.run_cells(c4.SscrlFluctuation._cells(ctx), c4.fluctuation_cell)
    with SweepStore(tmp_path / "results.sqlite") as store:
        for record in records:
            store.put(f"{claim.id}@abc", record.cell, record.result, run_id="run", wall_s=0.0)


@pytest.mark.usefixtures("few_draws")
def test_one_run_splits_into_two_independent_halves(tmp_path: Path) -> None:
    """If this fails, C3's or C4's power does not rest on two independent seed sets of one run: each arm's chunks
    (C3 at full: 8 claim chunks, 16 control chunks) must be halved into disjoint cells, each half judged at the
    design's units with half the measured units."""
    (c3_dir := tmp_path / "c3").mkdir()
    _store(c3_dir, c3.CLAIM, _c3_gaps(1.4), Fidelity.FULL)
    halves = power_claims.seed_sets([c3_dir], "C3")
    seeds = [{r.cell.seed for r in records} for _, records in halves]
    assert len(halves) == 2 and not seeds[0] & seeds[1]
    for arm, chunks in (("claim", 8), ("control", 16)):
        originals = [{r.cell.seed for r in records if r.cell.params["arm"] == arm} for _, records in halves]
        assert all(len(found) == chunks // 2 * len(c3.M_GRIDS[Fidelity.FULL]) for found in originals)
    found = power_claims.claim_power([c3_dir], "C3", Fidelity.FULL, seeds=8, resamples=3)
    per_chunk = C3_DRAWS // power_sampling.C3_BATCH
    assert {p.measured_seeds for p in found.parts} == {4 * per_chunk}
    assert {p.seed_set for p in found.parts} == {name for name, _ in halves}
    assert {c.measured_seeds for c in found.controls} == {8 * per_chunk}
    assert {c.seeds for c in found.controls} == {power_sampling.c3_units("control", Fidelity.FULL)}
    assert len(found.parts) == 4 and len(found.controls) == 2

    (c4_dir := tmp_path / "c4").mkdir()
    _store(c4_dir, c4.CLAIM, _c4_sds(0.1), Fidelity.STANDARD)
    halves = power_claims.seed_sets([c4_dir], "C4")
    seeds = [{r.cell.seed for r in records} for _, records in halves]
    assert not seeds[0] & seeds[1]
    found = power_claims.claim_power([c4_dir], "C4", Fidelity.STANDARD, seeds=60, resamples=2)
    assert {p.measured_seeds for p in found.parts} == {30} and {p.seeds for p in found.parts} == {60}
    assert len(found.parts) == 12 and len(found.controls) == 2


def test_the_designs_are_the_claims_plans() -> None:
    """If this fails, C3's or C4's power is computed at another design than the claim runs: C3's units are its
    chunks' draws in batches of 500 (full: 8 x 10,000 / 500 = 160), C4's its blocks per grid point (full 100)."""
    assert power_claims.design_seeds("C3", Fidelity.FULL) == 160
    assert power_claims.design_seeds("C3", Fidelity.STANDARD) == 80
    assert power_claims.design_seeds("C4", Fidelity.FULL) == 100
    assert power_claims.design_seeds("C4", Fidelity.STANDARD) == 60
    for arm in ("claim", "control"):
        for draws in c3.DRAWS_PER_CHUNK[arm].values():
            assert draws % power_sampling.C3_BATCH == 0
