"""The trained claims' parts and controls for the one power method (:mod:`crl.claims.power`), and the entry the
``crl power`` command calls.

Each part hands the engine the per-seed values its rule reads and a judge that runs the claim's own rule code on
a design of synthetic seeds, the part's truth moved by its registered transform:

- a rate in x (C10's power law and secant; C5's SCRL offset law ``a + b x^r`` scales only its ``b x^r`` part; C5's
  offset-free SSCRL differences D(m); C5's secants in n, whose floor-free gap moves with its star gap held): a
  factor ``(x_j / x_1)^shift`` per grid point, exact for a power law and a secant;
- C5's log ratio log(|G| SSCRL / |G| SCRL): SSCRL's gap times ``exp(shift)`` at every m;
- C10's tau difference: ``shift`` added to the gap at the smallest tau.

Seed sets: two runs (two tables or run folders) are two sets; a single run is split into the halves of its
replicates (a claim's cells that carry no replicate number, one cell per point with its own seed, are dealt
alternately to the halves series by series where its engine names their series). C6's parts live in
:mod:`crl.claims.saturation_gate` (its statistic moves by a constant); the other claims' engines in
:mod:`crl.claims.power_calibration` (C1, C2) and :mod:`crl.claims.power_sampling` (C3, C4), merged into
:data:`ENGINES`.
"""

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crl.claims import c05_trained_gap as c5
from crl.claims import c10_generalisation as c10
from crl.claims import power_calibration, power_kernels, power_sampling, saturation_gate
from crl.claims.budget import part_level
from crl.claims.context import Fidelity
from crl.claims.power import (
    RESAMPLES,
    ControlSpec,
    DesignPower,
    EngineEntry,
    FloatArray,
    PartSpec,
    SeedSetSpecs,
    design_power,
    markdown,
    power_law_curve,
)
from crl.claims.replay import missing_fields_named, records_of
from crl.claims.verdict import Statistic, Verdict, combine_verdicts
from crl.sweep import CellRecord

Key = tuple[str, str, int, int]
"""C5's (arm, regime, n, m)."""


@dataclass(frozen=True)
class _Columns:
    """Which (key, field) columns of a C5 series form a part's per-seed values, and the keys every rebuilt series
    must hold (a key not among the columns is rebuilt as unusable: its ball binds, as measured)."""

    keys: list[Key]
    fields: tuple[str, ...]
    template: dict[Key, list[dict[str, Any]]]

    def matrix(self, data: "c5.Series") -> FloatArray:
        """(seeds, len(keys) x len(fields)) of the measured values."""
        return np.column_stack([data.values(key, field) for key in self.keys for field in self.fields])

    def series(self, design: FloatArray) -> "c5.Series":
        """A :class:`crl.claims.c05_trained_gap.Series` whose seeds are the rows of ``design``."""
        seeds = design.shape[0]
        out = c5.Series([], seeds)
        width = len(self.fields)
        for key in self.template:
            if key not in self.keys:
                out.groups[key] = [{"status": "ok", "active": True}] * seeds
        for index, key in enumerate(self.keys):
            block = design[:, index * width : (index + 1) * width]
            out.groups[key] = [
                {"status": "ok", "active": False, **dict(zip(self.fields, map(float, row), strict=True))}
                for row in block
            ]
        return out


