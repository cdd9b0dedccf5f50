"""docs/theory.md section 7 is the record of each claim's rule: the text a shipped claim prints must be there."""

import re
from pathlib import Path

import pytest

from crl.claims import Claim, bonferroni_level, default_registry
from crl.claims.result import level_sentence

THEORY = Path(__file__).resolve().parents[2] / "docs" / "theory.md"
CLAIMS = default_registry().claims


def _words(text: str) -> str:
    """``text`` with every run of whitespace made one space (the docs wrap lines; the code does not)."""
    return " ".join(text.split())


def _subsection(claim_id: str) -> str:
    """The body of ``### <claim_id> ...`` in section 7 of docs/theory.md, up to the next heading."""
    text = THEORY.read_text(encoding="utf-8")
    section = text[text.index("## 7. Pre-registered claims") :]
    match = re.search(rf"^### {claim_id} .*?$(.*?)(?=^#{{2,3}} |\Z)", section, flags=re.M | re.S)
    assert match is not None, f"docs/theory.md section 7 has no '### {claim_id} ...' subsection"
    return match.group(1)


def _printed_rule_block(claim_id: str) -> str:
    """The fenced ``text`` block after "Rule as printed:" in the claim's subsection."""
    match = re.search(r"Rule as printed:\s*```text\n(.*?)```", _subsection(claim_id), flags=re.S)
    assert match is not None, f"docs/theory.md, {claim_id}: no 'Rule as printed:' block"
    return match.group(1)


def test_every_claim_c1_to_c10_has_a_subsection() -> None:
    """If this fails, a pre-registered claim lost its subsection (citations 'section 7, Cn' would lead nowhere)."""
    for number in range(1, 11):
        assert _subsection(f"C{number}").strip()


@pytest.mark.parametrize("claim", CLAIMS, ids=[claim.id for claim in CLAIMS])
def test_printed_rule_equals_the_documented_one(claim: Claim) -> None:
    """If this fails, a claim prints a rule that docs/theory.md does not record: change both together."""
    assert _words(claim.rule) == _words(_printed_rule_block(claim.id))


def test_level_sentence_of_a_full_run_is_documented() -> None:
    """If this fails, the level sentence every printed rule ends with differs from the one docs/theory.md shows."""
    sentence = level_sentence(bonferroni_level(len(CLAIMS)))
    assert _words(sentence) in _words(THEORY.read_text(encoding="utf-8"))
