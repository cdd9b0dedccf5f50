"""A claim and what its run returns: :class:`Claim`, :class:`ClaimResult` and the control's :class:`ControlResult`."""

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from crl.claims.context import ClaimContext, Fidelity
from crl.claims.figure_spec import FigureSpec
from crl.claims.verdict import Statistic, Verdict


@dataclass(frozen=True)
class ControlResult:
    """The negative control's outcome: the same rule applied to a genuine alternative; it must FAIL.

    Attributes:
        description: the alternative (a different true rate, a broken premise, a wrong constant).
        verdict: the rule's verdict on the alternative.
        statistics: what was measured on it.
        expected_verdict: always FAIL: a control that passes shows the rule cannot tell.
    """

    description: str
    verdict: Verdict
    statistics: tuple[Statistic, ...] = ()
    expected_verdict: Verdict = Verdict.FAIL


@dataclass(frozen=True)
class ClaimResult:
    """Everything a claim's run produced; `crl verify` stores it and the report shows it.

    Attributes:
        claim_id: e.g. ``"C3"``.
        title: short title.
        source: the paper and result, e.g. ``"[A] Thm 4.5; [B] Prop. 1"``.
        statement: the claim in words and symbols.
        rule: the pre-registered verdict rule (docs/theory.md section 7), as text.
        fidelity: the fidelity it ran at.
        verdict: the rule's verdict on the claim.
        statistics: measured statistics with CIs; the first is the headline one.
        control: the negative control's outcome.
        figures: figure descriptions, drawn by the report.
        table: the tidy table of measurements, one dict per row.
        notes: anything a reader should know (deviations, warnings).
        run_id: the run that produced this result.
        cell_runs: run id -> number of the claim's cells taken from that run (earlier ids: resumed cells).
        wall_s: seconds the claim took (set by `crl verify`).
        expected_verdict: the verdict the claim should get (PASS for the papers' claims).
    """

    claim_id: str
    title: str
    source: str
    statement: str
    rule: str
    fidelity: Fidelity
    verdict: Verdict
    statistics: tuple[Statistic, ...]
    control: ControlResult
    figures: tuple[FigureSpec, ...] = ()
    table: tuple[Mapping[str, Any], ...] = ()
    notes: str = ""
    run_id: str = ""
    cell_runs: Mapping[str, int] = field(default_factory=dict)
    wall_s: float | None = None
    expected_verdict: Verdict = Verdict.PASS

    @property
    def problems(self) -> list[str]:
        """Why this result fails the run: an unexpected verdict, or a control that does not FAIL."""
        found = []
        if self.verdict != self.expected_verdict:
            found.append(f"verdict {self.verdict}, expected {self.expected_verdict}")
        if self.control.verdict != self.control.expected_verdict:
            found.append(f"negative control {self.control.verdict}, expected {self.control.expected_verdict}")
        return found

    @property
    def fails_run(self) -> bool:
        """True when :attr:`problems` is not empty (`crl verify` then exits non-zero)."""
        return bool(self.problems)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of every field (enums as their values, tuples as lists)."""
        return _jsonable(asdict(self))


class Claim(ABC):
    """A pre-registered claim of docs/theory.md section 7 and the experiment that checks it.

    Subclasses set the class attributes and implement :meth:`run`; a module ``crl/claims/cNN_<name>.py``
    exposes an instance as ``CLAIM`` (the registry finds it).

    Attributes:
        id: ``"C1"`` ... ``"C10"``.
        title: short title, e.g. ``"SCRL inner error O(1/m)"``.
        source: the papers' result, e.g. ``"[A] Thm 4.5; [B] Prop. 1"``.
        statement: what is claimed, in the papers' symbols.
        rule: the pre-registered verdict rule, copied from docs/theory.md section 7 (plus crl's fixed constants).
        control_description: the negative control, a genuine alternative whose verdict must be FAIL.
        expected_verdict: PASS for every claim of the papers.
    """

    id: ClassVar[str]
    title: ClassVar[str]
    source: ClassVar[str]
    statement: ClassVar[str]
    rule: ClassVar[str]
    control_description: ClassVar[str]
    expected_verdict: ClassVar[Verdict] = Verdict.PASS

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
    ) -> ClaimResult:
        """This claim's :class:`ClaimResult`, with id, texts, fidelity and provenance filled from ``ctx``."""
        return ClaimResult(
            claim_id=self.id,
            title=self.title,
            source=self.source,
            statement=self.statement,
            rule=f"{self.rule} {level_sentence(ctx.level)}",
            fidelity=ctx.fidelity,
            verdict=verdict,
            statistics=tuple(statistics),
            control=ControlResult(self.control_description, control_verdict, tuple(control_statistics)),
            figures=tuple(figures),
            table=tuple(dict(row) for row in table),
            notes=notes,
            run_id=ctx.run_id,
            cell_runs=dict(ctx.cell_runs),
            expected_verdict=self.expected_verdict,
        )


def level_sentence(level: float) -> str:
    """The sentence appended to every printed rule: the family-wise level at which the verdict's parts hold."""
    return (
        "Level: the verdict's intervals and violation counts hold jointly at family-wise "
        f"level {level:.4g} (crl verify: 95% over the shipped claims, Bonferroni)."
    )


def _jsonable(value: Any) -> Any:
    """``value`` with enums replaced by their values and tuples by lists (recursively)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
