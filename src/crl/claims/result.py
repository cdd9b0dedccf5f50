"""A claim and what its run returns: :class:`Claim`, :class:`ClaimResult` and the control's :class:`ControlResult`.

A claim has a :class:`Role`. A *verdict* (C1-C7, C9, C10) is evidence for or against the papers: its FAIL, or its
control's PASS, fails the run. A *reconstruction check* (C8) tests crl's own reconstruction of a result in a
setting where it cannot fail (docs/theory.md section 7, "What a verdict is evidence for"): it runs the same rule at
the same level, but it is not a verdict, its share of alpha stays unspent (the budget of
:mod:`crl.claims.budget` is unchanged), and its outcome is reported without failing the run; only an ERROR (its
code raised) does, as a broken claim module would.
"""

import enum
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from crl.claims.budget import FAMILY, FAMILY_ALPHA, claim_alpha
from crl.claims.context import ClaimContext, Fidelity
from crl.claims.figure_spec import FigureSpec
from crl.claims.gates import shortfalls
from crl.claims.verdict import Statistic, Verdict


class Role(enum.StrEnum):
    """What a claim's outcome is evidence for, and so whether it can fail a run (module docstring)."""

    VERDICT = "verdict"
    RECONSTRUCTION = "reconstruction"

    @classmethod
    def of_stored(cls, result: Mapping[str, Any]) -> "Role":
        """The role of a stored result (:meth:`ClaimResult.to_dict`); one stored before roles existed is a
        verdict.

        Raises:
            ValueError: if the stored role is not one of the roles.
        """
        return cls(result.get("role", cls.VERDICT.value))


@dataclass(frozen=True)
class ControlResult:
    """The negative control's outcome: the same rule applied to a genuine alternative; it must FAIL.

    It is judged at its claim's per-part level (docs/theory.md section 7).

    Attributes:
        description: the alternative (a different true rate, a broken premise, a wrong constant).
        verdict: the rule's verdict on the alternative.
        statistics: what was measured on it.
        reasons: why the verdict is INCONCLUSIVE (empty otherwise).
        expected_verdict: always FAIL: a control that passes shows the rule cannot tell.
    """

    description: str
    verdict: Verdict
    statistics: tuple[Statistic, ...] = ()
    reasons: tuple[str, ...] = ()
    expected_verdict: Verdict = Verdict.FAIL


