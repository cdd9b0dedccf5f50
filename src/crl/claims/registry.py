"""Finds the claims: every module ``crl/claims/cNN_<name>.py`` that exposes a :class:`Claim` as ``CLAIM``.

Adding a claim is adding its module; nothing here needs editing. A claim module that fails to import does not
hide the others: it is listed in :attr:`Registry.broken`, and `crl verify` reports it and exits non-zero.
"""

import importlib
import pkgutil
import re
import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from crl.claims.base import Claim
from crl.claims.budget import FAMILY

CLAIM_MODULE = re.compile(r"^c\d\d_[a-z0-9_]+$")
CLAIM_ID = re.compile(r"^C([1-9]\d*)$")
_TEXT_ATTRIBUTES = ("title", "source", "evidence", "statement", "rule", "control_description")


class UnknownClaimError(ValueError):
    """A requested claim id is not registered (the message lists the valid ones)."""


@dataclass(frozen=True)
class Registry:
    """The known claims, sorted by number, plus the claim modules that failed to import.

    Attributes:
        claims: the claims, in the order C1, C2, ..., C10.
        broken: module name -> the error (with traceback) raised while importing it or reading its ``CLAIM``.
    """

    claims: tuple[Claim, ...]
    broken: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for claim in self.claims:
            validate_claim(claim)
        ids = [claim.id for claim in self.claims]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(
                f"claim ids {duplicates} are registered more than once; give every claim its own id."
            )
        object.__setattr__(self, "claims", tuple(sorted(self.claims, key=_claim_number)))

    @classmethod
    def of(cls, claims: Iterable[Claim]) -> "Registry":
        """A registry of the given claims (tests and embedding use this instead of discovery)."""
        return cls(tuple(claims))

    def ids(self) -> list[str]:
        """The registered ids, in order."""
        return [claim.id for claim in self.claims]

    def select(self, ids: Sequence[str] | None) -> list[Claim]:
        """The claims with the given ids (case-insensitive, order of the registry); all of them for ``None``.

        Raises:
            UnknownClaimError: naming the unknown ids and listing the valid ones.
        """
        if ids is None:
            return list(self.claims)
        wanted = {i.strip().upper() for i in ids if i.strip()}
        if not wanted:
            raise UnknownClaimError(f"no claim ids given; choose from {', '.join(self.ids()) or '(none)'}.")
        unknown = sorted(wanted - set(self.ids()))
        if unknown:
            valid = ", ".join(self.ids()) or "(none)"
            raise UnknownClaimError(f"unknown claim id(s) {', '.join(unknown)}; registered claims: {valid}.")
        return [claim for claim in self.claims if claim.id in wanted]


def validate_claim(claim: object) -> None:
    """Check that ``claim`` is a :class:`Claim` with an id ``C<n>``, non-empty texts and a number of parts >= 1.

    Raises:
        TypeError: if it is not a :class:`Claim` instance.
        ValueError: naming the attribute that is missing, empty or malformed.
    """
    if not isinstance(claim, Claim):
        raise TypeError(
            f"{claim!r} is not a crl.claims.Claim instance; expose CLAIM = YourClaim() in the module."
        )
    claim_id = getattr(claim, "id", None)
    if not isinstance(claim_id, str) or not CLAIM_ID.match(claim_id):
        raise ValueError(f"{type(claim).__name__}.id={claim_id!r} must look like 'C3'.")
    if claim_id not in FAMILY:
        raise ValueError(
            f"{type(claim).__name__}.id={claim_id!r} is outside the family {FAMILY[0]}-{FAMILY[-1]} that shares "
            "the run's error budget (docs/theory.md section 7)."
        )
    for name in _TEXT_ATTRIBUTES:
        text = getattr(claim, name, None)
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{claim_id} ({type(claim).__name__}).{name} must be a non-empty string.")
    parts = getattr(claim, "parts", None)
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise ValueError(
            f"{claim_id} ({type(claim).__name__}).parts={parts!r} must be an integer >= 1: the number of "
            f"intervals and violation counts its rule lists, as pre-registered in docs/claims/{claim_id}.md."
        )


def discover_claims(package: str = "crl.claims") -> Registry:
    """Import every ``cNN_<name>`` module of ``package`` and collect their ``CLAIM`` objects.

    Args:
        package: the dotted name of the package to scan (tests point it at a temporary package).
    """
    root = importlib.import_module(package)
    claims: list[Claim] = []
    broken: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda m: m.name):
        if info.ispkg or not CLAIM_MODULE.match(info.name):
            continue
        name = f"{package}.{info.name}"
        try:
            module = importlib.import_module(name)
            claim = getattr(module, "CLAIM", None)
            if claim is None:
                raise AttributeError(f"{name} defines no CLAIM; add CLAIM = YourClaim() at module level.")
            validate_claim(claim)
        except Exception:
            broken[name] = traceback.format_exc()
            continue
        claims.append(claim)
    return Registry(tuple(claims), broken)


def default_registry() -> Registry:
    """The claims shipped in :mod:`crl.claims`."""
    return discover_claims()


def _claim_number(claim: Claim) -> int:
    """The n of claim id ``C<n>``, for sorting C2 before C10."""
    match = CLAIM_ID.match(claim.id)
    if match is None:
        raise ValueError(f"claim id {claim.id!r} must look like 'C3'.")
    return int(match.group(1))
