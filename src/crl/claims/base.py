"""What a claim is and what it returns: the contract between claim modules and `crl verify`.

A claim of THEORY.md section 7 is a :class:`Claim` subclass with its statement, source and pre-registered rule
as class attributes and one method, ``run(ctx) -> ClaimResult``. ``run`` computes its grid through
``ctx.run_cells`` (resumable, stored in SQLite), reduces it with :mod:`crl.stats`, applies the rule to the
claim *and* to its negative control (a genuine alternative whose verdict must come out FAIL), and describes
its figures as :class:`FigureSpec` data, which the report draws (claims never import :mod:`crl.report`).
"""

import enum
import functools
import hashlib
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike

from crl._vocab import Estimate
from crl.stats import SlopeFit, ViolationCount
from crl.sweep import Cell, CellFn, CellRecord, ProgressHook, SweepStore, derive_seed, run_cells


@functools.cache
def code_fingerprint() -> str:
    """SHA-256 (first 16 hex digits) of every Python source file of the installed crl package.

    Stored cells are namespaced by it, so a rerun reuses only cells computed by exactly this code: an interrupted
    run resumes, but a changed estimator or claim never silently reuses results of the old one.
    """
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


class Fidelity(enum.StrEnum):
    """How much computation a run of the claims spends (``crl verify --fidelity``)."""

    QUICK = "quick"
    STANDARD = "standard"
    FULL = "full"

    @property
    def budget_s(self) -> float | None:
        """Wall-time budget of a whole run of all claims on 2 cores (None: unbounded)."""
        return {"quick": 180.0, "standard": 1200.0, "full": None}[self.value]


class Verdict(enum.StrEnum):
    """Outcome of a pre-registered rule.

    ``ERROR`` is set by `crl verify` when a claim's ``run`` raised; claims never return it.
    """

    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"
    ERROR = "ERROR"


@dataclass(frozen=True)
class Statistic:
    """A measured statistic with its confidence interval.

    Attributes:
        name: what it is, e.g. ``"slope of L - E L_hat vs m"``.
        value: the point estimate.
        ci_low: lower end of the interval.
        ci_high: upper end of the interval.
        ci_level: nominal coverage, e.g. 0.95.
        detail: how the interval was obtained (method, points, resamples).
    """

    name: str
    value: float
    ci_low: float
    ci_high: float
    ci_level: float = 0.95
    detail: str = ""

    @classmethod
    def from_slope(cls, name: str, fit: SlopeFit) -> "Statistic":
        """The slope of a :class:`~crl.stats.SlopeFit` with its bootstrap interval."""
        detail = f"{fit.method}, {fit.n_points} points, {fit.n_boot} resamples"
        if fit.scale > 1.0:
            detail += f", widened x{fit.scale:.2f} for misfit (chi2/dof = {fit.chi2:.3g}/{fit.dof})"
        return cls(name, fit.slope, fit.ci_low, fit.ci_high, fit.ci_level, detail)

    @classmethod
    def from_violations(cls, name: str, count: ViolationCount) -> "Statistic":
        """Violations beyond MC error, with a one-sided Clopper-Pearson upper bound on their mean count."""
        detail = (
            f"{count.count_beyond_mc_error} of {count.n} beyond {count.k:.2f} se ({count.count} raw); "
            f"one-sided {count.ci_level:g} upper bound on the expected count"
        )
        upper = count.n * count.rate_upper
        return cls(name, float(count.count_beyond_mc_error), 0.0, upper, count.ci_level, detail)

    @classmethod
    def from_mean(cls, name: str, estimate: Estimate, level: float = 0.95) -> "Statistic":
        """A mean with its Student-t interval."""
        low, high = estimate.t_ci(level)
        return cls(name, estimate.mean, low, high, level, f"mean of {estimate.n}, se {estimate.se:.3g}")

    def contains(self, value: float) -> bool:
        """Whether ``ci_low <= value <= ci_high``."""
        return self.ci_low <= value <= self.ci_high


@dataclass(frozen=True)
class Points:
    """A measured series of a figure: points with optional interval bars and an optional fitted power law."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    y_low: tuple[float, ...] | None = None
    y_high: tuple[float, ...] | None = None
    fit: SlopeFit | None = None


@dataclass(frozen=True)
class Curve:
    """A theoretical curve of a figure: a bound (``kind="bound"``) or a predicted law (``kind="theory"``)."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    kind: Literal["bound", "theory"] = "bound"


