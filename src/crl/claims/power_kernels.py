"""The kernel claims' parts and controls for the one power method (:mod:`crl.claims.power`): C7 and C9.

- **C9** (:mod:`crl.claims.c09_temperature`): the units are the replicates (seeds of the optimiser's start) of each
  (arm, output dimension D, 1/tau); the claim's arm (D = 4) and the control's (D = 3) number their own, so a single
  run is split into the halves of each arm's replicates. Each of the six parts reads the (replicates, 1) matrix of
  E_z KL(M||Q) at its 1/tau, judged by the claim's own :func:`crl.claims.c09_temperature.judge`; the truth moves by
  ``shift`` added to every replicate's KL (the mean KL moves by ``shift``). The rule has no margin (flat: PASS when
  the CI's upper end <= eps_flat, FAIL when its lower end > eps_flat; rising the mirror), so each part's failing
  truth is the mirror image of its shrunk effect about eps_flat (:mod:`crl.claims.power`). The flat parts are not
  an identity: the best KL over phi is 0 by construction for 1/tau >= kappa, but the part judges what a *trained*
  phi reaches from random starts (it can FAIL, as the same rule does on the control's D = 3), so they get a
  P(FAIL). What is an identity, [B] eq. 8's ``sup |log dQ/dpi| <= 2/tau`` for unit-norm phi, is no part of the
  rule (a unit test): identity: no P(FAIL). The control (D = 3, the flat rule at every flat 1/tau, combined) is
  judged as measured.
- **C7** (:mod:`crl.claims.c07_ce_gap`): each (phi, tau, k) cell is one independent cell with its own seed, one per
  grid point, so a cell is no unit: the units are fixed **batches of draws inside each cell** (:data:`C7_BATCH`
  draws of a claim cell, :data:`C7_CONTROL_BATCH` of a control cell). The store keeps only each cell's summary, so
  :func:`c7_batch_records` recomputes every cell's per-draw values from its parameters and seed with the claim's
  own code (:func:`crl.claims.c07_ce_gap.cross_entropy_gap_draws`; checked against the stored mean and standard
  error), and writes a table of batch means (``python -m crl.claims.power_kernels SOURCE TABLE``), whose cells are
  numbered by ``batch``: ``crl power TABLE --claim C7`` splits it into the first and second half of every cell's
  batches (disjoint draws of each cell, so independent sets), and a design of S batches is a run of S x
  :data:`C7_BATCH` draws per cell (the plan's own draws at S = :func:`c7_design`). The rule is the claim's own
  (:func:`crl.claims._kernel_series.fit_series` and :func:`crl.claims._kernel_series.rate_verdict`, the rate's
  band [-1.1, -0.9]), read on batch means instead of draws: each point's mean is the cell's mean exactly, its
  standard error the batch means' (``sd / sqrt(S)``), so the rate and its CI agree with the claim's to within a
  few percent (tests/claims/test_power_kernels.py). Each (series, form) rate is a part; its truth moves by the
  factor ``(k / k_1)^shift`` at every k (exact for a power law); its designs are centred at the power law fitted to
  the set's means (a fitted rate, as C10's k rate). The band has two failing sides, so each rate gives two parts
  (as C3's and C4's, :mod:`crl.claims.power_sampling`): its upper edge (bound -0.9, FAIL truth -0.7) and its
  lower edge (bound -1.1, FAIL truth -1.3), each P(decide) at the set's CI end nearest that edge.
  Prop. 1's bound count (the fifth part) checks a theorem that holds for every phi, k and tau: no true gap lies
  beyond it, so there is no failing truth to move to (as C9's eq. 8): identity: no P(FAIL) (its slack is reported
  by the claim). The control (heavy-tailed scores) is the claim's rule on the plain per-draw differences
  (:func:`crl.claims._kernel_series.control_rule`), as measured, at its own batch count.
"""

