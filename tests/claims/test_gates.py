"""Parts whose power gate failed are reported as not shown able to FAIL (crl.claims.gates)."""

import pytest
from scipy import stats as scipy_stats

from crl.claims import Fidelity, Verdict
from crl.claims.gates import DESIGNS, GATES, shortfalls
from crl.claims.power_claims import design_seeds
from crl.report.summary import verdict_cell
from tests.claims.fake_results import FakeC6, fake_result


def test_a_pass_with_a_failed_gate_says_it_was_not_shown_able_to_fail() -> None:
    """If this fails, a C5 PASS at standard is printed as a plain PASS although its gates failed (the offset-free
    SSCRL exponent's P(FAIL) 0.018 at 12 seeds): the report must say "PASS; this rule was not shown able to FAIL
    here" and name the part; at full's design of 96 seeds every gate passes, and the PASS is plain."""
    cell = verdict_cell(fake_result(Fidelity.STANDARD, Verdict.PASS))
    assert cell.text.startswith("PASS; this rule was not shown able to FAIL here")
    assert "SSCRL exponent in m (offset-free): P(FAIL) 0.018" in cell.text
    assert verdict_cell(fake_result(Fidelity.FULL, Verdict.PASS)).text == "PASS"


def test_a_table_of_an_earlier_design_carries_that_designs_gate() -> None:
    """If this fails, a committed C5 table of 64 seeds re-judged today prints a plain PASS although the one power
    method failed the offset-free SSCRL exponent's gate at 64 seeds (P(FAIL) 0.637): the label follows the
    run's seeds, not only its fidelity."""
    assert shortfalls("C5", Fidelity.FULL) == ()
    (gap,) = shortfalls("C5", Fidelity.FULL, 64)
    assert gap.describe().startswith("SSCRL exponent in m (offset-free): P(FAIL) 0.637")
    assert shortfalls("C5", Fidelity.FULL, 50)[0].part == "every part"


def test_c6s_pass_at_full_names_its_failed_gate() -> None:
    """If this fails, C6's PASS at full is printed as a plain PASS although the one power method gave P(FAIL) 0.077
    at DD = -0.2 on replicates 0-31 of its pilot at the design's 64 seeds: a true DD of -0.2 would rarely FAIL."""
    text = verdict_cell(fake_result(Fidelity.FULL, Verdict.PASS, FakeC6)).text
    assert text.startswith("PASS; this rule was not shown able to FAIL here")
    assert "DD: P(FAIL) 0.077 [0.053, 0.108] at -0.2" in text
    assert fake_result(Fidelity.FULL, Verdict.INCONCLUSIVE, FakeC6).unshown_fail == ()


def test_other_verdicts_and_fidelities_without_a_record_are_untouched() -> None:
    """If this fails, the label leaks onto a FAIL or INCONCLUSIVE, or onto a fidelity with no failed gate."""
    assert fake_result(Fidelity.STANDARD, Verdict.INCONCLUSIVE).unshown_fail == ()
    assert fake_result(Fidelity.QUICK, Verdict.PASS).unshown_fail == ()
    assert verdict_cell(fake_result(Fidelity.QUICK, Verdict.PASS)).text == "PASS"
    assert shortfalls("C3", Fidelity.FULL) == ()


@pytest.mark.parametrize("key", sorted(DESIGNS, key=str))
def test_the_recorded_designs_are_the_claims_plans(key: tuple[str, Fidelity]) -> None:
    """If this fails, the label is read at a design the claim no longer runs: gates' design seeds must be the
    claims' registered seeds, and each design must have a gate on record."""
    claim, fidelity = key
    assert DESIGNS[key] == design_seeds(claim, fidelity)
    assert DESIGNS[key] in GATES[key]


@pytest.mark.parametrize("key", sorted(GATES, key=str))
def test_recorded_p_fail_intervals_are_clopper_pearson(key: tuple[str, Fidelity]) -> None:
    """If this fails, a recorded P(FAIL) is not below the gate's 0.8, or its interval is not the exact 95%
    binomial interval of that share of its designs (400 by the one power method; 200 for the earlier method)."""
    for gaps in GATES[key].values():
        for gap in gaps:
            if gap.part == "every part":
                continue
            value, interval = gap.p_fail.split(" at ")[0].split(" ", 1)
            share = float(value)
            assert share < 0.8
            low, high = (float(x) for x in interval.strip("[]").split(", "))
            exact = scipy_stats.binomtest(round(share * gap.designs), gap.designs).proportion_ci(
                method="exact"
            )
            assert (low, high) == pytest.approx((exact.low, exact.high), abs=6e-4)


def test_a_seed_count_without_a_computed_gate_is_labelled() -> None:
    """If this fails, a C10 table of 96 seeds (whose gate was never recorded, while 64 and 160 were) re-judged as a
    PASS prints without a label, though nothing showed that it could FAIL."""
    (gap,) = shortfalls("C10", Fidelity.FULL, 96)
    assert gap.describe() == "every part: P(FAIL) not computed at 96 seeds (gates on record: [64, 160])"
    assert shortfalls("C8", Fidelity.FULL, 96) == ()