@dataclass(frozen=True)
class FigureSpec:
    """Everything needed to draw one figure; the report renders it to ``<claim>_<name>.png``.

    Attributes:
        name: file-name stem, letters, digits, ``-`` and ``_`` only.
        title: the figure's title.
        x_label: x-axis label (name the symbol, e.g. ``"m (negatives per anchor)"``).
        y_label: y-axis label.
        points: measured series (the claim's and usually the control's).
        curves: bounds or predicted curves, drawn as lines.
        reference_slopes: theory slopes, drawn as dotted lines through the first series' geometric centre.
        log_x: logarithmic x axis.
        log_y: logarithmic y axis.
    """

    name: str
    title: str
    x_label: str
    y_label: str
    points: tuple[Points, ...]
    curves: tuple[Curve, ...] = ()
    reference_slopes: tuple[float, ...] = ()
    log_x: bool = True
    log_y: bool = True

    def __post_init__(self) -> None:
        if not self.name or not all(ch.isascii() and (ch.isalnum() or ch in "-_") for ch in self.name):
            raise ValueError(
                f"figure name={self.name!r} must be non-empty ASCII letters, digits, '-' or '_'."
            )
        if not self.points and not self.curves:
            raise ValueError(f"figure {self.name!r} has no points and no curves; give it something to draw.")


def points(
    label: str,
    x: ArrayLike,
    y: ArrayLike,
    *,
    y_err: ArrayLike | None = None,
    y_low: ArrayLike | None = None,
    y_high: ArrayLike | None = None,
    fit: SlopeFit | None = None,
) -> Points:
    """A :class:`Points` series from arrays; bars from a symmetric ``y_err`` or from ``y_low``/``y_high``.

    Raises:
        ValueError: on mismatched lengths, non-finite values, or both ``y_err`` and ``y_low``/``y_high``.
    """
    gx, gy = _floats(f"{label}: x", x), _floats(f"{label}: y", y)
    _same_length(label, gx, gy)
    if y_err is not None and (y_low is not None or y_high is not None):
        raise ValueError(f"{label}: give either y_err or y_low/y_high, not both.")
    if (y_low is None) != (y_high is None):
        raise ValueError(f"{label}: give y_low and y_high together.")
    low = high = None
    if y_err is not None:
        err = _floats(f"{label}: y_err", y_err)
        _same_length(label, gx, err)
        low, high = (
            tuple(a - e for a, e in zip(gy, err, strict=True)),
            tuple(a + e for a, e in zip(gy, err, strict=True)),
        )
    elif y_low is not None and y_high is not None:
        low, high = _floats(f"{label}: y_low", y_low), _floats(f"{label}: y_high", y_high)
        _same_length(label, gx, low)
        _same_length(label, gx, high)
    return Points(label, gx, gy, low, high, fit)


def curve(label: str, x: ArrayLike, y: ArrayLike, *, kind: Literal["bound", "theory"] = "bound") -> Curve:
    """A :class:`Curve` from arrays (finite values, equal lengths)."""
    gx, gy = _floats(f"{label}: x", x), _floats(f"{label}: y", y)
    _same_length(label, gx, gy)
    return Curve(label, gx, gy, kind)


def loglog_figure(
    name: str,
    title: str,
    x_label: str,
    y_label: str,
    *series: Points,
    theory_slope: float | None = None,
    bounds: Sequence[Curve] = (),
) -> FigureSpec:
    """A log-log figure: measured series with their fitted lines, the theory's slope and/or bound curves."""
    slopes = () if theory_slope is None else (float(theory_slope),)
    return FigureSpec(name, title, x_label, y_label, tuple(series), tuple(bounds), slopes)


def bound_figure(
    name: str,
    title: str,
    x_label: str,
    y_label: str,
    *series: Points,
    bound: Curve,
    log_x: bool = False,
    log_y: bool = False,
) -> FigureSpec:
    """A scatter-against-bound figure (e.g. C2's ``E* - E(s)`` vs ``L(s) - L*`` under ``sqrt(2x/tau)``)."""
    return FigureSpec(name, title, x_label, y_label, tuple(series), (bound,), (), log_x, log_y)


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
        rule: the pre-registered verdict rule (THEORY.md section 7), as text.
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