class C5Parts:
    """C5's five parts and two controls on one seed set (:mod:`crl.claims.c05_trained_gap`'s rule functions)."""

    def __init__(self, records: list[CellRecord], fidelity: Fidelity) -> None:
        self.fidelity = fidelity
        self.level = part_level(c5.CLAIM.parts)
        self.data = c5.Series(records, 1 + max(int(r.cell.params["index"]) for r in records))
        self.n = c5.N_FOR_M[fidelity]
        self.grid = c5.M_GRIDS[fidelity]

    def window(self, arm: str, regime: str) -> list[int]:
        """The m where no seed's ball binds and every fit converged (as measured)."""
        return [m for m in self.grid if self.data.usable((arm, regime, self.n, m))]

    def _columns(self, keys: list[Key], fields: tuple[str, ...], arms: Sequence[str]) -> _Columns:
        template = {key: rows for key, rows in self.data.groups.items() if key[0] in arms}
        return _Columns(keys, fields, template)

    def scrl_exponent(self) -> PartSpec:
        """Part 1: r of a + b m^r (SCRL); the truth moves b m^r by (m/m_1)^shift, the offset a (measured) held."""
        window = self.window("claim", "independent")
        columns = self._columns([("claim", "independent", self.n, m) for m in window], ("gap_cv",), ["claim"])
        values = columns.matrix(self.data)
        grid = np.array(window, dtype=np.float64)
        fit = c5.offset_power_fit(grid, np.abs(values.mean(axis=0)))
        offset, factors = fit.a, grid / window[0]
        model = np.sign(values.mean(axis=0)) * fit.predict(grid)

        def judge(design: FloatArray, shift: float) -> tuple[Verdict, Statistic | None]:
            moved = offset + (design - offset) * factors[None, :] ** shift
            name = f"claim: r of |G| = a + b m^r, SCRL, n = {self.n}, window m = {window}"
            verdict, stats, _ = c5.exponent_part(
                columns.series(moved), "claim", "independent", self.n, window, self.level, name
            )
            return verdict, stats[0] if stats else None

        return PartSpec("C5 r in m, SCRL", c5.BOUNDS["independent"], 0.1, True, values, judge, model)

    def sscrl_exponent(self) -> PartSpec:
        """Part 2: the offset-free rate of D(m) = G_cv(m) - G_cv(2m) (SSCRL); the truth moves D by (m/m_1)^shift."""
        window = self.window("claim", "shared")
        x = c5.doublings(window)
        values = c5.differences(self.data, "claim", "shared", self.n, window)
        factors = np.array(x, dtype=np.float64) / x[0]
        name = f"claim: r of D(m) = G(m) - G(2m) (offset-free), SSCRL, n = {self.n}, m = {x}"

        def judge(design: FloatArray, shift: float) -> tuple[Verdict, Statistic | None]:
            verdict, stats, _ = c5.difference_rate_part(
                x, design * factors[None, :] ** shift, self.level, name, c5.BOUNDS["shared"]
            )
            return verdict, stats[0] if stats else None

        model = power_law_curve(x, values)
        return PartSpec(
            "C5 r in m, SSCRL (offset-free)", c5.BOUNDS["shared"], 0.1, True, values, judge, model
        )

    def ratio(self) -> PartSpec:
        """Part 3: the SSCRL/SCRL log ratio at every m <= n/4 of both windows; its weakest m is the statistic."""
        both = [
            m
            for m in self.window("claim", "independent")
            if m in self.window("claim", "shared") and c5.RATIO_SHARE * m <= self.n
        ]
        keys = [("claim", regime, self.n, m) for regime in ("shared", "independent") for m in both]
        columns = self._columns(keys, ("gap_cv",), ["claim"])
        shared = np.array([key[1] == "shared" for key in keys])

        def judge(design: FloatArray, shift: float) -> tuple[Verdict, Statistic | None]:
            moved = np.where(shared[None, :], design * math.exp(shift), design)
            verdict, stats, _ = c5.ratio_part(columns.series(moved), "claim", self.n, both, self.level)
            return verdict, min(stats, key=lambda s: s.ci_low) if stats else None

        return PartSpec(
            "C5 log ratio SSCRL/SCRL (weakest m)", 0.0, None, False, columns.matrix(self.data), judge
        )

    def n_secant(self, which: int) -> PartSpec:
        """Part 4 (which = 0: floor-free gap) or 5 (which = 1: excess risk): the secant slope in n. The truth
        moves G - star_gap and the excess risk by (n/n_1)^shift."""
        grid, m = c5.N_GRIDS[self.fidelity], c5.M_FOR_N[self.fidelity]
        label = c5.N_QUANTITIES[which][0]
        fields = ("gap", "star_gap", "excess_risk", "gap_cv")
        columns = self._columns([("claim", "independent", n, m) for n in grid], fields, ["claim"])
        factors = np.repeat(np.array(grid, dtype=np.float64) / grid[0], len(fields))
        gap, star, excess = (np.arange(len(grid)) * len(fields) + i for i in range(3))

        def judge(design: FloatArray, shift: float) -> tuple[Verdict, Statistic | None]:
            moved = design.copy()
            scale = factors[None, gap] ** shift
            moved[:, gap] = design[:, star] + (design[:, gap] - design[:, star]) * scale
            moved[:, excess] = design[:, excess] * factors[None, excess] ** shift
            verdicts, stats, _ = c5.n_parts(columns.series(moved), grid, m, self.level)
            wanted = [s for s in stats if label in s.name]
            return verdicts[which], wanted[0] if wanted else None

        return PartSpec(
            f"C5 secant slope in n of {label}", c5.N_BOUND, 0.05, True, columns.matrix(self.data), judge
        )

    def heavy_tailed_control(self) -> ControlSpec:
        """The m parts' control (heavy-tailed class): parts 1-3 on its arm, combined."""
        keys = [
            ("control", regime, self.n, m)
            for regime in ("independent", "shared")
            for m in self.window("control", regime)
        ]
        columns = self._columns(keys, ("gap_cv",), ["control"])

        def judge(design: FloatArray) -> Verdict:
            verdicts, _, _ = c5.m_parts(columns.series(design), "control", self.n, self.grid, self.level)
            return combine_verdicts(*verdicts)

        return ControlSpec(
            "C5 heavy-tailed class (parts 1-3)",
            self.level,
            columns.matrix(self.data),
            judge,
            c5.CONTROL_SEEDS[self.fidelity],
        )

    def shared_control(self) -> ControlSpec:
        """The n parts' control (one shared set of 16 negatives): parts 4-5 on its arm, combined."""
        grid = c5.N_GRIDS[self.fidelity]
        keys = [("shared-control", "shared", n, c5.SHARED_CONTROL_M) for n in grid]
        columns = self._columns(keys, ("gap", "star_gap", "excess_risk", "gap_cv"), ["shared-control"])

        def judge(design: FloatArray) -> Verdict:
            verdicts, _, _ = c5.n_parts(
                columns.series(design), grid, c5.SHARED_CONTROL_M, self.level, series=c5.SHARED_CONTROL
            )
            return combine_verdicts(*verdicts)

        return ControlSpec(
            "C5 one shared set of 16 (parts 4-5)", self.level, columns.matrix(self.data), judge
        )

    def specs(self, name: str) -> SeedSetSpecs:
        """Every part and control on this seed set."""
        parts = [
            self.scrl_exponent(),
            self.sscrl_exponent(),
            self.ratio(),
            self.n_secant(0),
            self.n_secant(1),
        ]
        return SeedSetSpecs(name, parts, [self.heavy_tailed_control(), self.shared_control()])


