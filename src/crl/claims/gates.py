"""The judged parts whose power gate failed, per claim and fidelity (docs/theory.md section 7, "Every judged part
shows how it fails"; docs/verdicts.md, contract v4).

A part whose power calculation gave P(FAIL) < 0.8 with the truth at bound + 2 delta, on any seed set, was not shown
able to FAIL: a PASS of its claim at that fidelity is reported as "PASS; this rule was not shown able to FAIL here",
naming the parts and their P(FAIL) with its Clopper-Pearson 95% interval, until a design passes the gate and is
confirmed. The figures are those of the one power method (:mod:`crl.claims.power`, `crl power`) at each fidelity's
design (and at earlier designs whose tables are committed), in docs/power_v4/ and docs/verdicts.md: C5 and C10 at
full from their two seed sets (C5's runs at 2671 and 3931, C10's pilot at 1789), at standard from the standard
pilots at 4127 and 4129 (results/c5, results/c10); C6 from its pilot at 6121 read on each fidelity's grid; C1 and
C2 (violation counts; their units are 100 batches of each cell's draws, :mod:`crl.claims.power_calibration`) and
C3 and C4 (C3's units are batches of 500 draws, C4's blocks: :mod:`crl.claims.power_sampling`) at full from the
halves of their confirmation tables at 5923 (results/c1 ... results/c4), at standard from the halves of the
standard store (seed 0); C7 (its units are batches of 100 draws inside each cell, :mod:`crl.claims.power_kernels`)
and C9 (replicates) likewise. A claim or fidelity absent here has no failed gate on record.
"""

from dataclasses import dataclass

from crl.claims.context import Fidelity


@dataclass(frozen=True)
class GateShortfall:
    """One part's failed gate: its name, its P(FAIL) at bound + 2 delta with the 95% interval (the weakest seed
    set's, the other set's beside it), and the number of designs the share counts."""

    part: str
    p_fail: str
    designs: int = 400

    def describe(self) -> str:
        """``"<part>: P(FAIL) <p_fail>"``."""
        return f"{self.part}: P(FAIL) {self.p_fail}"


