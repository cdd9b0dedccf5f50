"""The error budget of a verify run, fixed before any data (docs/theory.md section 7, "Verdict statistics").

The family is the ten claims C1-C10, whatever a run selects or ships: the family-wise error rate
alpha = 0.05 is split equally over the ten claims (alpha / 10 each) and, inside a claim, equally over the
parts its rule lists (each interval, each violation count). A part is judged at level
``1 - alpha / (10 * parts)``, and the claim's negative control at the same per-part level. Because both
numbers are fixed in docs/claims before a claim's first run, no level depends on ``--claims`` or on which
claims ship.
"""

from crl._validate import check_count

FAMILY_ALPHA = 0.05
"""alpha: the probability that a run in which every claim is true fails some claim."""

FAMILY: tuple[str, ...] = tuple(f"C{number}" for number in range(1, 11))
"""The claims that share alpha: C1-C10 of docs/theory.md section 7."""


def claim_alpha() -> float:
    """alpha / 10: the error rate of one claim's verdict (all its parts together)."""
    return FAMILY_ALPHA / len(FAMILY)


def part_level(parts: int) -> float:
    """The confidence level of each of a claim's ``parts`` intervals or counts: ``1 - alpha / (10 parts)``.

    Raises:
        ValueError: if ``parts`` is not an integer >= 1.
    """
    return 1.0 - claim_alpha() / check_count("parts", parts, 1)
