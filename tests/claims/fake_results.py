"""Results of stand-in claims C5 and C6, built by the claims' own ``Claim.result`` (its labels included), for tests
of what is printed beside a verdict; nothing here runs an experiment."""

from crl.claims import Fidelity, Verdict
from crl.claims.base import Claim, ClaimContext, ClaimResult


class FakeC5(Claim):
    """A stand-in with C5's id and part count."""

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


class FakeC6(FakeC5):
    """A stand-in with C6's id and part count."""

    id = "C6"
    parts = 1


def fake_result(
    fidelity: Fidelity, verdict: Verdict, claim: type[Claim] = FakeC5, control: Verdict = Verdict.FAIL
) -> ClaimResult:
    """``claim``'s result at ``fidelity`` with ``verdict`` and ``control``, no statistics."""
    ctx = ClaimContext(claim.id, fidelity, None, 0, "run", level=0.999)  # type: ignore[arg-type]
    return claim().result(ctx, verdict=verdict, statistics=[], control_verdict=control, control_statistics=[])
