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
- **C7**: see :class:`C7Parts`.
"""

import math
from collections.abc import Iterable, Sequence

import numpy as np

from crl.claims import c09_temperature as c9
from crl.claims._temperature_parts import KernelFit
from crl.claims.budget import part_level
from crl.claims.c09_temperature import FitRow
from crl.claims.context import Fidelity
from crl.claims.power import ControlSpec, EngineEntry, FloatArray, PartSpec, SeedSetSpecs
from crl.claims.verdict import Statistic, Verdict, combine_verdicts
from crl.sweep import CellRecord

C9_IDENTITY_NOTE = (
    "C9: [B] eq. 8 (sup |log dQ/dpi| <= 2/tau for unit-norm phi) is an identity, a unit test and no part of the "
    "rule: identity: no P(FAIL)."
)
"""The line C9's power table carries for its identity."""


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


ENGINES: dict[str, EngineEntry] = {
    "C9": EngineEntry(C9Parts, "replicate", lambda fidelity: c9.REPLICATES[fidelity]),
}
"""C7's and C9's entries of :data:`crl.claims.power_claims.ENGINES`."""