import math
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from crl._vocab import KernelForm
from crl.claims import _kernel_heavy_tail as heavy
from crl.claims import c07_ce_gap as c7
from crl.claims import c09_temperature as c9
from crl.claims._kernel_series import (
    CONTROL_KS,
    FORM_ORDER,
    MARGIN,
    PLANS,
    SERIES,
    TARGET_RATE,
    control_rule,
    fit_series,
    rate_statistic,
    rate_verdict,
    series_label,
)
from crl.claims._sphere_kernel import DrawSummary, FormGap
from crl.claims._temperature_parts import KernelFit
from crl.claims.budget import part_level
from crl.claims.c09_temperature import FitRow
from crl.claims.context import Fidelity
from crl.claims.power import ControlSpec, EngineEntry, FloatArray, PartSpec, SeedSetSpecs, power_law_curve
from crl.claims.replay import records_of, write_cells
from crl.claims.verdict import Statistic, Verdict, combine_verdicts
from crl.risk import cross_entropy_gap_bounds
from crl.sweep import Cell, CellRecord


def _fit_rows(arm: str, out_dim: int, inv_tau: float, kls: Iterable[float]) -> list[FitRow]:
    """C9's rows of one (arm, D, 1/tau), one per replicate, holding only the KL the rule reads."""
    return [
        FitRow(arm, out_dim, inv_tau, replicate, KernelFit(float(kl), math.nan, math.nan))
        for replicate, kl in enumerate(kls)
    ]


class C9Parts:
    """C9's six parts (four flat, two rising) and its control on one seed set (module docstring)."""

    def __init__(self, records: list[CellRecord], fidelity: Fidelity) -> None:
        self.fidelity = fidelity
        self.level = part_level(c9.CLAIM.parts)
        self.rows = [FitRow.of(record) for record in records]

    def kls(self, arm: str, inv_taus: Sequence[float]) -> FloatArray:
        """(replicates, len(inv_taus)) of E_z KL(M||Q), replicate by replicate (every 1/tau has the same ones).

        Raises:
            ValueError: when a 1/tau of the arm lacks a replicate another has.
        """
        columns = []
        for inv_tau in inv_taus:
            found = {
                row.replicate: row.fit.mean_kl
                for row in self.rows
                if row.arm == arm and row.inv_tau == inv_tau
            }
            columns.append(found)
        replicates = sorted(columns[0])
        if any(sorted(column) != replicates for column in columns):
            raise ValueError(
                f"C9's {arm} arm holds different replicates at different 1/tau; pass a whole run."
            )
        return np.array([[column[r] for column in columns] for r in replicates], dtype=np.float64)

    def part(self, inv_tau: float, *, flat: bool) -> PartSpec:
        """The flat (upper: CI upper <= eps_flat) or rising (lower: CI lower > eps_flat) part at one 1/tau; the
        truth moves every replicate's KL by ``shift`` (the claim's :func:`crl.claims.c09_temperature.judge`)."""
        label = f"D = {c9.CLAIM_DIM}:"

        def judge(design: FloatArray, shift: float) -> tuple[Verdict, Statistic | None]:
            rows = _fit_rows("claim", c9.CLAIM_DIM, inv_tau, design[:, 0] + shift)
            part = c9.judge(rows, inv_tau, flat=flat, level=self.level, label=label)
            return part.verdict, part.statistic

        kind = "flat" if flat else "rising"
        return PartSpec(
            f"C9 KL, 1/tau = {inv_tau:g} ({kind})",
            c9.EPS_FLAT,
            None,
            flat,
            self.kls("claim", [inv_tau]),
            judge,
        )

    def control(self) -> ControlSpec:
        """The control (D = 3): the flat rule at every flat 1/tau, combined, as measured."""
        label = f"control (D = {c9.CONTROL_DIM}):"

        def judge(design: FloatArray) -> Verdict:
            return combine_verdicts(
                *(
                    c9.judge(
                        _fit_rows("control", c9.CONTROL_DIM, inv_tau, design[:, index]),
                        inv_tau,
                        flat=True,
                        level=self.level,
                        label=label,
                    ).verdict
                    for index, inv_tau in enumerate(c9.FLAT_INV_TAUS)
                )
            )

        return ControlSpec(
            f"C9 output dimension D = {c9.CONTROL_DIM} (flat rule)",
            self.level,
            self.kls("control", c9.FLAT_INV_TAUS),
            judge,
        )

    def specs(self, name: str) -> SeedSetSpecs:
        """Every part and the control on this seed set."""
        parts = [
            *(self.part(inv_tau, flat=True) for inv_tau in c9.FLAT_INV_TAUS),
            *(self.part(inv_tau, flat=False) for inv_tau in c9.RISING_INV_TAUS),
        ]
        return SeedSetSpecs(name, parts, [self.control()])