class C10Parts:
    """C10's three parts and its control on one seed set (:mod:`crl.claims.c10_generalisation`'s rule functions)."""

    def __init__(self, records: list[CellRecord], fidelity: Fidelity) -> None:
        self.plan = c10.PLANS[fidelity]
        self.level = part_level(c10.CLAIM.parts)
        training = [r for r in records if "replicate" in r.cell.params]
        self.gaps = c10.collect(training, 1 + max(int(r.cell.params["replicate"]) for r in training), "gap")

    def _matrix(self, keys: list[tuple[str, int, int, float]]) -> FloatArray:
        return np.column_stack([self.gaps[key] for key in keys])

    def k_rate(self) -> PartSpec:
        """Part 1: the rate of the gap in k (power law, misfit protocol), upper bound K_BOUND."""
        plan = self.plan
        keys = [("claim", plan.k_series_n, k, c10.TAU) for k in plan.k_grid]
        x = np.array(plan.k_grid, dtype=np.float64)

        def judge(design: FloatArray, shift: float) -> tuple[Verdict, Statistic | None]:
            moved = design * (x / x[0])[None, :] ** shift
            part = c10.rate_part("rate of the gap in k", plan.k_grid, moved, c10.K_BOUND, self.level)
            return part.verdict, part.statistic

        values = self._matrix(keys)
        model = power_law_curve(plan.k_grid, values)
        return PartSpec("C10 rate of the gap in k", c10.K_BOUND, 0.1, True, values, judge, model)

    def n_secant(self) -> PartSpec:
        """Part 2: the secant slope of the gap in n, upper bound N_BOUND."""
        plan = self.plan
        keys = [("claim", n, plan.n_series_k, c10.TAU) for n in plan.n_grid]
        x = np.array(plan.n_grid, dtype=np.float64)

        def judge(design: FloatArray, shift: float) -> tuple[Verdict, Statistic | None]:
            moved = design * (x / x[0])[None, :] ** shift
            part = c10.secant_part("rate of the gap in n", plan.n_grid, moved, c10.N_BOUND, self.level)
            return part.verdict, part.statistic

        return PartSpec(
            "C10 secant slope of the gap in n", c10.N_BOUND, 0.05, True, self._matrix(keys), judge
        )

    def tau_difference(self) -> PartSpec:
        """Part 3: G(smallest tau) - G(largest tau) above 0; the truth moves the smaller tau's gap by shift."""
        plan = self.plan
        keys = [("claim", plan.tau_n, plan.tau_k, tau) for tau in c10.TAU_PAIR]

        def judge(design: FloatArray, shift: float) -> tuple[Verdict, Statistic | None]:
            part = c10.tau_part(design[:, 0] - design[:, 1] + shift, self.level)
            return part.verdict, part.statistic

        return PartSpec("C10 G(small tau) - G(large tau)", 0.0, None, False, self._matrix(keys), judge)

    def control(self) -> ControlSpec:
        """The control (shared negatives): the secant in n."""
        plan = self.plan
        keys = [("shared", n, plan.n_series_k, c10.TAU) for n in plan.n_grid]
        name = "control (shared negatives): rate of the gap in n"

        def judge(design: FloatArray) -> Verdict:
            return c10.secant_part(name, plan.n_grid, design, c10.N_BOUND, self.level).verdict

        return ControlSpec("C10 shared negatives (secant in n)", self.level, self._matrix(keys), judge)

    def specs(self, name: str) -> SeedSetSpecs:
        """Every part and the control on this seed set."""
        return SeedSetSpecs(name, [self.k_rate(), self.n_secant(), self.tau_difference()], [self.control()])


