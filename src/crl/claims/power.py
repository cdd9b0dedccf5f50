"""The one power method of every judged part and control (docs/verdicts.md, contract v4; docs/theory.md section 7).

Power is computed at the design's own seed count S, from at least two independent sets of measured seeds (two
runs at different offsets, or the two halves of one run's replicates), each set on its own:

1. A part reads, per seed, a row of values (its grid points and quantities): the set gives the matrix Y (S0 x p),
   its mean mu and covariance Sigma = (Y - mu)^T (Y - mu) / (S0 - 1).
2. **Parametric bootstrap.** R synthetic designs of S seeds, each seed drawn from N(mu, Sigma) as
   ``mu + z^T (Y - mu) / sqrt(S0 - 1)``, z ~ N(0, I_S0) (:func:`normal_designs`: exactly that normal law, also when
   p >= S0, where Sigma is singular). S may exceed S0: a subsample of the measured seeds cannot estimate power at
   a larger design, and a resample with repeated seeds makes a delete-one jackknife too narrow.
   A fitted rate's designs are centred at its fitted model's curve instead (:attr:`PartSpec.model`: a
   parametric bootstrap from the fitted model), with the measured covariance.
3. Each design is judged by the claim's own rule code with the part's truth moved by a registered transform
   (``shift`` added to its statistic): to the end of the set's own CI nearest the bound, never across it
   (:func:`decide_truth`; **P(decide)**, the share that PASS or FAIL), to bound + 2 delta on the failing side
   (**P(FAIL)**, the share that FAIL), and, for a control, as measured (**P(control PASS)**; C6's at its true
   value 0).
4. Every figure carries its Clopper-Pearson 95% interval (:func:`share`). A part's gate passes on a set when
   P(decide) >= 0.8 and P(FAIL) >= 0.8; a control's when P(PASS) <= 1 - level; the design passes when every gate
   passes on every set.

The parts without a margin (a one-sided difference against 0) take as their failing truth the mirror image of
the shrunk effect, ``-|shrunk|``.

The claims' own parts and seed sets are built in :mod:`crl.claims.power_claims` (C5, C10) and
:mod:`crl.claims.saturation_gate` (C6).
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray
from scipy import stats as scipy_stats

from crl.claims.context import Fidelity
from crl.claims.verdict import Statistic, Verdict
from crl.sweep import CellRecord

FloatArray = NDArray[np.float64]

RESAMPLES = 400
"""Synthetic designs per seed set (the contract asks for at least 200)."""
GATE_MINIMUM = 200
"""The contract's minimum number of designs per seed set for a gate."""
GATE_TARGET = 0.8
"""P(decide) and P(FAIL at bound + 2 delta) must reach this on every seed set."""


@dataclass(frozen=True)
class Share:
    """A share of designs with its Clopper-Pearson 95% interval."""

    hits: int
    total: int
    low: float
    high: float

    @property
    def value(self) -> float:
        """hits / total."""
        return self.hits / self.total

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


def share(hits: int, total: int) -> Share:
    """``hits`` of ``total`` with the exact (Clopper-Pearson) 95% binomial interval."""
    interval = scipy_stats.binomtest(hits, total).proportion_ci(confidence_level=0.95, method="exact")
    return Share(hits, total, float(interval.low), float(interval.high))


def normal_designs(
    values: FloatArray,
    seeds: int,
    resamples: int,
    rng: np.random.Generator,
    centre: FloatArray | None = None,
) -> FloatArray:
    """(resamples, seeds, p) draws of ``seeds`` seeds each from N(mu, Sigma) of the rows of ``values`` (S0, p):
    ``mu + z^T (Y - mu) / sqrt(S0 - 1)`` with z ~ N(0, I_S0), whose covariance is exactly the sample covariance;
    with ``centre``, the draws are centred there instead of at the sample mean (a fitted model's curve).

    Raises:
        ValueError: on fewer than 3 measured seeds, non-finite values, or seeds < 3.
    """
    if values.ndim != 2 or values.shape[0] < 3:
        raise ValueError(f"values has shape {values.shape}; pass (seeds >= 3, p) measured per-seed rows.")
    if not np.all(np.isfinite(values)):
        raise ValueError("values holds NaN or infinity; a power calculation needs finite per-seed cells.")
    if seeds < 3:
        raise ValueError(f"seeds = {seeds}; a design needs at least 3 seeds (a jackknife on S - 1 dof).")
    mean = values.mean(axis=0)
    centred = (values - mean) / math.sqrt(values.shape[0] - 1)
    z = rng.standard_normal((resamples, seeds, values.shape[0]))
    middle = mean if centre is None else centre
    return middle[None, None, :] + z @ centred


