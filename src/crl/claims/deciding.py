"""The committed full-fidelity verdicts a standard run shows beside the verdicts it cannot decide.

`make verify` runs the standard fidelity (20 minutes on 2 cores); C5, C6 and C10 decide only at full (docs/verdicts.md,
"Full timed as one run": standard cannot reach their power gates). So that a user sees the answer without running
two hours, a standard (or quick) report adds, for each of those claims whose verdict there is INCONCLUSIVE or a PASS
not shown able to FAIL, the claim re-judged by this checkout's rule from its committed full table
(:func:`crl.claims.replay.rejudge`, computing no cell), with the run that wrote the table, what that run was
(confirmatory or exploratory under the rule now in force), the power gate at full (:mod:`crl.claims.gates`) and
the command that re-judges it.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from crl.claims.context import Fidelity
from crl.claims.gates import shortfalls
from crl.claims.replay import read_cells, rejudge, table_seeds
from crl.claims.result import ClaimResult
from crl.claims.verdict import Verdict

REPOSITORY = Path(__file__).resolve().parents[3]
"""The checkout's root, where results/ holds the committed tables (absent from an installed wheel)."""


@dataclass(frozen=True)
class CommittedRun:
    """A claim's committed full table: its path under the repository, the run's `crl verify --seed` and id, and
    what the run is under the rule now in force."""

    claim: str
    table: str
    run_seed: int
    run_id: str
    status: str

    def command(self) -> str:
        """The command that re-judges the table."""
        return f"crl power --claim {self.claim} --rejudge {self.table} --fidelity full --run-seed {self.run_seed}"


COMMITTED: dict[str, CommittedRun] = {
    "C5": CommittedRun(
        "C5",
        "results/c5/confirm_5923_full.jsonl.gz",
        5923,
        "20261207T014014Z-4bdb4c",
        "confirmatory under contract v4 (96 seeds, frozen commit 1954c74)",
    ),
    "C6": CommittedRun(
        "C6",
        "results/c6/full_0.jsonl.gz",
        0,
        "20261206T193625Z-1b3c92",
        "exploratory (seed 0); C6 is not confirmable at full within its design (docs/claims/C6.md)",
    ),
    "C10": CommittedRun(
        "C10",
        "results/c10/confirm_5923_full.jsonl.gz",
        5923,
        "20261207T014014Z-4bdb4c",
        "confirmatory under contract v4 (160 seeds, frozen commit 1954c74)",
    ),
}
"""Claim -> its committed full table (docs/verdicts.md, contract v4)."""


@dataclass(frozen=True)
class DecidingRow:
    """One claim's row: the verdict of this run, the full verdict re-judged from the table (or why not), and
    where it comes from."""

    claim: str
    here: str
    at_full: str
    run: CommittedRun
    gate: str


def undecided(result: ClaimResult) -> bool:
    """INCONCLUSIVE, or a PASS not shown able to FAIL: what a fuller fidelity may decide."""
    return result.verdict is Verdict.INCONCLUSIVE or bool(result.unshown_fail)


def deciding_rows(results: Sequence[ClaimResult], root: Path = REPOSITORY) -> list[DecidingRow]:
    """The rows for every undecided result of a fidelity below full whose claim has a committed full table."""
    rows = []
    for result in results:
        run = COMMITTED.get(result.claim_id)
        if run is None or result.fidelity is Fidelity.FULL or not undecided(result):
            continue
        path = root / run.table
        if path.is_file():
            seeds = table_seeds(read_cells(path, run.claim), run.claim)
            found = rejudge(path, run.claim, Fidelity.FULL, run.run_seed)
            at_full = f"{found.verdict_text} (control {found.control.verdict})"
        else:
            seeds = None
            at_full = f"not shown: {run.table} is not in this installation (it ships with the repository)"
        gaps = shortfalls(run.claim, Fidelity.FULL, seeds)
        size = "the design's" if seeds is None else f"the table's {seeds}"
        gate = "; ".join(g.describe() for g in gaps) if gaps else f"every part's gate passes at {size} seeds"
        rows.append(DecidingRow(result.claim_id, result.verdict_text, at_full, run, gate))
    return rows