@dataclass(frozen=True)
class ClaimResult:
    """Everything a claim's run produced; `crl verify` stores it and the report shows it.

    Attributes:
        claim_id: e.g. ``"C3"``.
        title: short title.
        source: the paper and result, e.g. ``"[A] Thm 4.5; [B] Prop. 1"``.
        evidence: what the verdict is evidence for, e.g. ``"[A] Thm 4.5 (a rate)"``.
        statement: the claim in words and symbols.
        rule: the pre-registered verdict rule (docs/claims/<id>.md) with its level sentence, as text.
        parts: the number of intervals and violation counts the rule lists.
        level: the confidence level of each part and of the control (docs/theory.md section 7).
        fidelity: the fidelity it ran at.
        verdict: the rule's verdict on the claim.
        statistics: measured statistics with CIs; the first is the headline one.
        control: the negative control's outcome.
        figures: figure descriptions, drawn by the report.
        table: the tidy table of measurements, one dict per row.
        notes: anything a reader should know (deviations, warnings).
        reasons: why the verdict is INCONCLUSIVE (too few points, misfit, CI too wide); empty otherwise.
        slack: the largest measured/bound over the claim's bound checks (None: no bound check); below 0.1 a
            bound holds without being informative.
        run_id: the run that produced this result.
        cell_runs: run id -> number of the claim's cells taken from that run (earlier ids: resumed cells).
        wall_s: seconds the claim took (set by `crl verify`).
        role: a verdict, or a reconstruction check that does not fail the run (module docstring); a stored
            result without the field (written before it existed) is a verdict.
        unshown_fail: for a PASS, the parts whose power gate failed at this fidelity (each with its P(FAIL) at
            bound + 2 delta, :mod:`crl.claims.gates`): the PASS was not shown able to FAIL there.
    """

    claim_id: str
    title: str
    source: str
    evidence: str
    statement: str
    rule: str
    parts: int
    level: float
    fidelity: Fidelity
    verdict: Verdict
    statistics: tuple[Statistic, ...]
    control: ControlResult
    figures: tuple[FigureSpec, ...] = ()
    table: tuple[Mapping[str, Any], ...] = ()
    notes: str = ""
    reasons: tuple[str, ...] = ()
    slack: float | None = None
    run_id: str = ""
    cell_runs: Mapping[str, int] = field(default_factory=dict)
    wall_s: float | None = None
    role: Role = Role.VERDICT
    unshown_fail: tuple[str, ...] = ()

    @property
    def verdict_text(self) -> str:
        """The verdict as printed: ``"PASS; this rule was not shown able to FAIL here (<parts>)"`` for a PASS with
        parts whose power gate failed (:attr:`unshown_fail`), else the verdict itself."""
        if self.verdict is Verdict.PASS and self.unshown_fail:
            return f"PASS; this rule was not shown able to FAIL here ({'; '.join(self.unshown_fail)})"
        return str(self.verdict)

    @property
    def is_verdict(self) -> bool:
        """Whether this is a verdict (not a reconstruction check): only verdicts go into the verdict table."""
        return self.role is Role.VERDICT

    @property
    def problems(self) -> list[str]:
        """Why this result fails the run: the claim FAILs or ERRORs, or its control PASSes or ERRORs; for a
        reconstruction check only an ERROR (its code raised), its other outcomes being :attr:`check_findings`."""
        found = []
        failing = (Verdict.FAIL, Verdict.ERROR) if self.is_verdict else (Verdict.ERROR,)
        if self.verdict in failing:
            found.append(f"verdict {self.verdict}")
        control_failing = (Verdict.PASS, Verdict.ERROR) if self.is_verdict else (Verdict.ERROR,)
        if self.control.verdict in control_failing:
            found.append(f"negative control {self.control.verdict}, expected {self.control.expected_verdict}")
        return found

    @property
    def check_findings(self) -> list[str]:
        """What a reconstruction check found that a verdict's run would fail on (its FAIL, its control's PASS):
        reported, not failing the run. Always empty for a verdict."""
        if self.is_verdict:
            return []
        found = []
        if self.verdict is Verdict.FAIL:
            found.append("check FAIL")
        if self.control.verdict is Verdict.PASS:
            found.append(f"control PASS, expected {self.control.expected_verdict}")
        return found

    @property
    def fails_run(self) -> bool:
        """True when :attr:`problems` is not empty (`crl verify` then exits non-zero)."""
        return bool(self.problems)

    @property
    def inconclusive(self) -> list[str]:
        """What is INCONCLUSIVE, with its reasons (listed first by `crl verify`; the exit status stays 0)."""
        found = []
        if self.verdict is Verdict.INCONCLUSIVE:
            found.append(_with_reasons("verdict INCONCLUSIVE", self.reasons))
        if self.control.verdict is Verdict.INCONCLUSIVE:
            found.append(_with_reasons("negative control INCONCLUSIVE", self.control.reasons))
        return found

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of every field (enums as their values, tuples as lists, an infinite or NaN float as
        the string ``"inf"``, ``"-inf"`` or ``"nan"``: an unbounded interval end stays unbounded in the store)."""
        return _jsonable(asdict(self))


class Claim(ABC):
    """A pre-registered claim of docs/theory.md section 7 and the experiment that checks it.

    Subclasses set the class attributes and implement :meth:`run`; a module ``crl/claims/cNN_<name>.py``
    exposes an instance as ``CLAIM`` (the registry finds it).

    Attributes:
        id: ``"C1"`` ... ``"C10"``.
        title: short title, e.g. ``"SCRL inner error O(1/m)"``.
        source: the papers' result, e.g. ``"[A] Thm 4.5; [B] Prop. 1"``.
        evidence: what the verdict is evidence for, e.g. ``"[A] Thm 4.5 (a rate)"``, ``"crl's estimators: C1 is
            a theorem that holds for every s"`` or ``"crl's reconstruction of [B] Prop. 2"``.
        statement: what is claimed, in the papers' symbols.
        rule: the pre-registered verdict rule, copied from docs/claims/<id>.md (plus crl's fixed constants).
        parts: the number of intervals and violation counts the rule lists, pre-registered in docs/claims; it
            fixes the level of each part and of the control (:func:`crl.claims.budget.part_level`).
        control_description: the negative control, a genuine alternative whose verdict must be FAIL.
        role: :attr:`Role.VERDICT` unless the claim is a reconstruction check (module docstring).
    """

    id: ClassVar[str]
    title: ClassVar[str]
    source: ClassVar[str]
    evidence: ClassVar[str]
    statement: ClassVar[str]
    rule: ClassVar[str]
    parts: ClassVar[int]
    control_description: ClassVar[str]
    role: ClassVar[Role] = Role.VERDICT

    @abstractmethod
    def run(self, ctx: ClaimContext) -> ClaimResult:
        """Run the experiment at ``ctx.fidelity`` and return the verdicts of the claim and of its control."""

    def result(
        self,
        ctx: ClaimContext,
        *,
        verdict: Verdict,
        statistics: Sequence[Statistic],
        control_verdict: Verdict,
        control_statistics: Sequence[Statistic],
        figures: Sequence[FigureSpec] = (),
        table: Sequence[Mapping[str, Any]] = (),
        notes: str = "",
        reasons: Sequence[str] = (),
        control_reasons: Sequence[str] = (),
        slack: float | None = None,
    ) -> ClaimResult:
        """This claim's :class:`ClaimResult`, with id, texts, level, fidelity and provenance filled from ``ctx``.

        Args:
            reasons: why ``verdict`` is INCONCLUSIVE (too few points, misfit, CI too wide).
            control_reasons: why ``control_verdict`` is INCONCLUSIVE.
            slack: the largest measured/bound over the claim's bound checks, if it has any.
        """
        return ClaimResult(
            claim_id=self.id,
            title=self.title,
            source=self.source,
            evidence=self.evidence,
            statement=self.statement,
            rule=f"{self.rule} {level_sentence(self.parts, ctx.level)}",
            parts=self.parts,
            level=ctx.level,
            fidelity=ctx.fidelity,
            verdict=verdict,
            statistics=tuple(statistics),
            control=ControlResult(
                self.control_description, control_verdict, tuple(control_statistics), tuple(control_reasons)
            ),
            figures=tuple(figures),
            table=tuple(dict(row) for row in table),
            notes=notes,
            reasons=tuple(reasons),
            slack=slack,
            run_id=ctx.run_id,
            cell_runs=dict(ctx.cell_runs),
            role=self.role,
            unshown_fail=tuple(
                gap.describe()
                for gap in shortfalls(self.id, ctx.fidelity, ctx.seeds)
                if verdict is Verdict.PASS
            ),
        )


def level_sentence(parts: int, level: float) -> str:
    """The sentence appended to every printed rule: the level of each of the claim's ``parts`` and the control.

    With ``level = part_level(parts)``, as `crl verify` sets it, the sentence states the budget of
    docs/theory.md section 7: alpha = 0.05 over C1-C10, alpha/10 per claim, split over its parts.
    """
    each = (
        "the claim's single part (an interval or a violation count)"
        if parts == 1
        else (f"each of the claim's {parts} parts (intervals, violation counts)")
    )
    return (
        f"Level: {each} and the control at {level:.5g} (alpha = {FAMILY_ALPHA:g} over {FAMILY[0]}-{FAMILY[-1]}: "
        f"{claim_alpha():g} per claim, split over its parts; docs/theory.md section 7)."
    )


def _with_reasons(what: str, reasons: Sequence[str]) -> str:
    """``"what: reason; reason"``, or ``"what: no reason given"``."""
    return f"{what}: {'; '.join(reasons) if reasons else 'no reason given'}"


def _jsonable(value: Any) -> Any:
    """``value`` with enums replaced by their values, tuples by lists and non-finite floats by their names
    (recursively)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