def power_law_curve(x: Sequence[int], values: FloatArray) -> FloatArray:
    """The power law ``A x^r`` fitted to the seed means of ``values`` by least squares on log-log axes, at x: the
    fitted model whose curve a rate's designs are centred at (:attr:`crl.claims.power.PartSpec.model`).

    Raises:
        ValueError: when a seed mean is not positive.
    """
    means = values.mean(axis=0)
    if np.any(means <= 0.0):
        raise ValueError("a seed mean is <= 0: a power law cannot be fitted to it.")
    log_x = np.log(np.asarray(x, dtype=np.float64))
    slope, intercept = np.polyfit(log_x, np.log(means), 1)
    return np.asarray(np.exp(intercept + slope * log_x), dtype=np.float64)


Judge = Callable[[FloatArray, float], tuple[Verdict, Statistic | None]]
"""(per-seed values (S, p), shift) -> the part's verdict and statistic, the statistic's truth moved by shift."""


@dataclass(frozen=True)
class PartSpec:
    """One part on one seed set: its rule's side and bound, the measured per-seed values, and its judge.

    Attributes:
        name: the part's name.
        bound: the rule's bound.
        delta: the rule's margin (None: the mirror image of the shrunk effect fails).
        upper: True for an upper-bound rule (PASS when the CI's upper end <= bound), False for a lower one.
        values: (S0, p) the per-seed values the rule reads, as measured.
        judge: see :data:`Judge`.
        model: for a fitted rate, the fitted model's curve at the grid points (p,): the designs are centred there,
            with the measured covariance (a parametric bootstrap from the fitted model: at S > S0 the set's
            per-point noise, centred as truth, would be a systematic misfit that a larger design detects); None
            centres them at the measured means.
    """

    name: str
    bound: float
    delta: float | None
    upper: bool
    values: FloatArray
    judge: Judge
    model: FloatArray | None = None


@dataclass(frozen=True)
class ControlSpec:
    """One control on one seed set: the measured per-seed values, the control's verdict on a design, and its own
    seed count where the design gives it one (C5's heavy-tailed class: 48 at standard beside the claim's 12)."""

    name: str
    level: float
    values: FloatArray
    judge: Callable[[FloatArray], Verdict]
    seeds: int | None = None


@dataclass(frozen=True)
class PartPower:
    """One part's figures on one seed set at S seeds (module docstring)."""

    part: str
    seed_set: str
    bound: float
    estimate: float
    ci_low: float
    ci_high: float
    shrunk: float
    failing: float
    p_decide: Share
    p_fail: Share
    measured_seeds: int
    seeds: int

    @property
    def passes(self) -> bool:
        """P(decide) >= 0.8 and P(FAIL) >= 0.8."""
        return self.p_decide.value >= GATE_TARGET and self.p_fail.value >= GATE_TARGET


@dataclass(frozen=True)
class ControlPower:
    """One control's P(PASS) on one seed set at S seeds, against what its level allows."""

    control: str
    seed_set: str
    p_pass: Share
    allowed: float
    measured_seeds: int
    seeds: int

    @property
    def passes(self) -> bool:
        """P(control PASS) <= 1 - level."""
        return self.p_pass.value <= self.allowed