GATES: dict[tuple[str, Fidelity], dict[int, tuple[GateShortfall, ...]]] = {
    ("C1", Fidelity.FULL): {100: ()},
    ("C1", Fidelity.STANDARD): {100: ()},
    ("C2", Fidelity.FULL): {
        100: (
            GateShortfall(
                "E* - E <= sqrt((2/tau)(L - L*)) at its worst point (a score at s*)",
                "0.603 [0.553, 0.651] at 2 delta = 0.00412 (confirmation 5923, cells of seed half 1; 0.675 on "
                "half 2)",
            ),
        ),
    },
    ("C2", Fidelity.STANDARD): {
        100: (
            GateShortfall(
                "E* - E <= sqrt((2/tau)(L - L*)) at its worst point (a score at s*)",
                "0.785 [0.741, 0.824] at 2 delta = 2.3e-06 (standard store, seed 0, half 2; 0.995 on half 1)",
            ),
        ),
    },
    ("C5", Fidelity.FULL): {
        64: (
            GateShortfall(
                "SSCRL exponent in m (offset-free)", "0.637 [0.588, 0.685] at r = -0.2 (run 2671's seeds)"
            ),
        ),
        96: (),
    },
    ("C5", Fidelity.STANDARD): {
        12: (
            GateShortfall(
                "SCRL exponent in m", "0.000 [0.000, 0.009] at r = -0.7 (pilot 4129; 0.003 on 4127)"
            ),
            GateShortfall(
                "SSCRL exponent in m (offset-free)",
                "0.018 [0.007, 0.036] at r = -0.2 (pilot 4129; 0.055 on 4127)",
            ),
            GateShortfall(
                "log ratio SSCRL/SCRL", "0.000 [0.000, 0.009] at -0.029 (pilot 4127; 0.087 on 4129)"
            ),
            GateShortfall(
                "secant in n of the floor-free gap",
                "0.007 [0.002, 0.022] at -0.35 (pilot 4127; 0.020 on 4129)",
            ),
            GateShortfall(
                "secant in n of the excess risk", "0.007 [0.002, 0.022] at -0.35 (pilot 4127; 0.013 on 4129)"
            ),
        ),
    },
    ("C6", Fidelity.FULL): {
        64: (
            GateShortfall(
                "DD", "0.077 [0.053, 0.108] at -0.2 (replicates 0-31; 0.147 [0.114, 0.186] on 32-63)"
            ),
        ),
    },
    ("C6", Fidelity.STANDARD): {
        32: (
            GateShortfall(
                "DD", "0.000 [0.000, 0.009] at -0.2 (replicates 0-31; 0.007 [0.002, 0.022] on 32-63)"
            ),
        ),
    },
    ("C3", Fidelity.FULL): {160: ()},
    ("C3", Fidelity.STANDARD): {80: ()},
    ("C4", Fidelity.FULL): {100: ()},
    ("C4", Fidelity.STANDARD): {60: ()},
    ("C7", Fidelity.FULL): {240: ()},
    ("C7", Fidelity.STANDARD): {80: ()},
    ("C9", Fidelity.FULL): {30: ()},
    ("C9", Fidelity.STANDARD): {12: ()},
    ("C10", Fidelity.FULL): {
        64: (
            GateShortfall(
                "secant in n", "0.627 [0.578, 0.675] at -0.35 (replicates 32-63 of the pilot at 1789)"
            ),
        ),
        160: (),
    },
    ("C10", Fidelity.STANDARD): {
        24: (
            GateShortfall("rate in k", "0.760 [0.715, 0.801] at 0.3 (pilot 4129; 0.902 on 4127)"),
            GateShortfall("secant in n", "0.000 [0.000, 0.009] at -0.35 (pilot 4129; 0.018 on 4127)"),
            GateShortfall(
                "G(tau 0.25) - G(tau 1)", "0.470 [0.420, 0.520] at -0.0032 (pilot 4127; 0.640 on 4129)"
            ),
        ),
    },
}
"""(claim, fidelity) -> seeds of a design -> the parts whose gate failed at that design (docs/verdicts.md); an
empty tuple: every gate passed."""
DESIGNS: dict[tuple[str, Fidelity], int] = {
    ("C1", Fidelity.FULL): 100,
    ("C1", Fidelity.STANDARD): 100,
    ("C2", Fidelity.FULL): 100,
    ("C2", Fidelity.STANDARD): 100,
    ("C5", Fidelity.FULL): 96,
    ("C5", Fidelity.STANDARD): 12,
    ("C6", Fidelity.FULL): 64,
    ("C6", Fidelity.STANDARD): 32,
    ("C3", Fidelity.FULL): 160,
    ("C3", Fidelity.STANDARD): 80,
    ("C4", Fidelity.FULL): 100,
    ("C4", Fidelity.STANDARD): 60,
    ("C7", Fidelity.FULL): 240,
    ("C7", Fidelity.STANDARD): 80,
    ("C9", Fidelity.FULL): 30,
    ("C9", Fidelity.STANDARD): 12,
    ("C10", Fidelity.FULL): 160,
    ("C10", Fidelity.STANDARD): 24,
}
"""The registered designs' seeds (the claims' plans; a test ties them)."""


def shortfalls(claim_id: str, fidelity: Fidelity, seeds: int | None = None) -> tuple[GateShortfall, ...]:
    """The parts of ``claim_id`` whose power gate failed at ``fidelity`` for a run of ``seeds`` seeds (None: the
    registered design's); empty when every gate passed there or the claim has no gate on record at ``fidelity``.
    A run of a seed count whose gate was never computed, where others were, is labelled so: nothing showed that
    its PASS could FAIL."""
    recorded = GATES.get((claim_id, fidelity), {})
    size = DESIGNS.get((claim_id, fidelity)) if seeds is None else seeds
    if recorded and size not in recorded:
        return (
            GateShortfall(
                "every part", f"not computed at {size} seeds (gates on record: {sorted(recorded)})"
            ),
        )
    return recorded.get(size or 0, ())