C7_BATCH = 100
"""Draws per batch of a C7 claim cell (the unit of C7's power): 80 batches at quick and standard, 240 at full."""
C7_CONTROL_BATCH = 1000
"""Draws per batch of a C7 control cell: 20, 80 and 160 batches at quick, standard and full."""
_RATE_NAME = "rate of |∫CE dpi - R| vs k"
"""The claim's name of its rate statistics (c07's run)."""


def c7_design(fidelity: Fidelity) -> int:
    """The batches of :data:`C7_BATCH` draws the plan runs per claim cell at ``fidelity``."""
    return PLANS[fidelity].n_draws // C7_BATCH


def _is_control(record: CellRecord) -> bool:
    return record.cell.params.get("arm") == "control"


def c7_batch_records(records: Sequence[CellRecord], *, tolerance: float = 1e-9) -> list[CellRecord]:
    """Every C7 cell of ``records`` recomputed from its parameters and seed by the claim's own code and cut into
    batches of :data:`C7_BATCH` draws (control: :data:`C7_CONTROL_BATCH`), one record per batch: the cell's
    parameters with ``batch`` added, its result each form's batch mean of the judged per-draw values
    (``<form>_mean``) and of the plain differences (``<form>_naive_mean``).

    Raises:
        ValueError: when a recomputed cell's mean or standard error differs from the stored one by more than
            ``tolerance`` (relative), or its draws are not a whole number of batches.
    """
    batched = []
    for record in records:
        control = _is_control(record)
        draws = (c7.control_gap_draws if control else c7.cross_entropy_gap_draws)(record.cell)
        size = C7_CONTROL_BATCH if control else C7_BATCH
        means: dict[str, FloatArray] = {}
        for form, found in draws.items():
            summary, stored = FormGap.of(found), FormGap.from_dict(form, record.result)
            for name, now, then in (
                ("mean", summary.estimate.mean, stored.estimate.mean),
                ("se", summary.estimate.se, stored.estimate.se),
                ("naive mean", summary.naive.mean, stored.naive.mean),
            ):
                if not math.isclose(now, then, rel_tol=tolerance, abs_tol=1e-300):
                    raise ValueError(
                        f"C7 cell {record.cell.key}: the recomputed {form} {name} {now!r} is not the stored "
                        f"{then!r}; the cell cannot be cut into batches of the draws it was measured on."
                    )
            for kind, values in (("", found.estimate), ("_naive", found.naive)):
                flat = values.detach().to(dtype=torch.float64).reshape(-1).numpy()
                if flat.size % size:
                    raise ValueError(
                        f"C7 cell {record.cell.key}: {flat.size} draws are not batches of {size}."
                    )
                means[f"{form}{kind}_mean"] = flat.reshape(-1, size).mean(axis=1)
        for batch in range(len(means["dcl_mean"])):
            cell = Cell({**record.cell.params, "batch": batch}, record.cell.seed)
            result = {name: float(values[batch]) for name, values in means.items()}
            batched.append(
                CellRecord(record.claim, cell, result, record.run_id, record.created, record.wall_s)
            )
    return batched


def write_batch_table(records: Sequence[CellRecord], path: Path) -> int:
    """:func:`c7_batch_records` of ``records`` written as a cell table (the form of
    :func:`crl.claims.replay.export_cells`); returns how many batch records."""
    return write_cells(c7_batch_records(records), path)


