"""Parts whose power gate failed are reported as not shown able to FAIL (crl.claims.gates)."""

import pytest
from scipy import stats as scipy_stats

from crl.claims import Fidelity, Verdict
from crl.claims.base import Claim, ClaimContext, ClaimResult
from crl.claims.gates import SHORTFALLS, shortfalls
from crl.report.summary import verdict_cell


class _Fake(Claim):
    id = "C5"
    title = "t"
    source = "s"
    evidence = "e"
    statement = "st"
    rule = "r"
    control_description = "c"
    parts = 5

    def run(self, ctx: ClaimContext) -> ClaimResult:
        raise NotImplementedError


class _FakeC6(_Fake):
    id = "C6"
    parts = 1


def _result(fidelity: Fidelity, verdict: Verdict, claim: type[Claim] = _Fake) -> ClaimResult:
    ctx = ClaimContext(claim.id, fidelity, None, 0, "run", level=0.999)  # type: ignore[arg-type]
    return claim().result(
        ctx, verdict=verdict, statistics=[], control_verdict=Verdict.FAIL, control_statistics=[]
    )


def test_a_pass_with_a_failed_gate_says_it_was_not_shown_able_to_fail() -> None:
    """If this fails, C5's full PASS is printed as a plain PASS although its SSCRL exponent's gate gave P(FAIL)
    0.025: the report must say "PASS; this rule was not shown able to FAIL here" and name the part."""
    cell = verdict_cell(_result(Fidelity.FULL, Verdict.PASS))
    assert cell.text.startswith("PASS; this rule was not shown able to FAIL here")
    assert "SSCRL exponent in m: P(FAIL) 0.025" in cell.text


def test_c6s_pass_at_full_names_its_failed_gate() -> None:
    """If this fails, C6's PASS at full is printed as a plain PASS although revision 5's gate gave P(FAIL) 0 at
    DD = -0.2 on both halves of its pilot's seeds: at 64 seeds a true DD of -0.2 cannot FAIL."""
    text = verdict_cell(_result(Fidelity.FULL, Verdict.PASS, _FakeC6)).text
    assert text.startswith("PASS; this rule was not shown able to FAIL here")
    assert "DD: P(FAIL) 0.000 [0.000, 0.018] at -0.2" in text
    assert _result(Fidelity.FULL, Verdict.INCONCLUSIVE, _FakeC6).unshown_fail == ()


def test_other_verdicts_and_fidelities_without_a_record_are_untouched() -> None:
    """If this fails, the label leaks onto a FAIL or INCONCLUSIVE, or onto a fidelity with no failed gate."""
    assert _result(Fidelity.FULL, Verdict.INCONCLUSIVE).unshown_fail == ()
    assert _result(Fidelity.QUICK, Verdict.PASS).unshown_fail == ()
    assert verdict_cell(_result(Fidelity.QUICK, Verdict.PASS)).text == "PASS"
    assert shortfalls("C3", Fidelity.FULL) == ()


@pytest.mark.parametrize("key", sorted(SHORTFALLS, key=str))
def test_recorded_p_fail_intervals_are_clopper_pearson_of_200_resamples(key: tuple[str, Fidelity]) -> None:
    """If this fails, a recorded P(FAIL) is not below the gate's 0.8, or its interval is not the exact 95%
    binomial interval of that share of 200 resamples."""
    for gap in SHORTFALLS[key]:
        value, interval = gap.p_fail.split(" at ")[0].split(" ", 1)
        share = float(value)
        assert share < 0.8
        low, high = (float(x) for x in interval.strip("[]").split(", "))
        exact = scipy_stats.binomtest(round(share * 200), 200).proportion_ci(method="exact")
        assert (low, high) == pytest.approx((exact.low, exact.high), abs=6e-4)