def decide_truth(spec: PartSpec, observed: Statistic) -> float:
    """P(decide)'s truth: the end of the set's CI nearest the bound (the least favourable effect the data allow),
    never across it. When the CI contains the bound the set has not established the effect, and the truth is
    bound + 2 delta on the PASS side (the mirror of P(FAIL)'s truth); an infinite end falls back to the estimate."""
    end = observed.ci_high if spec.upper else observed.ci_low
    if not math.isfinite(end):
        end = observed.value
    crosses = end >= spec.bound if spec.upper else end <= spec.bound
    if crosses and spec.delta is not None:
        return spec.bound - 2.0 * spec.delta if spec.upper else spec.bound + 2.0 * spec.delta
    return end


def part_power(
    spec: PartSpec, seed_set: str, seeds: int, resamples: int, rng: np.random.Generator
) -> PartPower:
    """The power of one part at ``seeds`` seeds from one seed set (module docstring).

    Raises:
        ValueError: when the measured values give the part no statistic.
    """
    _, observed = spec.judge(spec.values, 0.0)
    if observed is None:
        raise ValueError(
            f"{spec.name}: the seed set {seed_set} gives no statistic; no power can be computed."
        )
    origin = observed.value
    if spec.model is not None:
        _, at_model = spec.judge(spec.values - spec.values.mean(axis=0) + spec.model, 0.0)
        origin = at_model.value if at_model is not None else origin
    shrunk = decide_truth(spec, observed)
    margin = spec.delta if spec.delta is not None else abs(shrunk - spec.bound) / 2.0
    failing = spec.bound + 2.0 * margin if spec.upper else spec.bound - 2.0 * margin
    designs = normal_designs(spec.values, seeds, resamples, rng, spec.model)
    decided = failed = 0
    for design in designs:
        decided += _verdict(spec.judge, design, shrunk - origin) is not Verdict.INCONCLUSIVE
        failed += _verdict(spec.judge, design, failing - origin) is Verdict.FAIL
    return PartPower(
        part=spec.name,
        seed_set=seed_set,
        bound=spec.bound,
        estimate=observed.value,
        ci_low=observed.ci_low,
        ci_high=observed.ci_high,
        shrunk=shrunk,
        failing=failing,
        p_decide=share(decided, resamples),
        p_fail=share(failed, resamples),
        measured_seeds=spec.values.shape[0],
        seeds=seeds,
    )


def control_power(
    spec: ControlSpec, seed_set: str, seeds: int, resamples: int, rng: np.random.Generator
) -> ControlPower:
    """P(control PASS) at ``seeds`` seeds from one seed set, the control as measured."""
    designs = normal_designs(spec.values, seeds, resamples, rng)
    passed = sum(_control_verdict(spec.judge, design) is Verdict.PASS for design in designs)
    return ControlPower(
        control=spec.name,
        seed_set=seed_set,
        p_pass=share(passed, resamples),
        allowed=1.0 - spec.level,
        measured_seeds=spec.values.shape[0],
        seeds=seeds,
    )


def _verdict(judge: Judge, design: FloatArray, shift: float) -> Verdict:
    """The verdict of one design; INCONCLUSIVE where the rule has no answer on it (a ValueError: a singular
    covariance, a non-positive mean), which counts as not deciding."""
    try:
        return judge(design, shift)[0]
    except ValueError:
        return Verdict.INCONCLUSIVE


def _control_verdict(judge: Callable[[FloatArray], Verdict], design: FloatArray) -> Verdict:
    """The control's verdict on one design (INCONCLUSIVE where the rule has no answer, as :func:`_verdict`)."""
    try:
        return judge(design)
    except ValueError:
        return Verdict.INCONCLUSIVE


@dataclass(frozen=True)
class SeedSetSpecs:
    """Every part and control of one claim on one seed set."""

    name: str
    parts: list[PartSpec]
    controls: list[ControlSpec]


@dataclass(frozen=True)
class DesignPower:
    """A claim's figures at one design (S seeds) on every seed set."""

    claim: str
    seeds: int
    resamples: int
    parts: list[PartPower]
    controls: list[ControlPower]

    @property
    def passes(self) -> bool:
        """Every part's and every control's gate passes on every seed set."""
        return all(p.passes for p in self.parts) and all(c.passes for c in self.controls)

    def failing(self) -> list[PartPower]:
        """The parts whose gate fails on some seed set."""
        return [p for p in self.parts if not p.passes]


