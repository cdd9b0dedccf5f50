"""The judged parts whose power gate failed, per claim and fidelity (docs/theory.md section 7, "Every judged part
shows how it fails"; docs/verdicts.md).

A part whose power calculation gave P(FAIL) < 0.8 with the truth at bound + 2 delta was not shown able to FAIL:
a PASS of its claim at that fidelity is reported as "PASS; this rule was not shown able to FAIL here", naming
the parts and their P(FAIL) with its Clopper-Pearson 95% interval over the 200 resamples, until a re-registered
design passes the gate and is confirmed. The figures are those of the power calculations committed in
docs/verdicts.md (C5 and C10 at full: the exploratory runs of the full-fidelity revisions; at standard: the
contract-v2 calculation at the registered seeds; C6: revision 5's gate, :mod:`crl.claims.saturation_gate`, on the
cells of its pilot at seed offset 6121 read on each fidelity's grid, docs/claims/C6.md). A claim or fidelity
absent here has no failed gate on record.
"""

from dataclasses import dataclass

from crl.claims.context import Fidelity


@dataclass(frozen=True)
class GateShortfall:
    """One part's failed gate: its name and its P(FAIL) at bound + 2 delta with the 95% interval."""

    part: str
    p_fail: str

    def describe(self) -> str:
        """``"<part>: P(FAIL) <p_fail>"``."""
        return f"{self.part}: P(FAIL) {self.p_fail}"


_C6_GATE = (GateShortfall("DD", "0.000 [0.000, 0.018] at -0.2, on both seed halves"),)
"""C6 revision 5's gate at full and, on the same pilot cells at n <= 256, at standard: the same figures."""

SHORTFALLS: dict[tuple[str, Fidelity], tuple[GateShortfall, ...]] = {
    ("C5", Fidelity.FULL): (
        GateShortfall("SSCRL exponent in m", "0.025 [0.008, 0.057] at r = -0.2"),
        GateShortfall("secant in n of the excess risk", "0.795 [0.732, 0.849] at -0.35"),
    ),
    ("C5", Fidelity.STANDARD): (
        GateShortfall("SCRL exponent in m", "0.055 [0.028, 0.096] at r = -0.7"),
        GateShortfall("SSCRL exponent in m", "0.520 [0.448, 0.591] at r = -0.2"),
        GateShortfall("log ratio SSCRL/SCRL", "0.075 [0.043, 0.121] at -0.247"),
        GateShortfall("secant in n of the floor-free gap", "0.020 [0.005, 0.050] at -0.35"),
        GateShortfall("secant in n of the excess risk", "0.025 [0.008, 0.057] at -0.35"),
    ),
    ("C6", Fidelity.FULL): _C6_GATE,
    ("C6", Fidelity.STANDARD): _C6_GATE,
    ("C10", Fidelity.FULL): (GateShortfall("secant in n", "0.660 [0.590, 0.725] at -0.35"),),
    ("C10", Fidelity.STANDARD): (
        GateShortfall("secant in n", "0.220 [0.165, 0.284] at -0.35"),
        GateShortfall("G(tau 0.25) - G(tau 1)", "0.310 [0.247, 0.379] at -0.00287"),
    ),
}
"""(claim, fidelity) -> the parts whose gate failed (docs/verdicts.md)."""


def shortfalls(claim_id: str, fidelity: Fidelity) -> tuple[GateShortfall, ...]:
    """The parts of ``claim_id`` whose power gate failed at ``fidelity`` (empty when none is on record)."""
    return SHORTFALLS.get((claim_id, fidelity), ())