@dataclass
class ClaimContext:
    """What a claim's ``run`` gets from `crl verify`: fidelity, store, seed, and the run's bookkeeping.

    Attributes:
        claim_id: the running claim's id (cells are stored under it).
        fidelity: how much to compute.
        store: the sweep store of this run's output folder.
        seed: the run's base seed (``crl verify --seed``).
        run_id: the current run's id.
        workers: process-pool size for cells (1: in process).
        progress: progress hook for the cells (``progress(done, total)``).
        cell_runs: run id -> number of cells used from that run, filled by :meth:`run_cells`.
        level: family-wise confidence level of the claim's verdict (all its intervals and violation counts
            together). `crl verify` sets 1 - 0.05/N for the N shipped claims, so that a run in which every claim
            is true fails with probability at most 5% (at 0.95 each, 7 true claims would fail ~30% of runs).
    """

    claim_id: str
    fidelity: Fidelity
    store: SweepStore
    seed: int
    run_id: str
    workers: int = 1
    progress: ProgressHook | None = None
    cell_runs: Counter[str] = field(default_factory=Counter)
    level: float = 0.95

    def run_cells(self, cells: Sequence[Cell], fn: CellFn) -> list[CellRecord]:
        """Compute (or load) the claim's cells with :func:`crl.sweep.run_cells`; records in ``cells`` order.

        Claim and control cells share the claim's namespace in the store, so their params must differ (e.g.
        ``{"arm": "control", ...}``). The namespace is ``"<claim id>@<code fingerprint>"`` (see
        :func:`code_fingerprint`): cells computed by other code are never reused.
        """
        records = run_cells(
            self.store,
            f"{self.claim_id}@{code_fingerprint()}",
            cells,
            fn,
            run_id=self.run_id,
            workers=self.workers,
            progress=self.progress,
        )
        self.cell_runs.update(record.run_id for record in records)
        return records

    def seed_for(self, *keys: Any) -> int:
        """A seed for this claim derived from the run's seed and JSON-able ``keys`` (e.g. a cell's params)."""
        return derive_seed(self.seed, self.claim_id, *keys)

    def rng(self, *keys: Any) -> np.random.Generator:
        """A numpy Generator seeded with :meth:`seed_for` of ``keys`` (e.g. ``ctx.rng("bootstrap")``)."""
        return np.random.default_rng(self.seed_for(*keys))


class Claim(ABC):
    """A pre-registered claim of THEORY.md section 7 and the experiment that checks it.

    Subclasses set the class attributes and implement :meth:`run`; a module ``crl/claims/cNN_<name>.py``
    exposes an instance as ``CLAIM`` (the registry finds it).

    Attributes:
        id: ``"C1"`` ... ``"C10"``.
        title: short title, e.g. ``"SCRL inner error O(1/m)"``.
        source: the papers' result, e.g. ``"[A] Thm 4.5; [B] Prop. 1"``.
        statement: what is claimed, in the papers' symbols.
        rule: the pre-registered verdict rule, copied from THEORY.md section 7 (plus crl's fixed constants).
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
            rule=f"{self.rule} Level: the verdict's intervals and violation counts hold jointly at family-wise "
            f"level {ctx.level:.4g} (crl verify: 95% over the shipped claims, Bonferroni).",
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


def bonferroni_level(n_intervals: int, family_level: float = 0.95) -> float:
    """Per-interval confidence level 1 - (1 - family_level)/S, so that S intervals of a true claim all contain
    their targets with probability >= family_level (four separate 95% CIs would fail a true claim ~19% of runs)."""
    if n_intervals < 1:
        raise ValueError(f"n_intervals={n_intervals!r} must be >= 1.")
    return 1.0 - (1.0 - family_level) / n_intervals


def verdict_contains(statistic: Statistic, target: float, *, max_width: float | None = None) -> Verdict:
    """The rule "the CI contains ``target``": PASS if it does, FAIL if it does not.

    With ``max_width``, an interval that contains the target but is wider than ``max_width`` is INCONCLUSIVE
    (a wide enough interval contains anything; the negative control should expose such a rule anyway).
    """
    if not statistic.contains(target):
        return Verdict.FAIL
    if max_width is not None and statistic.ci_high - statistic.ci_low > max_width:
        return Verdict.INCONCLUSIVE
    return Verdict.PASS


def verdict_no_violations(count: ViolationCount) -> Verdict:
    """The rule "zero violations beyond MC error": PASS if there are none, FAIL otherwise."""
    return Verdict.PASS if count.holds else Verdict.FAIL


def combine_verdicts(*verdicts: Verdict) -> Verdict:
    """All parts of a rule must hold: ERROR, else FAIL, else INCONCLUSIVE if any part is so, else PASS."""
    if not verdicts:
        raise ValueError("combine_verdicts needs at least one verdict.")
    for worst in (Verdict.ERROR, Verdict.FAIL, Verdict.INCONCLUSIVE):
        if worst in verdicts:
            return worst
    return Verdict.PASS


def _floats(name: str, values: ArrayLike) -> tuple[float, ...]:
    """``values`` as a tuple of finite floats."""
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(array)):
        raise ValueError(
            f"{name} contains NaN/inf; figures show finite values only (drop or fix those points)."
        )
    return tuple(float(v) for v in array)


def _same_length(label: str, reference: tuple[float, ...], other: tuple[float, ...]) -> None:
    """Raise ``ValueError`` unless ``other`` has as many values as ``reference``."""
    if len(other) != len(reference):
        raise ValueError(f"{label}: got {len(other)} values for {len(reference)} x values; pass one per x.")


def _jsonable(value: Any) -> Any:
    """``value`` with enums replaced by their values and tuples by lists (recursively)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
