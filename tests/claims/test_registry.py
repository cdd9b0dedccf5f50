"""Tests of claim discovery and selection, on a temporary package of toy claim modules."""

import textwrap
from pathlib import Path
from typing import ClassVar

import pytest

from crl.claims import (
    Claim,
    ClaimContext,
    ClaimResult,
    Registry,
    UnknownClaimError,
    default_registry,
    discover_claims,
    validate_claim,
)

_MODULE = """
from crl.claims import Claim


class Toy(Claim):
    id = "{claim_id}"
    title = "toy {claim_id}"
    source = "test"
    evidence = "the engine's discovery"
    statement = "s"
    rule = "r"
    parts = 1
    control_description = "c"

    def run(self, ctx):
        raise NotImplementedError


CLAIM = Toy()
"""


def _package(root: Path, name: str, modules: dict[str, str]) -> str:
    """Write package ``name`` with the given modules under ``root``; return its name."""
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    for module, source in modules.items():
        (package / f"{module}.py").write_text(textwrap.dedent(source))
    return name


def test_discovery_finds_cnn_modules_sorts_by_number_and_reports_broken_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails, a claim module is missed, C10 sorts before C2, or an import error hides silently."""
    monkeypatch.syspath_prepend(str(tmp_path))
    name = _package(
        tmp_path,
        "toy_claims_discovery",
        {
            "c10_last": _MODULE.format(claim_id="C10"),
            "c02_first": _MODULE.format(claim_id="C2"),
            "c03_broken": "raise ImportError('missing dependency xyz')",
            "c04_no_claim": "VALUE = 1",
            "helpers": _MODULE.format(claim_id="C99"),
        },
    )
    registry = discover_claims(name)
    assert registry.ids() == ["C2", "C10"]
    assert set(registry.broken) == {f"{name}.c03_broken", f"{name}.c04_no_claim"}
    assert "missing dependency xyz" in registry.broken[f"{name}.c03_broken"]
    assert "defines no CLAIM" in registry.broken[f"{name}.c04_no_claim"]


def test_selection_is_case_insensitive_and_unknown_ids_list_the_valid_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails, --claims c2 would not find C2, or a typo would not say which ids exist."""
    monkeypatch.syspath_prepend(str(tmp_path))
    name = _package(
        tmp_path,
        "toy_claims_selection",
        {"c01_a": _MODULE.format(claim_id="C1"), "c02_b": _MODULE.format(claim_id="C2")},
    )
    registry = discover_claims(name)
    assert [c.id for c in registry.select([" c2", "C1"])] == ["C1", "C2"]
    assert [c.id for c in registry.select(None)] == ["C1", "C2"]
    with pytest.raises(UnknownClaimError, match=r"unknown claim id\(s\) C7; registered claims: C1, C2"):
        registry.select(["C7", "C1"])
    with pytest.raises(UnknownClaimError, match="no claim ids given"):
        registry.select([" ", ""])


class _Valid(Claim):
    id: ClassVar[str] = "C4"
    title: ClassVar[str] = "t"
    source: ClassVar[str] = "s"
    evidence: ClassVar[str] = "e"
    statement: ClassVar[str] = "st"
    rule: ClassVar[str] = "r"
    parts: ClassVar[int] = 2
    control_description: ClassVar[str] = "c"

    def run(self, ctx: ClaimContext) -> ClaimResult:
        raise NotImplementedError


class _BadId(_Valid):
    id: ClassVar[str] = "claim4"


class _NoRule(_Valid):
    rule: ClassVar[str] = "  "


class _OutsideFamily(_Valid):
    id: ClassVar[str] = "C11"


class _NoEvidence(_Valid):
    evidence: ClassVar[str] = ""


class _ZeroParts(_Valid):
    parts: ClassVar[int] = 0


class _BoolParts(_Valid):
    parts: ClassVar[int] = True


class _NoParts(Claim):
    id: ClassVar[str] = "C4"
    title: ClassVar[str] = "t"
    source: ClassVar[str] = "s"
    evidence: ClassVar[str] = "e"
    statement: ClassVar[str] = "st"
    rule: ClassVar[str] = "r"
    control_description: ClassVar[str] = "c"

    def run(self, ctx: ClaimContext) -> ClaimResult:
        raise NotImplementedError


def test_claims_are_validated_and_ids_must_be_unique() -> None:
    """If this fails, a claim without a pre-registered rule, with a malformed id, or a duplicate is accepted."""
    validate_claim(_Valid())
    with pytest.raises(ValueError, match="must look like 'C3'"):
        validate_claim(_BadId())
    with pytest.raises(ValueError, match="rule must be a non-empty string"):
        validate_claim(_NoRule())
    with pytest.raises(ValueError, match="outside the family C1-C10"):
        validate_claim(_OutsideFamily())
    with pytest.raises(TypeError, match=r"not a crl\.claims\.Claim"):
        validate_claim(object())
    with pytest.raises(ValueError, match="more than once"):
        Registry.of([_Valid(), _Valid()])


@pytest.mark.parametrize("claim", [_NoEvidence(), _ZeroParts(), _BoolParts(), _NoParts()])
def test_a_claim_must_say_what_it_tests_and_how_many_parts_its_rule_has(claim: Claim) -> None:
    """If this fails, a claim without its evidence or its pre-registered number of parts (which fixes its
    level) would run, at a level nobody fixed before the data."""
    with pytest.raises(
        ValueError, match=r"evidence must be a non-empty string|parts=.* must be an integer >= 1"
    ):
        validate_claim(claim)


def test_every_shipped_claim_module_imports() -> None:
    """If this fails, a module crl/claims/cNN_*.py is broken (its traceback is in the assertion message)."""
    registry = default_registry()
    assert registry.broken == {}, "\n".join(registry.broken.values())
