"""The fixed error budget: alpha = 0.05 over C1-C10, split equally over a claim's parts.

If these fail, a claim's level would depend on how many claims a run selects or ships (a level fitted to the
run), or the parts of a claim would together spend more than its share alpha / 10.
"""

import pytest

from crl.claims.budget import FAMILY, FAMILY_ALPHA, claim_alpha, part_level


def test_the_family_is_c1_to_c10() -> None:
    assert tuple(f"C{i}" for i in range(1, 11)) == FAMILY


@pytest.mark.parametrize("parts", [1, 2, 3, 7])
def test_parts_spend_exactly_the_claims_share(parts: int) -> None:
    assert parts * (1.0 - part_level(parts)) == pytest.approx(FAMILY_ALPHA / 10, rel=1e-12)
    assert claim_alpha() == pytest.approx(0.005, rel=1e-12)


def test_zero_parts_is_refused() -> None:
    with pytest.raises(ValueError, match="parts=0"):
        part_level(0)
