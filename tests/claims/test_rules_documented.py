"""docs/claims/<id>.md is the record of each claim's rule: the text a shipped claim prints must be there."""

import re
from pathlib import Path

import pytest

from crl.claims import Claim, default_registry
from crl.claims.budget import FAMILY, part_level
from crl.claims.result import level_sentence

DOCS = Path(__file__).resolve().parents[2] / "docs"
CLAIMS = default_registry().claims


def _words(text: str) -> str:
    """``text`` with every run of whitespace made one space (the docs wrap lines; the code does not)."""
    return " ".join(text.split())


def _claim_file(claim_id: str) -> str:
    """The text of docs/claims/<claim_id>.md, the claim's pre-registration."""
    path = DOCS / "claims" / f"{claim_id}.md"
    assert path.is_file(), f"{claim_id} has no pre-registration file docs/claims/{claim_id}.md"
    return path.read_text(encoding="utf-8")


def _printed_rule_block(claim_id: str) -> str:
    """The fenced ``text`` block under the heading "## Rule as printed" of the claim's file."""
    match = re.search(r"^## Rule as printed\s*```text\n(.*?)```", _claim_file(claim_id), flags=re.M | re.S)
    assert match is not None, f"docs/claims/{claim_id}.md: no '## Rule as printed' block"
    return match.group(1)


@pytest.mark.parametrize("claim_id", FAMILY)
def test_every_claim_of_the_family_has_a_file_linked_from_section_7(claim_id: str) -> None:
    """If this fails, a pre-registered claim lost its file or its link in docs/theory.md section 7."""
    assert _claim_file(claim_id).startswith(f"# {claim_id} ")
    theory = (DOCS / "theory.md").read_text(encoding="utf-8")
    assert f"(claims/{claim_id}.md)" in theory[theory.index("## 7. Pre-registered claims") :]


@pytest.mark.parametrize("claim", CLAIMS, ids=[claim.id for claim in CLAIMS])
def test_printed_rule_equals_the_documented_one(claim: Claim) -> None:
    """If this fails, a claim prints a rule that its docs/claims file does not record: change both together."""
    assert _words(claim.rule) == _words(_printed_rule_block(claim.id))


def test_the_level_sentence_is_the_one_section_7_states() -> None:
    """If this fails, the level sentence every printed rule ends with differs from the one docs/theory.md
    section 7 shows (there for a claim of 3 parts)."""
    theory = (DOCS / "theory.md").read_text(encoding="utf-8")
    assert _words(level_sentence(3, part_level(3))) in _words(theory)