def design_power(
    claim: str, sets: Sequence[SeedSetSpecs], seeds: int, resamples: int = RESAMPLES, seed: int = 0
) -> DesignPower:
    """Every part's and control's figures at ``seeds`` seeds on each of ``sets`` (at least two independent seed
    sets); set i draws from ``numpy.random.default_rng([seed, i])``.

    Raises:
        ValueError: on fewer than two seed sets.
    """
    if len(sets) < 2:
        raise ValueError(
            f"{len(sets)} seed set(s); the contract asks for power on at least two independent ones."
        )
    parts, controls = [], []
    for index, found in enumerate(sets):
        rng = np.random.default_rng([seed, index])
        parts += [part_power(spec, found.name, seeds, resamples, rng) for spec in found.parts]
        controls += [
            control_power(spec, found.name, spec.seeds or seeds, resamples, rng) for spec in found.controls
        ]
    return DesignPower(claim, seeds, resamples, parts, controls)


def markdown(power: DesignPower) -> str:
    """A claim's figures at one design as a Markdown table, one row per (part or control, seed set)."""
    lines = [
        f"| {power.claim} part (seed set) | bound | measured [CI] | P(decide) at | P(decide) | P(FAIL) at | "
        "P(FAIL) | P(control PASS) (allowed) | gate |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in power.parts:
        lines.append(
            f"| {p.part} ({p.seed_set}, {p.measured_seeds} seeds) | {p.bound:g} | {p.estimate:.3g} "
            f"[{p.ci_low:.3g}, {p.ci_high:.3g}] | {p.shrunk:.3g} | {p.p_decide} | {p.failing:.3g} | {p.p_fail} | "
            f"| {'passes' if p.passes else 'fails'} |"
        )
    for c in power.controls:
        lines.append(
            f"| control: {c.control} ({c.seed_set}, {c.measured_seeds} seeds) | | | | | | | {c.p_pass} "
            f"({c.allowed:.4f}) | {'passes' if c.passes else 'fails'} |"
        )
    lines.append(
        f"\nDesign: {power.seeds} seeds; {power.resamples} synthetic designs per seed set, each seed drawn from the "
        "normal law of the set's per-seed values (mean and covariance); Clopper-Pearson 95% intervals. The design "
        f"{'passes' if power.passes else 'fails'} its gates"
        + (
            f" (only {power.resamples} designs: the contract's gate needs {GATE_MINIMUM})."
            if power.resamples < GATE_MINIMUM
            else "."
        )
    )
    return "\n".join(lines)


class Engine(Protocol):
    """A claim's parts and controls on one seed set, built from that set's cells."""

    def specs(self, name: str) -> SeedSetSpecs:
        """Every part and control of the claim on the seed set called ``name``."""
        ...


def control_apart(record: CellRecord) -> str:
    """The default numbering of units: a claim's ``control`` arm numbers its own units (its count may differ from
    the claim arm's), every other arm shares the claim arm's numbering."""
    return "control" if record.cell.params.get("arm") == "control" else "claim"


@dataclass(frozen=True)
class EngineEntry:
    """How the one power method reads one claim.

    Attributes:
        build: (a seed set's cells, fidelity) -> the claim's :class:`Engine` on that set.
        unit: the cell parameter that numbers the claim's independent units (seeds, replicates, chunks with their
            own seeds): a single source is split into the halves of each group's units.
        design: fidelity -> the units the claim's design runs at that fidelity (the S its power is computed at).
        group: a cell -> the numbering its unit belongs to (:func:`control_apart` by default).
        series: for a claim some of whose cells carry no ``unit`` (one cell per point, each with its own seed: C1's
            family, C2's fixed series), a cell -> its series: a single source deals each series' cells, in the
            order of their parameters, alternately to the two halves; None leaves such cells out of the halves.
    """

    build: Callable[[list[CellRecord], Fidelity], Engine]
    unit: str
    design: Callable[[Fidelity], int]
    group: Callable[[CellRecord], str] = field(default=control_apart)
    series: Callable[[CellRecord], str] | None = None