ENGINES: dict[str, EngineEntry] = {
    "C5": EngineEntry(C5Parts, "index", lambda fidelity: c5.SEEDS[fidelity]),
    "C10": EngineEntry(C10Parts, "replicate", lambda fidelity: c10.PLANS[fidelity].seeds),
    **power_calibration.ENGINES,
    **power_sampling.ENGINES,
    **power_kernels.ENGINES,
}
"""The claims whose parts the one power method reads from their cells (C6: :mod:`crl.claims.saturation_gate`)."""
NO_POWER = {
    "C8": "--claim C8 is a reconstruction check, not a verdict: it has no P(FAIL) and no power calculation.",
}
"""Claims the power method does not apply to, with the reason it says."""


def power_claims() -> tuple[str, ...]:
    """The claims ``crl power`` computes, in registry order."""
    return tuple(sorted([*ENGINES, "C6"], key=lambda claim: int(claim[1:])))


def seed_sets(sources: Sequence[Path], claim: str) -> list[tuple[str, list[CellRecord]]]:
    """Independent seed sets: one per source, or, from a single source, the two halves of each arm's seeds (C5's
    heavy-tailed control numbers its own), renumbered from 0 within each half, as a run of half as many seeds would
    number them.

    Raises:
        ValueError: on no source, or a single source with fewer than 6 seeds.
    """
    if not sources:
        raise ValueError("pass at least one run folder or cell table (two give two independent seed sets).")
    if len(sources) > 1:
        return [(str(source), records_of(source, claim)) for source in sources]
    records = records_of(sources[0], claim)
    entry = ENGINES[claim]
    field, group_of = entry.unit, entry.group
    numbered = [r for r in records if field in r.cell.params]
    if not numbered:
        raise ValueError(f"{sources[0]} holds no cell of {claim} numbered by {field!r}.")
    counts = {
        group: 1 + max(int(r.cell.params[field]) for r in numbered if group_of(r) == group)
        for group in {group_of(r) for r in numbered}
    }
    if min(counts.values()) < 6:
        raise ValueError(
            f"{sources[0]} holds {min(counts.values())} seeds of an arm; halves need at least 6."
        )
    sets = []
    dealt = _dealt(records, entry)
    for half in (0, 1):
        kept = []
        for record in numbered:
            size = counts[group_of(record)] // 2
            index = int(record.cell.params[field]) - half * size
            if 0 <= index < size:
                kept.append(_renumbered(record, field, index))
        sets.append((f"{sources[0]} seed half {half + 1}", kept + dealt[half]))
    return sets