class C7Parts:
    """C7's four rate parts and its control on one seed set of batches (module docstring)."""

    def __init__(self, records: list[CellRecord], fidelity: Fidelity) -> None:
        self.fidelity = fidelity
        self.level = part_level(c7.CLAIM.parts)
        self.ks = PLANS[fidelity].ks
        self.cells: dict[tuple[str, float, int], dict[int, dict[str, float]]] = {}
        for record in records:
            p = record.cell.params
            key = (
                ("control", 0.0, int(p["k"]))
                if _is_control(record)
                else (str(p["phi"]), float(p["tau"]), int(p["k"]))
            )
            self.cells.setdefault(key, {})[int(p["batch"])] = {
                name: float(value) for name, value in record.result.items()
            }

    def _matrix(self, keys: Sequence[tuple[str, float, int]], fields: Sequence[str]) -> FloatArray:
        """(batches, len(keys) x len(fields)) of batch means, batch by batch.

        Raises:
            ValueError: when a cell lacks, or cells differ in, their batches.
        """
        missing = [key for key in keys if key not in self.cells]
        if missing:
            raise ValueError(f"C7's batch table lacks the cell {missing[0]}; pass a whole run's batch table.")
        batches = sorted(self.cells[keys[0]])
        if any(sorted(self.cells[key]) != batches for key in keys):
            raise ValueError("C7's cells hold different batches; pass a whole run's batch table.")
        return np.array(
            [[self.cells[key][b][name] for key in keys for name in fields] for b in batches], dtype=np.float64
        )

    def rate(self, kind: str, tau: float, form: KernelForm) -> list[PartSpec]:
        """One (series, form)'s rate of |gap| in k as the two edges of its band [-1.1, -0.9] (as
        :func:`crl.claims.power_sampling.band_edges`): the truth moves every k's batch means by (k / k_1)^shift,
        the designs are centred at the power law fitted to the set's |means| (with their signs)."""
        label = series_label(form, kind, tau)
        values = self._matrix([(kind, tau, k) for k in self.ks], [f"{form}_mean"])
        factors = np.array(self.ks, dtype=np.float64) / self.ks[0]

        def judge(design: FloatArray, shift: float) -> tuple[Verdict, Statistic | None]:
            moved = design * factors[None, :] ** shift
            se = moved.std(axis=0, ddof=1) / math.sqrt(moved.shape[0])
            series = fit_series(
                label, self.ks, moved.mean(axis=0), se, np.random.default_rng(0), level=self.level
            )
            return rate_verdict(series)[0], rate_statistic(_RATE_NAME, series)

        means = values.mean(axis=0)
        model = np.sign(means) * power_law_curve(self.ks, np.abs(means)[None, :])
        name = f"C7 rate in k, {label}"
        return [
            PartSpec(f"{name}, upper edge", TARGET_RATE + MARGIN, MARGIN, True, values, judge, model),
            PartSpec(f"{name}, lower edge", TARGET_RATE - MARGIN, MARGIN, False, values, judge, model),
        ]

    def control(self) -> ControlSpec:
        """The control: the claim's rule on the plain per-draw differences at :data:`CONTROL_KS`, as measured."""
        keys = [("control", 0.0, k) for k in CONTROL_KS]
        values = np.column_stack([self._matrix(keys, [f"{form}_naive_mean"]) for form in FORM_ORDER])
        width = len(CONTROL_KS)

        def judge(design: FloatArray) -> Verdict:
            se = design.std(axis=0, ddof=1) / math.sqrt(design.shape[0])
            mean = design.mean(axis=0)
            measured = {
                form: [
                    DrawSummary(float(mean[i]), float(se[i]), 0.0, 0.0)
                    for i in range(index * width, (index + 1) * width)
                ]
                for index, form in enumerate(FORM_ORDER)
            }
            return control_rule(
                measured,
                lambda k, form: cross_entropy_gap_bounds(k, heavy.TAU, form),
                level=self.level,
                rng=lambda form: np.random.default_rng(0),
            )[2]

        seeds = c7.CONTROL_DRAWS[self.fidelity] // C7_CONTROL_BATCH
        return ControlSpec("C7 heavy-tailed scores (plain differences)", self.level, values, judge, seeds)

    def specs(self, name: str) -> SeedSetSpecs:
        """The four rates' two edges each and the control on this seed set (Prop. 1's bound count: identity, no
        P(FAIL))."""
        parts = [edge for kind, tau in SERIES for form in FORM_ORDER for edge in self.rate(kind, tau, form)]
        return SeedSetSpecs(name, parts, [self.control()])


ENGINES: dict[str, EngineEntry] = {
    "C7": EngineEntry(C7Parts, "batch", c7_design),
    "C9": EngineEntry(C9Parts, "replicate", lambda fidelity: c9.REPLICATES[fidelity]),
}
"""C7's and C9's entries of :data:`crl.claims.power_claims.ENGINES`."""


def main(argv: Sequence[str]) -> int:
    """``python -m crl.claims.power_kernels SOURCE TABLE``: C7's batch table of a run folder or cell table."""
    if len(argv) != 2:
        print("usage: python -m crl.claims.power_kernels SOURCE TABLE  (C7's cells -> its batch table)")
        return 2
    count = write_batch_table(records_of(Path(argv[0]), "C7"), Path(argv[1]))
    print(f"{count} batch records of C7 written to {argv[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
