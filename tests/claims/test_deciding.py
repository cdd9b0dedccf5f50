"""crl.claims.deciding: a standard run's undecided verdicts shown beside the committed full verdicts, re-judged
from the committed tables by this checkout's rule."""

from pathlib import Path

from crl.claims import Fidelity, Verdict
from crl.claims.deciding import COMMITTED, REPOSITORY, deciding_rows
from crl.claims.result import ClaimResult
from crl.verify import DECIDING_COLUMNS, deciding_sections
from tests.claims.fake_results import FakeC6, fake_result


def _result(fidelity: Fidelity, verdict: Verdict) -> ClaimResult:
    return fake_result(fidelity, verdict, FakeC6, Verdict.INCONCLUSIVE)


def test_an_undecided_standard_verdict_shows_the_committed_full_one() -> None:
    """If this fails, a standard INCONCLUSIVE of C6 is reported without the verdict its committed full table gives
    (re-judged now: C6's run at seed 0, a PASS by revision 6's band, labelled by its failed gate), its run and the
    command that re-judges it."""
    (row,) = deciding_rows([_result(Fidelity.STANDARD, Verdict.INCONCLUSIVE)])
    assert row.here == "INCONCLUSIVE"
    assert row.at_full.startswith("PASS; this rule was not shown able to FAIL here")
    assert row.run is COMMITTED["C6"] and (REPOSITORY / row.run.table).is_file()
    assert (
        row.run.command()
        == "crl power --claim C6 --rejudge results/c6/full_0.jsonl.gz --fidelity full --run-seed 0"
    )
    (section,) = deciding_sections([_result(Fidelity.STANDARD, Verdict.INCONCLUSIVE)])
    assert section.columns == DECIDING_COLUMNS and len(section.rows) == 1
    assert "crl power --claim C6 --rejudge" in section.paragraphs[1]


def test_decided_verdicts_full_runs_and_missing_tables() -> None:
    """If this fails, a decided verdict or a full run gets the section (it has nothing to add there), or a checkout
    without the table stops the report instead of saying where the table lives."""
    assert deciding_rows([_result(Fidelity.STANDARD, Verdict.FAIL)]) == []
    assert deciding_rows([_result(Fidelity.FULL, Verdict.INCONCLUSIVE)]) == []
    assert deciding_sections([_result(Fidelity.FULL, Verdict.INCONCLUSIVE)]) == ()
    (row,) = deciding_rows([_result(Fidelity.QUICK, Verdict.INCONCLUSIVE)], root=Path("/nonexistent"))
    assert row.at_full.startswith("not shown: results/c6/full_0.jsonl.gz is not in this installation")