def _dealt(records: list[CellRecord], entry: EngineEntry) -> tuple[list[CellRecord], list[CellRecord]]:
    """The cells without ``entry.unit``, each series' cells dealt alternately to the two halves in the order of
    their parameters (:attr:`crl.claims.power.EngineEntry.series`; none when the entry has no series)."""
    halves: tuple[list[CellRecord], list[CellRecord]] = ([], [])
    if entry.series is None:
        return halves
    series = entry.series
    others = [r for r in records if entry.unit not in r.cell.params]
    others.sort(key=lambda r: (series(r), json.dumps(dict(r.cell.params), sort_keys=True)))
    position: dict[str, int] = {}
    for record in others:
        name = series(record)
        halves[position.get(name, 0) % 2].append(record)
        position[name] = position.get(name, 0) + 1
    return halves


def _renumbered(record: CellRecord, field: str, index: int) -> CellRecord:
    """``record`` with its seed number ``field`` set to ``index``."""
    cell = type(record.cell)({**record.cell.params, field: index}, record.cell.seed)
    return CellRecord(record.claim, cell, record.result, record.run_id, record.created, record.wall_s)


def claim_power(
    sources: Sequence[Path],
    claim: str,
    fidelity: Fidelity,
    *,
    seeds: int,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> DesignPower:
    """Every part's and control's figures for one claim at a design of ``seeds`` seeds, on the seed sets of
    ``sources`` (:func:`seed_sets`)."""
    _check_claim(claim)
    if claim == "C6":
        if len(sources) != 1:
            raise ValueError(
                "C6's power reads one run's cells (its two halves are the seed sets); pass one source."
            )
        with missing_fields_named(str(sources[0]), "C6"):
            curves = saturation_gate.curves_from_records(records_of(sources[0], "C6"), fidelity)
        return saturation_gate.design_power_of(
            curves, tolerance=saturation_gate.c6.TOLERANCE, seeds=seeds, resamples=resamples, seed=seed
        )
    build = ENGINES[claim].build
    sets = []
    for name, found in seed_sets(sources, claim):
        with missing_fields_named(name, claim):
            sets.append(build(found, fidelity).specs(name))
    return design_power(claim, sets, seeds, resamples, seed)


def power_text(
    sources: Sequence[Path], claim: str, fidelity: Fidelity, *, seeds: int, resamples: int, seed: int
) -> str:
    """:func:`claim_power` as Markdown."""
    return markdown(claim_power(sources, claim, fidelity, seeds=seeds, resamples=resamples, seed=seed))


def tolerance_text(source: Path, fidelity: Fidelity) -> str:
    """C6's pilot tolerance choice (:func:`crl.claims.saturation_gate.choose_q`) as Markdown."""
    with missing_fields_named(str(source), "C6"):
        curves = saturation_gate.curves_from_records(records_of(source, "C6"), fidelity)
    return saturation_gate.tolerance_markdown(*saturation_gate.choose_q(curves))


def design_seeds(claim: str, fidelity: Fidelity) -> int:
    """The seeds (independent units) the claim's design runs at ``fidelity`` (its registered plan)."""
    _check_claim(claim)
    if claim == "C6":
        return int(saturation_gate.c6.PLANS[fidelity]["seeds"])
    return ENGINES[claim].design(fidelity)


def _check_claim(claim: str) -> None:
    """Raises ValueError, with the reason, for a claim the power method does not compute."""
    if claim in NO_POWER:
        raise ValueError(NO_POWER[claim])
    if claim not in power_claims():
        raise ValueError(
            f"claim={claim!r} (--claim) has no power calculation; use one of {', '.join(power_claims())}."
        )
